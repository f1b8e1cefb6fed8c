"""A trial's summaryMetrics as Determined's GetTrial returns them (its e2e test
test_trial_describe_metrics checks count, min, max, mean and type)."""

from __future__ import annotations

from typing import Any

import pytest

from pedl_webui.rest.summary import summary_metrics


def test_numbers_fold_into_count_min_max_mean_and_last() -> None:
    training = [{"x": 1.1**i, "loss": 2.0} for i in range(10)]
    got = summary_metrics(training, [{"acc": 0.5}, {"acc": 0.75}])
    x = got["avg_metrics"]["x"]
    assert x["count"] == 10 and x["min"] == 1 and x["max"] == pytest.approx(1.1**9)
    assert x["mean"] == pytest.approx(sum(1.1**i for i in range(10)) / 10) and x["type"] == "number"
    assert x["last"] == pytest.approx(1.1**9)
    assert got["validation_metrics"]["acc"] == {
        "count": 2, "min": 0.5, "max": 0.75, "mean": 0.625, "sum": 1.25, "last": 0.75, "type": "number",
    }  # fmt: skip


def test_a_group_without_reports_is_absent_and_non_numbers_keep_only_count_last_and_type() -> None:
    got = summary_metrics([{"phase": "warmup"}, {"phase": "main", "ok": True}], [])
    assert "validation_metrics" not in got and summary_metrics([], []) == {}
    assert got["avg_metrics"]["phase"] == {"count": 2, "last": "main", "type": "string"}
    assert got["avg_metrics"]["ok"] == {"count": 1, "last": True, "type": "boolean"}


def test_a_nan_report_makes_min_max_and_mean_nan_as_determineds_master_does() -> None:
    """Determined's e2e test_pause_and_nan_validations reports NaN losses; its master's min and max
    (Go's math.Min/Max) turn NaN for good once one is seen, spelled "NaN" in REST JSON."""
    from pedl_webui.rest.common import ok

    got = summary_metrics([{"loss": 1.0}, {"loss": float("nan")}, {"loss": 0.5}], [{"loss": float("nan")}])
    body = ok(got).body.decode()
    training = '"avg_metrics":{"loss":{"count":3,"min":"NaN","max":"NaN","mean":"NaN","sum":"NaN","last":0.5'
    assert training in body
    assert '"validation_metrics":{"loss":{"count":1,"min":"NaN","max":"NaN"' in body


def test_custom_groups_sit_under_their_own_names_as_determineds_master_keeps_them() -> None:
    """`det trial describe --json` and the SDK's `summary_metrics` read a custom group there."""
    fps = {"count": 1, "min": 9.5, "max": 9.5, "mean": 9.5, "sum": 9.5, "last": 9.5, "type": "number"}
    got = summary_metrics([{"loss": 1.0}], [], {"inference": {"fps": fps}})
    assert got == {"avg_metrics": {"loss": got["avg_metrics"]["loss"]}, "inference": {"fps": fps}}


def test_the_rest_trials_summary_takes_the_groups_from_gettrials_first_page() -> None:
    from pedl._metrics import to_struct
    from pedl.metric_summary import fold
    from pedl.v1 import scheduler_pb2
    from pedl_webui.rest.common import Caller
    from pedl_webui.rest.workloads import summary_of

    first = scheduler_pb2.GetTrialResponse(
        steps=[scheduler_pb2.Step(total_batches=10, metrics=to_struct({"loss": 1.0}))], next_page_token="10"
    )
    first.metric_groups.add(
        group="inference", reports=2, last_batches=20, metrics=to_struct(fold([{"fps": 3}] * 2))
    )
    pages = iter([first, scheduler_pb2.GetTrialResponse()])

    class Gateway:
        def call(self, token: str, method: str, message: Any) -> scheduler_pb2.GetTrialResponse:
            assert method == "GetTrial" and message.group_figures
            return next(pages)

    got = summary_of(Caller(Gateway(), "t"), 7)  # type: ignore[arg-type]
    assert got["inference"] == {
        "fps": {"count": 2, "min": 3.0, "max": 3.0, "mean": 3.0, "sum": 6.0, "last": 3.0, "type": "number"}
    }
    assert got["avg_metrics"]["loss"]["count"] == 1
