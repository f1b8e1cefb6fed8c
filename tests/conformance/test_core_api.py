"""Determined's Core API as its documentation describes it (docs.determined.ai, "Core API" user
guide and the `determined.core` API reference), checked against pedl's `determined` package.

Off a cluster `det.core.init()` runs in dummy mode; on one, the same calls go to the trial's harness
(tests/integration/test_core_api.py runs the scripts there).
"""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
COMPAT = ROOT / "sdk" / "compat"
if str(COMPAT) not in sys.path:
    sys.path.insert(0, str(COMPAT))

import determined as det  # noqa: E402
from determined import core  # noqa: E402


@pytest.fixture
def ctx(tmp_path, monkeypatch):
    for name in ("PEDL_CORE_API_SOCKET", "PEDL_CLUSTER_INFO", "WORLD_SIZE"):
        monkeypatch.delenv(name, raising=False)
    with det.core.init(checkpoint_storage=str(tmp_path / "ckpts")) as context:
        yield context


# --- det.get_cluster_info and det.core.init ---------------------------------------------------


def test_cluster_info_is_none_off_cluster(monkeypatch) -> None:
    monkeypatch.delenv("PEDL_CLUSTER_INFO", raising=False)
    assert det.get_cluster_info() is None


def test_init_off_cluster_gives_every_context_in_dummy_mode(ctx) -> None:
    assert isinstance(ctx, core.Context)
    for name in ("train", "checkpoint", "preempt", "searcher", "distributed"):
        assert getattr(ctx, name) is not None
    assert (ctx.distributed.rank, ctx.distributed.size) == (0, 1)
    assert (ctx.distributed.local_rank, ctx.distributed.local_size) == (0, 1)
    assert (ctx.distributed.cross_rank, ctx.distributed.cross_size) == (0, 1)
    assert ctx.info is None


def test_init_refuses_a_distributed_that_is_not_a_distributed_context() -> None:
    with pytest.raises(TypeError, match="DistributedContext"):
        det.core.init(distributed="two workers")


def test_init_refuses_unknown_arguments() -> None:
    with pytest.raises(TypeError, match="unexpected"):
        det.core.init(storage_manager=None)


def test_init_takes_a_shared_fs_mapping_for_dummy_checkpoints(tmp_path) -> None:
    storage = {"type": "shared_fs", "host_path": str(tmp_path), "storage_path": "sub"}
    with det.core.init(checkpoint_storage=storage) as context:
        with context.checkpoint.store_path() as (path, storage_id):
            (path / "f").write_text("x")
    assert (tmp_path / "sub" / storage_id / "f").read_text() == "x"


def test_init_refuses_other_checkpoint_storage_off_cluster() -> None:
    with pytest.raises(ValueError, match="shared_fs"):
        det.core.init(checkpoint_storage={"type": "s3", "bucket": "b"})


# --- core_context.train -----------------------------------------------------------------------


def test_training_and_validation_metrics_take_steps_completed_and_a_dict(ctx) -> None:
    ctx.train.report_training_metrics(steps_completed=10, metrics={"loss": 0.5})
    ctx.train.report_training_metrics(steps_completed=20, metrics={"loss": 0.25, "acc": [1, 2]})
    ctx.train.report_validation_metrics(steps_completed=20, metrics={"val_loss": 0.3})
    ctx.train.report_progress(0.5)


def test_metric_values_may_be_numpy_or_torch_scalars(ctx) -> None:
    import numpy as np
    import torch

    ctx.train.report_training_metrics(
        steps_completed=1, metrics={"a": np.float32(1.5), "b": torch.tensor(2.0)}
    )


def test_a_non_increasing_steps_completed_is_refused(ctx) -> None:
    ctx.train.report_training_metrics(steps_completed=10, metrics={"loss": 1.0})
    for steps in (10, 5):
        with pytest.raises(ValueError, match=f"steps_completed must increase.*got {steps} after 10"):
            ctx.train.report_training_metrics(steps_completed=steps, metrics={"loss": 1.0})
    # Validation reports count on their own.
    ctx.train.report_validation_metrics(steps_completed=10, metrics={"loss": 1.0})


@pytest.mark.parametrize("steps", [-1, 1.5, "10", True, None])
def test_steps_completed_must_be_a_non_negative_int(ctx, steps) -> None:
    with pytest.raises(ValueError, match="steps_completed must be a non-negative int"):
        ctx.train.report_training_metrics(steps_completed=steps, metrics={"loss": 1.0})


