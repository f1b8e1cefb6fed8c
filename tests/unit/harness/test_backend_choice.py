"""A trial's ranks choose one torch.distributed backend together: NCCL when all have a GPU, gloo when
none has, and a clear error on every rank (instead of a hang) when a gang mixes GPU and CPU slots."""

from __future__ import annotations

import threading

import pytest

from pedl.harness.distributed import MixedDevices, agree_backend, choose_backend

dist = pytest.importorskip("torch.distributed")


def test_all_gpus_choose_nccl_and_no_gpus_choose_gloo() -> None:
    assert choose_backend([True, True]) == "nccl"
    assert choose_backend([False, False, False]) == "gloo"


def test_a_gang_mixing_gpu_and_cpu_slots_is_refused_naming_the_ranks() -> None:
    with pytest.raises(MixedDevices, match="ranks 0 of this trial run on GPU slots and ranks 1, 2 on CPU"):
        choose_backend([True, False, False])


def run_ranks(has_cuda: list[bool]) -> list[object]:
    """Each rank in a thread, agreeing through one real store as the ranks of a trial do."""
    store = dist.HashStore()
    results: list[object] = [None] * len(has_cuda)

    def rank(r: int) -> None:
        try:
            results[r] = agree_backend(store, r, len(has_cuda), has_cuda[r])
        except MixedDevices as exc:
            results[r] = exc

    threads = [threading.Thread(target=rank, args=(r,)) for r in range(len(has_cuda))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    return results


def test_ranks_agree_through_the_rendezvous_store() -> None:
    assert run_ranks([True, True]) == ["nccl", "nccl"]
    assert run_ranks([False, False]) == ["gloo", "gloo"]
    mixed = run_ranks([True, False])
    assert all(isinstance(r, MixedDevices) for r in mixed), mixed
