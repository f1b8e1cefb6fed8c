"""`ReportTrialMetrics` on a real scheduler database: a script's report lands as the trial's own
results do (a step row or a validation row), once per steps_completed, and only from the
experiment's owner, an admin, or the token of the trial's own live run."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path

import grpc
import pytest

from pedl import records
from pedl._metrics import to_struct
from pedl.v1 import scheduler_pb2
from pedl_scheduler.api import SchedulerApi
from pedl_scheduler.cluster import Cluster
from pedl_scheduler.experiments import ExperimentManager
from pedl_scheduler.storage import open_storage
from pedl_scheduler.storage.ops import results as result_ops
from pedl_scheduler.storage.ops import trials as trial_ops
from pedl_server_auth import Principal
from pedl_server_auth.principal import set_current_principal

CONFIG = """
hyperparameters: {x: {type: double, minval: 0, maxval: 1}}
searcher: {name: random, metric: loss, max_trials: 1, max_length: {batches: 20}}
"""
TRAINING, VALIDATION = scheduler_pb2.METRIC_KIND_TRAINING, scheduler_pb2.METRIC_KIND_VALIDATION
ALICE, BOB, ADMIN = Principal("alice", False), Principal("bob", False), Principal("root", True)


class Aborted(Exception):
    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(details)
        self.code = code


class Context:
    async def abort(self, code: grpc.StatusCode, details: str) -> None:
        raise Aborted(code, details)


Report = Callable[..., Awaitable[scheduler_pb2.ReportTrialMetricsResponse]]
api_of: dict[ExperimentManager, SchedulerApi] = {}  # the scenario's API, for its GetTrial calls


def run(tmp_path: Path, scenario: Callable[[ExperimentManager, int, Report], Awaitable[None]]) -> None:
    async def main() -> None:
        manager = ExperimentManager(open_storage(str(tmp_path / "pedl.db")), Cluster(), "127.0.0.1:1")
        api = SchedulerApi(manager, manager.cluster, "c")
        try:
            exp_id = manager.lifecycle.create_experiment(CONFIG, b"m", "m", owner="alice")
            (trial_id,) = [t["id"] for t in trial_ops.trials_page(manager.db, exp_id, 0, 10)]

            async def report(
                who: Principal, kind: int, steps: int, metrics: dict, trial: int = trial_id, group: str = ""
            ) -> scheduler_pb2.ReportTrialMetricsResponse:
                set_current_principal(who)
                request = scheduler_pb2.ReportTrialMetricsRequest(
                    trial_id=trial, kind=kind, steps_completed=steps, metrics=to_struct(metrics), group=group
                )
                return await api.ReportTrialMetrics(request, Context())  # type: ignore[arg-type]

            api_of[manager] = api
            await scenario(manager, trial_id, report)
        finally:
            manager.db.close()

    asyncio.run(main())


def test_reports_land_as_the_trials_own_steps_and_validations(tmp_path: Path) -> None:
    async def scenario(manager: ExperimentManager, trial_id: int, report: Report) -> None:
        await report(ALICE, TRAINING, 10, {"loss": 3.3})
        await report(ADMIN, TRAINING, 20, {"loss": 2.5})
        await report(ALICE, VALIDATION, 20, {"loss": 2.0, "acc": [0.5, 0.75]})
        steps = result_ops.steps_of(manager.db, trial_id)
        assert [(s["total_batches"], json.loads(s["metrics_json"])) for s in steps] == [
            (10, {"loss": 3.3}),
            (20, {"loss": 2.5}),
        ]
        (validation,) = result_ops.validations_of(manager.db, trial_id)
        assert validation["total_batches"] == 20
        assert json.loads(validation["metrics_json"]) == {"loss": 2.0, "acc": [0.5, 0.75]}

        with pytest.raises(Aborted, match="already has training metrics at steps_completed 10") as info:
            await report(ALICE, TRAINING, 10, {"loss": 1.0})
        assert info.value.code == grpc.StatusCode.FAILED_PRECONDITION
        assert json.loads(result_ops.steps_of(manager.db, trial_id)[0]["metrics_json"]) == {"loss": 3.3}

    run(tmp_path, scenario)


def test_who_may_report(tmp_path: Path) -> None:
    async def scenario(manager: ExperimentManager, trial_id: int, report: Report) -> None:
        row = trial_ops.trial(manager.db, trial_id)
        assert row is not None
        run_id = row["run_id"]
        own = Principal(
            f"trial-{trial_id}", False, kind="trial", experiment_id=1, trial_id=trial_id, run_id=run_id
        )
        await report(own, TRAINING, 1, {"loss": 1.0})
        cases = [
            (BOB, "belongs to user 'alice': only its owner or an admin may change it"),
            (Principal("t", False, kind="trial", trial_id=trial_id + 1, run_id=run_id), "only that trial's"),
            (
                Principal("t", False, kind="trial", trial_id=trial_id, run_id=run_id + 1),
                "its token is revoked",
            ),
        ]
        for who, message in cases:
            with pytest.raises(Aborted, match=message) as info:
                await report(who, TRAINING, 2, {"loss": 1.0})
            assert info.value.code == grpc.StatusCode.PERMISSION_DENIED
        with pytest.raises(Aborted, match="trial 999 not found"):
            await report(ADMIN, TRAINING, 2, {"loss": 1.0}, trial=999)
        with pytest.raises(Aborted, match="metric 'loss' must be a number") as bad:
            await report(ALICE, VALIDATION, 2, {"loss": "low"})
        assert bad.value.code == grpc.StatusCode.INVALID_ARGUMENT
        assert len(result_ops.steps_of(manager.db, trial_id)) == 1  # nothing refused was stored
        assert result_ops.validations_of(manager.db, trial_id) == []

    run(tmp_path, scenario)


def test_get_trial_sums_up_each_custom_group_on_its_first_page(tmp_path: Path) -> None:
    """`pedl trial describe` and the web UI's trial page read a trial's custom groups from here."""

    async def scenario(manager: ExperimentManager, trial_id: int, report: Report) -> None:
        unspecified = scheduler_pb2.METRIC_KIND_UNSPECIFIED
        await report(ALICE, TRAINING, 10, {"loss": 3.0})
        await report(ALICE, TRAINING, 40, {"loss": 1.0})
        await report(ALICE, unspecified, 10, {"loss": 2.0, "hist": [1, 2]}, group="inference")
        await report(ALICE, unspecified, 30, {"loss": 4.0, "hist": [3, 4]}, group="inference")
        await report(ALICE, unspecified, 20, {"fps": 9.5}, group="abc")
        api = api_of[manager]
        set_current_principal(ALICE)
        asked = scheduler_pb2.GetTrialRequest(trial_id=trial_id, page_size=1, group_figures=True)
        first = await api.GetTrial(asked, Context())  # type: ignore[arg-type]
        counts = [(g.group, g.reports, g.last_batches) for g in first.metric_groups]
        assert counts == [("abc", 1, 20), ("inference", 2, 30)]
        asked.group_figures = False  # what most callers ask: the counts, no row read
        plain = await api.GetTrial(asked, Context())  # type: ignore[arg-type]
        assert [(g.group, g.reports, g.last_batches, len(g.metrics)) for g in plain.metric_groups] == [
            (*count, 0) for count in counts
        ]
        figures = records.metric_group_record(first.metric_groups[1])["metrics"]
        assert figures["loss"] == {
            "count": 2,
            "min": 2.0,
            "max": 4.0,
            "mean": 3.0,
            "sum": 6.0,
            "last": 4.0,
            "type": "number",
        }
        assert figures["hist"] == {"count": 2, "last": [3.0, 4.0], "type": "object"}
        assert [s.total_batches for s in first.steps] == [10]  # groups are never steps
        later = scheduler_pb2.GetTrialRequest(
            trial_id=trial_id, page_size=1, page_token=first.next_page_token
        )
        assert first.next_page_token
        assert not (await api.GetTrial(later, Context())).metric_groups  # type: ignore[arg-type]

    run(tmp_path, scenario)