def test_metrics_must_be_a_dict_of_values(ctx) -> None:
    with pytest.raises(TypeError, match="metrics must be a dict"):
        ctx.train.report_training_metrics(steps_completed=1, metrics=[("loss", 1.0)])
    with pytest.raises(TypeError, match="metric names"):
        ctx.train.report_training_metrics(steps_completed=1, metrics={1: 1.0})
    # NaN and infinities are reported as they are, as Determined stores them.
    ctx.train.report_validation_metrics(steps_completed=1, metrics={"loss": math.nan, "up": math.inf})
    with pytest.raises(TypeError, match="'loss' must be a number"):
        ctx.train.report_training_metrics(steps_completed=1, metrics={"loss": object()})


def test_progress_is_a_fraction(ctx) -> None:
    with pytest.raises(ValueError, match="from 0 to 1"):
        ctx.train.report_progress(1.5)


def test_batch_metrics_are_refused_with_what_to_do_instead(ctx) -> None:
    with pytest.raises(ValueError, match="batch_metrics"):
        ctx.train.report_training_metrics(steps_completed=1, metrics={"loss": 1.0}, batch_metrics=[{}])


def test_early_exit_takes_an_early_exit_reason(ctx) -> None:
    ctx.train.report_early_exit(core.EarlyExitReason.INVALID_HP)
    with pytest.raises(TypeError, match="EarlyExitReason"):
        ctx.train.report_early_exit("INVALID_HP")


