"""PyTorchTrialController across 2 gloo processes: disjoint shards, reduced metrics, exact resume."""

from __future__ import annotations

import datetime
import os
import pickle
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from pytorch_toy_trials import ToyTrial, toy_loaders
from torch.utils.data import TensorDataset

from pedl.harness.build import seed_all
from pedl.pytorch import DataLoader, PyTorchTrialController
from pedl.pytorch._distributed import ShardSampler
from support.processes import on_a_free_port

WORLD = 2
TIMEOUT_S = 180


def run_ranks(fn: Callable[..., None], out: Path, *args: Any) -> list[Any]:
    """Runs fn(rank, *args) in WORLD spawned gloo processes; returns what each returned, by rank. On a
    new rendezvous port should another process take the picked one before rank 0 binds it."""
    return on_a_free_port(lambda port: _run_ranks_on(port, fn, out, *args))


def _run_ranks_on(port: int, fn: Callable[..., None], out: Path, *args: Any) -> list[Any]:
    out.mkdir(parents=True, exist_ok=True)
    ctx = mp.start_processes(
        _entry, args=(fn, port, out, args), nprocs=WORLD, join=False, start_method="spawn"
    )
    try:
        deadline = time.monotonic() + TIMEOUT_S
        while not ctx.join(timeout=1):
            assert time.monotonic() < deadline, "the ranks did not finish"
    finally:
        for p in ctx.processes:
            if p.is_alive():
                os.kill(p.pid, signal.SIGKILL)
                p.join()
    return [pickle.loads((out / f"rank{r}").read_bytes()) for r in range(WORLD)]


def _entry(rank: int, fn: Callable[..., Any], port: int, out: Path, args: tuple[Any, ...]) -> None:
    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=WORLD,
        timeout=datetime.timedelta(seconds=60),
    )
    try:
        result = fn(rank, *args)
        (out / f"rank{rank}").write_bytes(pickle.dumps(result))
        dist.barrier()
    finally:
        dist.destroy_process_group()
    # As the harness does: skip interpreter teardown, which can abort with gloo's threads around.
    os._exit(0)


# --- sharding -------------------------------------------------------------------------------------


def test_shards_partition_an_epoch_and_training_shards_are_padded_to_equal_length() -> None:
    batches = [[i] for i in range(7)]
    exact = [list(ShardSampler(batches, r, 3, pad=False)) for r in range(3)]
    assert exact == [[[0], [3], [6]], [[1], [4]], [[2], [5]]]
    assert [len(ShardSampler(batches, r, 3, pad=False)) for r in range(3)] == [3, 2, 2]
    padded = [list(ShardSampler(batches, r, 3, pad=True)) for r in range(3)]
    assert padded == [[[0], [3], [6]], [[1], [4], [0]], [[2], [5], [1]]]
    assert all(len(ShardSampler(batches, r, 3, pad=True)) == 3 for r in range(3))
    with pytest.raises(ValueError, match="rank 3 is not in"):
        ShardSampler(batches, 3, 3, pad=True)


class RecordingTrial(ToyTrial):
    """Remembers every training input it saw; label_mean shows which batches a metric covered."""

    seen: list[float]

    def training_metrics(self, predictions: Any, labels: Any, losses: Any) -> dict[str, Any]:
        return {"label_mean": labels.float().mean()}

    def validation_metrics(self, predictions: Any, labels: Any, losses: Any) -> dict[str, Any]:
        return {
            "label_mean": labels.float().mean(),
            "vector": torch.stack([labels.float().mean(), labels[0]]),
        }


def indexed_loader(n: int, batch_size: int, shuffle: bool) -> DataLoader:
    """Sample i has input [i, i, i, i] and label i % 3."""
    x = torch.arange(n, dtype=torch.float32).unsqueeze(1).repeat(1, 4)
    return DataLoader(TensorDataset(x, torch.arange(n) % 3), batch_size=batch_size, shuffle=shuffle)


