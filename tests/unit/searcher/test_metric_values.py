"""NaN and infinite metrics, as Determined keeps them: reported and stored as they are, returned by
its REST API as "NaN"/"Infinity"/"-Infinity", and never ranked a trial's or experiment's best."""

from __future__ import annotations

import math
from typing import Any

import pytest

from pedl._metrics import from_struct, to_struct
from pedl.harness.compat import ensure_determined_importable
from pedl.searcher._metric import MetricError, is_better, searcher_metric

ensure_determined_importable()

from determined.core._distributed import DistributedContext  # noqa: E402
from determined.core._train import TrainContext  # noqa: E402

NAN, INF = float("nan"), float("inf")


def test_a_struct_with_nan_and_infinities_reads_back_as_floats() -> None:
    back = from_struct(
        to_struct({"loss": NAN, "up": INF, "down": -INF, "nested": {"v": [1.5, NAN]}, "s": "x"})
    )
    assert math.isnan(back["loss"]) and back["up"] == INF and back["down"] == -INF
    assert back["nested"]["v"][0] == 1.5 and math.isnan(back["nested"]["v"][1]) and back["s"] == "x"


def test_a_nan_searcher_metric_is_read_but_never_beats_a_best() -> None:
    assert math.isnan(searcher_metric({"error": NAN}, "error"))
    assert searcher_metric({"error": INF}, "error") == INF
    for smaller in (True, False):
        assert not is_better(NAN, None, smaller)  # not even the first
        assert not is_better(NAN, 0.5, smaller)
        assert is_better(0.5, NAN, smaller)
    assert is_better(-INF, 0.5, True) and not is_better(INF, 0.5, True)
    with pytest.raises(MetricError, match="must be a number, got 'high'"):
        searcher_metric({"error": "high"}, "error")
    with pytest.raises(MetricError, match="must be a number, got True"):
        searcher_metric({"error": True}, "error")


class _Recorded:
    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def call(self, method: str, **kwargs: Any) -> Any:
        self.calls.append((method, kwargs))

    def close(self) -> None:
        pass


def test_a_script_reports_nan_and_infinite_metrics_as_they_are() -> None:
    link = _Recorded()
    dist = DistributedContext(rank=0, size=1, local_rank=0, local_size=1, cross_rank=0, cross_size=1)
    train = TrainContext(link, dist)
    train.report_training_metrics(1, {"loss": NAN, "grad": INF})
    train.report_validation_metrics(1, {"loss": -INF})
    (_, first), (_, second) = link.calls
    assert math.isnan(first["metrics"]["loss"]) and first["metrics"]["grad"] == INF
    assert second["metrics"] == {"loss": -INF}