def test_reporting_after_close_is_an_error(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv("PEDL_CORE_API_SOCKET", raising=False)
    with det.core.init(checkpoint_storage=str(tmp_path)) as context:
        pass
    with pytest.raises(RuntimeError, match="after the core context was closed"):
        context.train.report_training_metrics(steps_completed=1, metrics={"loss": 1.0})
    with pytest.raises(RuntimeError, match="closed"):
        context.preempt.should_preempt()
    with pytest.raises(RuntimeError, match="closed"):
        with context.checkpoint.store_path():
            pass


# --- core_context.checkpoint ------------------------------------------------------------------


def test_store_path_yields_a_directory_and_storage_id_that_restore_path_gives_back(ctx) -> None:
    with ctx.checkpoint.store_path({"steps_completed": 5}) as (path, storage_id):
        assert isinstance(path, Path) and path.is_dir()
        (path / "weights").write_bytes(b"\x00\x01")
        (path / "nested").mkdir()
        (path / "nested" / "state.txt").write_text("5")
    assert isinstance(storage_id, str) and storage_id
    with ctx.checkpoint.restore_path(storage_id) as restored:
        assert (restored / "weights").read_bytes() == b"\x00\x01"
        assert (restored / "nested" / "state.txt").read_text() == "5"
    assert not restored.exists()  # removed when the block exits
    assert ctx.checkpoint.get_metadata(storage_id) == {"steps_completed": 5}


def test_a_store_path_block_that_raises_stores_nothing(ctx, tmp_path) -> None:
    with pytest.raises(KeyError):
        with ctx.checkpoint.store_path() as (path, storage_id):
            (path / "half").write_text("x")
            raise KeyError("boom")
    with pytest.raises(det.core.CoreApiError, match="no checkpoint"):
        ctx.checkpoint.download(storage_id, tmp_path / "out")


def test_upload_and_download_with_a_selector(ctx, tmp_path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    for name in ("a.pt", "b.txt"):
        (src / name).write_text(name)
    storage_id = ctx.checkpoint.upload(src, {"epoch": 1}, selector=lambda p: p.endswith(".pt"))
    out = tmp_path / "out"
    ctx.checkpoint.download(storage_id, out)
    assert sorted(p.name for p in out.iterdir()) == ["a.pt", "metadata.json"]
    only_meta = tmp_path / "only"
    ctx.checkpoint.download(storage_id, only_meta, selector=lambda p: p == "metadata.json")
    assert [p.name for p in only_meta.iterdir()] == ["metadata.json"]
    assert ctx.checkpoint.get_metadata(storage_id) == {"epoch": 1}


def test_checkpoint_calls_refuse_bad_arguments(ctx, tmp_path) -> None:
    with pytest.raises(TypeError, match="metadata must be a dict"):
        with ctx.checkpoint.store_path(metadata=["x"]):
            pass
    with pytest.raises(TypeError, match="JSON"):
        with ctx.checkpoint.store_path(metadata={"x": object()}):
            pass
    with pytest.raises(ValueError, match="storage_id"):
        with ctx.checkpoint.restore_path(""):
            pass
    with pytest.raises(ValueError, match="ckpt_dir is required"):
        ctx.checkpoint.upload(None)
    with pytest.raises(det.core.CoreApiError, match="no checkpoint"):
        ctx.checkpoint.get_metadata("not-a-checkpoint")


# --- core_context.preempt and core_context.searcher --------------------------------------------


def test_dummy_mode_never_preempts(ctx) -> None:
    assert ctx.preempt.should_preempt() is False
    assert ctx.preempt.should_preempt(auto_ack=False) is False


def test_dummy_searcher_hands_out_one_operation_to_complete(ctx) -> None:
    ops = []
    for op in ctx.searcher.operations():
        assert op.length == 1
        op.report_progress(0.5)
        op.report_completed(0.1)
        ops.append(op)
    assert len(ops) == 1
    with pytest.raises(RuntimeError, match="after report_completed"):
        ops[0].report_completed(0.1)


def test_an_operation_left_uncompleted_is_an_error(ctx) -> None:
    with pytest.raises(RuntimeError, match="without op.report_completed"):
        for _op in ctx.searcher.operations():
            pass


def test_report_completed_needs_a_finite_number(ctx) -> None:
    for op in ctx.searcher.operations():
        with pytest.raises(ValueError, match="finite number"):
            op.report_completed(math.inf)
        with pytest.raises(ValueError, match="finite number"):
            op.report_completed("0.1")
        op.report_completed(0.5)


# --- core_context.distributed -----------------------------------------------------------------


def test_distributed_context_from_torch_distributed_reads_torchrun_environment(monkeypatch) -> None:
    for name, value in dict(RANK="3", WORLD_SIZE="4", LOCAL_RANK="1", LOCAL_WORLD_SIZE="2").items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("GROUP_RANK", raising=False)
    d = core.DistributedContext.from_torch_distributed()
    assert (d.rank, d.size, d.local_rank, d.local_size, d.cross_rank, d.cross_size) == (3, 4, 1, 2, 1, 2)
    assert (d.get_rank(), d.get_size(), d.get_local_rank(), d.get_cross_size()) == (3, 4, 1, 2)


def test_from_torch_distributed_without_its_environment_names_the_variable(monkeypatch) -> None:
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    with pytest.raises(RuntimeError, match="WORLD_SIZE"):
        core.DistributedContext.from_torch_distributed()


def test_distributed_context_checks_its_ranks() -> None:
    with pytest.raises(ValueError, match="rank=4"):
        core.DistributedContext(rank=4, size=4, local_rank=0, local_size=4, cross_rank=0, cross_size=1)
    with pytest.raises(ValueError, match="local_size"):
        core.DistributedContext(rank=0, size=3, local_rank=0, local_size=2, cross_rank=0, cross_size=1)


def test_one_process_collectives_return_its_own_values() -> None:
    d = core.DummyDistributedContext()
    assert d.allgather({"x": 1}) == [{"x": 1}]
    assert d.gather(2) == [2]
    assert d.broadcast(3) == 3
    assert d.allgather_local(4) == [4]
    assert d.broadcast_local(5) == 5


def test_horovod_and_deepspeed_contexts_are_refused_with_what_to_use() -> None:
    for make in (core.DistributedContext.from_horovod, core.DistributedContext.from_deepspeed):
        with pytest.raises(RuntimeError, match="from_torch_distributed"):
            make()


# --- det.launch --------------------------------------------------------------------------------


def test_torch_distributed_launcher_runs_the_wrapped_command(tmp_path) -> None:
    env = {"PYTHONPATH": str(COMPAT), "PATH": str(Path(sys.executable).parent)}
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "determined.launch.torch_distributed",
            "--trust-worker-addrs",
            "--",
            sys.executable,
            "-c",
            "print('worker ran')",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "worker ran"


def test_other_launchers_are_refused_clearly() -> None:
    env = {"PYTHONPATH": str(COMPAT)}
    out = subprocess.run(
        [sys.executable, "-m", "determined.launch.horovod", "python3", "train.py"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode != 0
    assert "determined.launch.horovod is not offered by pedl" in out.stderr


# --- our examples, off cluster ----------------------------------------------------------------


def test_the_core_api_example_runs_off_cluster_in_dummy_mode(tmp_path) -> None:
    env = {
        "PYTHONPATH": str(COMPAT),
        "XDG_DATA_HOME": str(tmp_path),
        "PATH": str(Path(sys.executable).parent),
    }
    out = subprocess.run(
        [sys.executable, "train.py", "--steps", "20"],
        cwd=ROOT / "examples" / "core_api",
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert "validation metrics at steps_completed=20" in out.stderr
    assert len(list((tmp_path / "determined" / "checkpoints").iterdir())) == 2