def _shard_worker(rank: int) -> dict[str, Any]:
    seed_all(7)
    trial = RecordingTrial({})
    seen: list[int] = []
    original = trial.build_model

    def build(hparams: dict[str, Any]) -> torch.nn.Module:
        model = original(hparams)
        model.register_forward_pre_hook(lambda _m, inp: seen.extend(int(v) for v in inp[0][:, 0]))
        return model

    trial.build_model = build  # type: ignore[method-assign]
    ctl = PyTorchTrialController(trial, indexed_loader(40, 5, True), indexed_loader(25, 5, False))
    step = ctl.train_until(4)  # 4 global steps: one epoch of 8 batches over both ranks
    trained = list(seen)
    seen.clear()
    validation = ctl.validate()
    return {
        "trained": trained,
        "validated": list(seen),
        "step": step,
        "validation": validation,
        "position": (ctl._stream.epoch, ctl._stream.offset),
    }


def test_two_ranks_train_disjoint_shards_and_report_metrics_over_all_of_them(tmp_path: Path) -> None:
    r0, r1 = run_ranks(_shard_worker, tmp_path)
    assert set(r0["trained"]).isdisjoint(r1["trained"])
    assert sorted(r0["trained"] + r1["trained"]) == list(range(40))
    assert sorted(r0["validated"] + r1["validated"]) == list(range(25))  # 5 batches: 3 + 2, no padding
    assert r0["position"] == r1["position"] == (1, 0)
    # Both ranks report the same metrics: those of the 8 batches together.
    assert r0["step"] == r1["step"]
    assert r0["step"].num_batches == 4 and r0["step"].num_inputs == 40
    labels = [i % 3 for i in r0["trained"] + r1["trained"]]
    assert r0["step"].metrics["label_mean"] == pytest.approx(sum(labels) / 40)
    # Validation: the mean over the 5 batches, as one process validating all 25 samples gets.
    assert r0["validation"] == r1["validation"]
    seed_all(7)
    single = PyTorchTrialController(
        RecordingTrial({}), indexed_loader(40, 5, True), indexed_loader(25, 5, False)
    )
    expected = single.validate()
    assert r0["validation"]["label_mean"] == pytest.approx(expected["label_mean"])
    assert r0["validation"]["vector"] == pytest.approx(expected["vector"])


# --- exact resume ---------------------------------------------------------------------------------


def _train(ctl: PyTorchTrialController, targets: list[int]) -> list[Any]:
    out: list[Any] = []
    for target in targets:
        out.append(ctl.train_until(target).metrics)
        out.append(ctl.validate())
    return out


def _resume_worker(rank: int, phase: str, checkpoint: str) -> dict[str, Any]:
    seed_all(3)
    ctl = PyTorchTrialController(ToyTrial({"lr": 0.05}), *toy_loaders())
    if phase == "uninterrupted":
        return {"metrics": _train(ctl, [2, 5, 9, 14])}
    if phase == "first":
        metrics = _train(ctl, [2, 5])
        directory = Path(checkpoint) / f"save{rank}"
        directory.mkdir()
        ctl.save(directory)  # every rank calls save; only the chief writes
        return {"metrics": metrics, "files": sorted(p.name for p in directory.iterdir())}
    ctl.load(Path(checkpoint) / "save0")
    return {"metrics": _train(ctl, [9, 14])}


def test_a_resumed_two_rank_trial_matches_an_uninterrupted_one_bit_for_bit(tmp_path: Path) -> None:
    whole = run_ranks(_resume_worker, tmp_path / "a", "uninterrupted", "")
    first = run_ranks(_resume_worker, tmp_path / "b", "first", str(tmp_path))
    assert first[0]["files"] and first[1]["files"] == []
    second = run_ranks(_resume_worker, tmp_path / "c", "second", str(tmp_path))
    for rank in range(WORLD):
        assert first[rank]["metrics"] + second[rank]["metrics"] == whole[rank]["metrics"]
    assert whole[0]["metrics"] == whole[1]["metrics"]
    # NoisyDataset has 37 samples = 8 batches, 4 per rank: the run crosses 3 epochs and a padded round.
    assert len(whole[0]["metrics"]) == 8


def test_a_single_process_is_untouched_without_a_process_group() -> None:
    seed_all(3)
    ctl = PyTorchTrialController(ToyTrial({}), *toy_loaders())
    assert ctl._ranks is None and ctl._train_model is ctl.model
    assert ctl.training_loader.batch_size == 5
