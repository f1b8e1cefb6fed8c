"""Keras data on several workers: disjoint shards of every kind of source, restorable positions,
TF_CONFIG, and the errors of a bad multi-worker start."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import tensorflow as tf
from keras_toy_trials import toy_data

from pedl.harness.build import seed_all
from pedl.harness.distributed import Launch, host_port, is_peer_failure, reachable_host
from pedl.keras import _distributed
from pedl.keras._data import (
    Shard,
    TrainingStream,
    check_source,
    shard_items,
    validation_batches,
)

KINDS = ["dataset", "arrays", "pydataset", "generator"]


@pytest.mark.parametrize(("n", "count"), [(8, 2), (7, 2), (10, 4), (3, 4), (1, 2)])
def test_shards_partition_an_epoch_and_padding_evens_them_out(n: int, count: int) -> None:
    shards = [Shard(i, count) for i in range(count)]
    exact = [s.batches(n, pad=False) for s in shards]
    assert sorted(b for own in exact for b in own) == list(range(n))
    padded = [s.batches(n, pad=True) for s in shards]
    assert {len(own) for own in padded} == {-(-n // count)}
    for own, extra in zip(exact, padded, strict=True):
        assert extra[: len(own)] == own and set(extra) <= set(range(n))
    for shard, own in zip(shards, padded, strict=True):  # an iterator of unknown length is cut alike
        assert list(shard_items(iter(range(n)), shard, pad=True)) == own
        assert list(shard_items(iter(range(n)), shard, pad=False)) == shard.batches(n, pad=False)


def test_a_shard_outside_the_workers_is_refused() -> None:
    with pytest.raises(ValueError, match=r"worker index 2 is not in \[0, 2\)"):
        Shard(2, 2)


def _source(kind: str) -> Any:
    """The training source as every worker makes it: after the same seeding (tf.data shuffles)."""
    seed_all(0)
    training, _ = toy_data(kind)
    return check_source(training, "training", "make_data_loaders()", 8, "batch_size()")


def _rows(batch: Any) -> set[tuple[float, ...]]:
    return {tuple(row) for row in np.asarray(batch[0]).round(6)}


def _take(stream: TrainingStream, n: int) -> list[Any]:
    return [stream.next() for _ in range(n)]


@pytest.mark.parametrize("kind", KINDS)
def test_two_workers_read_disjoint_halves_of_every_epoch(kind: str) -> None:
    # 60 samples in 8 batches an epoch: 4 per worker and epoch.
    streams = [TrainingStream(_source(kind), 5, Shard(i, 2)) for i in range(2)]
    whole = TrainingStream(_source(kind), 5)
    for _ in range(3):
        epoch = [_take(s, 4) for s in streams]
        expected = _take(whole, 8)
        mine = [set().union(*(_rows(b) for b in batches)) for batches in epoch]
        assert mine[0].isdisjoint(mine[1])
        assert mine[0] | mine[1] == set().union(*(_rows(b) for b in expected))


@pytest.mark.parametrize("kind", KINDS)
def test_a_sharded_stream_resumes_at_its_position(kind: str) -> None:
    stream = TrainingStream(_source(kind), 5, Shard(1, 2))
    _take(stream, 6)  # mid-way through the second epoch
    state = stream.state()
    expected = [_rows(b) for b in _take(stream, 5)]
    resumed = TrainingStream(_source(kind), 5, Shard(1, 2))
    sample = resumed.sample()  # what the distributed controller builds its model from
    resumed.restore(state)
    assert [_rows(b) for b in _take(resumed, 5)] == expected
    if kind == "dataset":
        assert sample == resumed.source.element_spec
    else:
        assert _rows(sample) == _rows(TrainingStream(_source(kind), 5, Shard(1, 2)).next())


@pytest.mark.parametrize("kind", KINDS)
def test_validation_shards_are_an_exact_partition(kind: str) -> None:
    _, validation = toy_data(kind)
    source = check_source(validation, "validation", "make_data_loaders()", 8, "batch_size()")
    parts = [[_rows(b) for b in validation_batches(source, Shard(i, 2))] for i in range(2)]
    everything = [_rows(b) for b in validation_batches(source, Shard(0, 1))]
    assert sorted(map(sorted, parts[0] + parts[1])) == sorted(map(sorted, everything))
    assert len(parts[0]) >= len(parts[1]) >= len(everything) // 2


def test_tf_config_lists_every_worker_and_names_this_one() -> None:
    addresses = ["10.0.0.1:2000", "10.0.0.2:2001", host_port("::1", 2002)]
    assert _distributed.tf_config(addresses, 1) == {
        "cluster": {"worker": ["10.0.0.1:2000", "10.0.0.2:2001", "[::1]:2002"]},
        "task": {"type": "worker", "index": 1},
    }


@pytest.mark.parametrize(
    ("addresses", "index", "error"),
    [
        (["h:1"], 0, "at least 2 worker addresses"),
        (["h:1", "h"], 0, "'h' is not host:port"),
        (["h:1", "h:0"], 0, "'h:0' is not host:port"),
        (["h:1", "h:1"], 0, "must be distinct"),
        (["h:1", "h:2"], 2, r"worker index 2 is not in \[0, 2\)"),
    ],
)
def test_bad_worker_lists_are_refused(addresses: list[str], index: int, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        _distributed.tf_config(addresses, index)


def test_tensorflow_ops_before_the_start_get_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TF_CONFIG", "")  # restored after the test
    tf.constant(1.0)  # this process has long run TensorFlow ops
    with pytest.raises(RuntimeError, match="the model definition already ran one when imported"):
        _distributed.start(["127.0.0.1:1", "127.0.0.1:2"], 0)
    assert _distributed.current() is None


def test_a_lost_tensorflow_peer_is_a_peer_failure() -> None:
    lost = tf.errors.UnavailableError(None, None, "Collective ops is aborted by: failed to connect")
    assert is_peer_failure(lost)
    assert not is_peer_failure(tf.errors.InvalidArgumentError(None, None, "bad shape"))


def test_each_rank_is_reached_on_its_own_machine() -> None:
    # The chief's machine at the rendezvous address the scheduler gave; another machine at the
    # interface that routes to it (loopback here).
    assert reachable_host(Launch(1, 1, 4, 2, "10.1.2.3", 29500)) == "10.1.2.3"
    assert reachable_host(Launch(2, 0, 4, 2, "127.0.0.1", 29500)) == "127.0.0.1"
