"""What a script may report as a trial's metrics (ReportTrialMetrics), checked before anything is
stored: the kind, steps_completed, numeric values and the report's time."""

from __future__ import annotations

import pytest

from pedl._metrics import to_struct
from pedl.v1 import scheduler_pb2
from pedl_scheduler.metric_reports import MetricReport, ReportError

TRAINING, VALIDATION = scheduler_pb2.METRIC_KIND_TRAINING, scheduler_pb2.METRIC_KIND_VALIDATION


def request(metrics: dict, kind: int = TRAINING, steps: int = 10, when: str = ""):  # noqa: ANN201
    return scheduler_pb2.ReportTrialMetricsRequest(
        trial_id=7, kind=kind, steps_completed=steps, metrics=to_struct(metrics), report_time=when
    )


def test_a_report_keeps_its_values_steps_and_kind() -> None:
    report = MetricReport.from_request(request({"loss": 3.3, "per_class": [0.5, 1.0]}, VALIDATION, 40))
    assert (report.trial_id, report.kind, report.steps_completed) == (7, "validation", 40)
    assert report.metrics == {"loss": 3.3, "per_class": [0.5, 1.0]}
    assert report.report_time == ""  # stored at the time it arrives


def test_the_time_the_script_gives_is_kept_in_utc() -> None:
    report = MetricReport.from_request(request({"x": 1}, when="2025-03-01T12:00:00.5+02:00"))
    assert report.report_time == "2025-03-01T10:00:00.500Z"


@pytest.mark.parametrize(
    ("metrics", "kind", "steps", "when", "message"),
    [
        (
            {"loss": "low"},
            TRAINING,
            1,
            "",
            "metric 'loss' must be a number (or a list of numbers), got",
        ),
        ({"ok": True}, TRAINING, 1, "", "metric 'ok' must be a number"),
        ({"nested": {"a": 1}}, VALIDATION, 1, "", "metric 'nested' must be a number"),
        ({"mixed": [1, "a"]}, VALIDATION, 1, "", "metric 'mixed' must be a number"),
        ({"none": None}, TRAINING, 1, "", "metric 'none' must be a number"),
        ({}, TRAINING, 1, "", "the report holds no metrics"),
        ({"loss": float("nan")}, TRAINING, 1, "", "metric 'loss' must be a finite number"),
        ({"loss": [float("inf")]}, TRAINING, 1, "", "metric 'loss' must be a finite number"),
        ({"x": 1}, scheduler_pb2.METRIC_KIND_UNSPECIFIED, 1, "", "kind must be"),
        ({"x": 1}, TRAINING, -1, "", "steps_completed must be 0 or more, got -1"),
        ({"x": 1}, TRAINING, 1, "yesterday", "report_time must be an RFC 3339 time"),
        ({"x": 1}, TRAINING, 1, "2025-03-01T12:00:00", "report_time must name its time zone"),
    ],
)
def test_bad_reports_are_refused_with_one_line(
    metrics: dict, kind: int, steps: int, when: str, message: str
) -> None:
    with pytest.raises(ReportError) as info:
        MetricReport.from_request(request(metrics, kind, steps, when))
    assert message in str(info.value)
    assert "\n" not in str(info.value)
