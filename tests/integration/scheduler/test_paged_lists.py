"""A real scheduler pages experiments and a trial's results with a cursor; clients from before paging
still get everything in one reply, and the CLI reads every page."""

from __future__ import annotations

import contextlib
import io
import json
import secrets
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from pedl import _grpc
from pedl.cli import client as cli_client
from pedl.cli.main import main as cli
from pedl.config import carried
from pedl.v1 import common_pb2, scheduler_pb2, scheduler_pb2_grpc
from pedl_scheduler.storage import open_storage
from pedl_scheduler.storage.ops import experiments as experiment_ops
from pedl_scheduler.storage.ops import results as result_ops
from pedl_scheduler.storage.ops import trials as trial_ops
from support import processes

pytestmark = pytest.mark.integration

CONFIG = {
    "description": "paged",
    "entrypoint": "model_def:Trial",
    "searcher": {"name": "single", "metric": "error", "max_length": {"batches": 70}},
}


def _populate(db: Path) -> tuple[list[int], int]:
    """Five ended experiments; the last has one trial with steps at 10..70, validations at 20, 40, 70
    and checkpoints at 30, 70. Returns the experiment ids and the trial id."""
    s = open_storage(str(db))
    with s.transaction():
        ids = [
            experiment_ops.create_experiment(
                s, config_yaml="description: paged\n", config_json=json.dumps(CONFIG), model_definition=b"m",
                model_definition_name="model", seed=1, created_at="2026-01-01T00:00:00Z", owner="admin",
                state="COMPLETED",
            )
            for _ in range(5)
        ]  # fmt: skip
        trial_ops.create_trial(s, ids[-1], "r0", "{}", 1, "{}")
    (trial_id,) = [r["id"] for r in trial_ops.newest_trials(s, ids[-1], 1)]
    with s.transaction():
        for step in range(1, 8):
            result_ops.record_step(s, trial_id, step, step * 10, 10, '{"loss": 1.0}', "t")
        for batches in (20, 40, 70):
            result_ops.record_validation(s, trial_id, batches // 10, batches, '{"error": 0.1}', "t")
        for batches in (30, 70):
            record = json.dumps({"uuid": f"ckpt-{batches}", "trialId": trial_id, "totalBatches": batches})
            result_ops.record_checkpoint(s, f"ckpt-{batches}", trial_id, batches // 10, batches, record, "t")
        for i in range(10):
            result_ops.record_log(s, trial_id, 1, "t", "stdout", f"line {i}")
        trial_ops.end_trial(s, trial_id, "COMPLETED", "", "t")
    s.close()
    return ids, trial_id


@pytest.fixture
def scheduler(tmp_path: Path) -> Iterator[tuple[scheduler_pb2_grpc.SchedulerServiceStub, list[int], int]]:
    ids, trial_id = _populate(tmp_path / "pedl.db")
    password = secrets.token_hex(8)
    (tmp_path / "secret").write_text(secrets.token_hex(32))
    (tmp_path / "admin").write_text(password)
    service = processes.start("scheduler", [
        "pedl-scheduler", "--db", str(tmp_path / "pedl.db"), "--port", "0",
        "--port-file", str(tmp_path / "port"),
        "--cluster-secret-file", str(tmp_path / "secret"), "--admin-password-file", str(tmp_path / "admin"),
        "--checkpoint-store", "127.0.0.1:1",
    ], tmp_path, tmp_path / "port")  # fmt: skip
    try:
        token = processes.login(service.address, "admin", password)
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("PEDL_MASTER", service.address)
            mp.setenv("PEDL_TOKEN", token)
            yield (
                scheduler_pb2_grpc.SchedulerServiceStub(_grpc.channel(service.address, token=token)),
                ids,
                trial_id,
            )
    finally:
        processes.stop(service.process)


def test_experiments_come_a_page_at_a_time_and_old_clients_get_all(scheduler) -> None:
    stub, ids, _ = scheduler
    seen, token, pages = [], "", 0
    while True:
        reply = stub.ListExperiments(
            scheduler_pb2.ListExperimentsRequest(page_size=2, page_token=token), timeout=30
        )
        seen += [e.id for e in reply.experiments]
        pages += 1
        token = reply.next_page_token
        if not token:
            break
    assert seen == ids and pages == 3
    assert not reply.experiments[0].config_document  # the CLI's pages carry no typed config
    typed = stub.ListExperiments(
        scheduler_pb2.ListExperimentsRequest(page_size=5, with_config_document=True), timeout=30
    )
    config = carried.from_json(typed.experiments[0].config_document)  # the web UI's decoder
    assert (config.searcher_name, config.max_length, config.length_unit) == ("single", 70, "batches")
    one = stub.GetExperiment(scheduler_pb2.GetExperimentRequest(experiment_id=ids[0]), timeout=30)
    assert one.experiment.config_document == typed.experiments[0].config_document
    old = stub.ListExperiments(scheduler_pb2.ListExperimentsRequest(), timeout=30)
    assert [e.id for e in old.experiments] == ids and old.next_page_token == ""
    assert old.experiments[-1].num_trials == 1


@pytest.mark.parametrize(
    ("request_", "message"),
    [
        (
            scheduler_pb2.ListExperimentsRequest(page_token="xyz"),
            "page_token 'xyz' is not one this scheduler issued",
        ),
        (scheduler_pb2.ListExperimentsRequest(page_size=-1), "page_size must be 0 or more, got -1"),
    ],
)
def test_a_bad_page_request_is_refused_naming_the_field(scheduler, request_, message) -> None:
    stub, _, _ = scheduler
    with pytest.raises(grpc.RpcError) as e:
        stub.ListExperiments(request_, timeout=30)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT and e.value.details() == message


def test_a_trials_results_come_a_page_of_steps_at_a_time(scheduler) -> None:
    stub, _, trial_id = scheduler
    pages, token = [], ""
    while True:
        request = scheduler_pb2.GetTrialRequest(trial_id=trial_id, page_size=3, page_token=token)
        page = stub.GetTrial(request, timeout=30)
        pages.append(page)
        token = page.next_page_token
        if not token:
            break
    assert [[s.total_batches for s in p.steps] for p in pages] == [[10, 20, 30], [40, 50, 60], [70]]
    assert [[v.total_batches for v in p.validations] for p in pages] == [[20], [40], [70]]
    assert [[c.total_batches for c in p.checkpoints] for p in pages] == [[30], [], [70]]
    assert all(p.trial.num_steps == 7 for p in pages)
    whole = stub.GetTrial(scheduler_pb2.GetTrialRequest(trial_id=trial_id), timeout=30)
    assert len(whole.steps) == 7 and whole.next_page_token == ""


def test_the_cli_reads_every_page(scheduler, monkeypatch: pytest.MonkeyPatch) -> None:
    """Pages of 2 experiments and 3 steps: the CLI shows everything all the same."""
    _, ids, trial_id = scheduler
    client = cli_client.SchedulerClient
    monkeypatch.setattr(client.list_experiments, "__defaults__", (2,))
    monkeypatch.setattr(client.get_trial, "__defaults__", (3, False))
    with contextlib.redirect_stdout(io.StringIO()) as out:
        assert cli(["experiment", "list", "--json"]) == 0
    assert [e["id"] for e in json.loads(out.getvalue())] == ids
    with contextlib.redirect_stdout(io.StringIO()) as out:
        assert cli(["trial", "describe", str(trial_id), "--json"]) == 0
    assert "ckpt-70" in out.getvalue() and "ckpt-30" in out.getvalue()


def _listed(stub, **fields) -> list[list[int]]:  # noqa: ANN001
    """Every page's ids for one filtered listing."""
    pages, token = [], ""
    while True:
        request = scheduler_pb2.ListExperimentsRequest(page_size=2, page_token=token, **fields)
        reply = stub.ListExperiments(request, timeout=30)
        pages.append([e.id for e in reply.experiments])
        token = reply.next_page_token
        if not token:
            return pages


def test_filters_and_newest_first_hold_across_pages(scheduler) -> None:
    stub, ids, _ = scheduler
    stub.PatchExperiment(scheduler_pb2.PatchExperimentRequest(experiment_id=ids[1], description="Alpha run"))
    stub.PatchExperiment(scheduler_pb2.PatchExperimentRequest(experiment_id=ids[3], add_labels=["fast"]))
    stub.PatchExperiment(scheduler_pb2.PatchExperimentRequest(experiment_id=ids[0], archived=True))
    newest = ids[::-1]
    assert _listed(stub, newest_first=True) == [newest[:2], newest[2:4], newest[4:]]
    assert sum(_listed(stub, newest_first=True, exclude_archived=True), []) == newest[:4]
    assert sum(_listed(stub, text="alpha"), []) == [ids[1]]
    assert sum(_listed(stub, text="FAST", newest_first=True), []) == [ids[3]]
    assert sum(_listed(stub, text="single"), []) == ids  # the searcher's name
    completed, active = common_pb2.EXPERIMENT_STATE_COMPLETED, common_pb2.EXPERIMENT_STATE_ACTIVE
    assert sum(_listed(stub, states=[completed]), []) == ids
    assert sum(_listed(stub, states=[active]), []) == []
    assert sum(_listed(stub, owner="admin", newest_first=True), []) == newest
    assert sum(_listed(stub, owner="nobody"), []) == []
    with pytest.raises(grpc.RpcError) as e:
        stub.ListExperiments(scheduler_pb2.ListExperimentsRequest(states=[99]), timeout=30)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert e.value.details() == "states: 99 is not an experiment state"


def test_a_log_tail_sends_only_the_newest_lines(scheduler) -> None:
    stub, _, trial_id = scheduler

    def lines(**fields) -> list[str]:  # noqa: ANN003
        request = scheduler_pb2.GetTrialLogsRequest(trial_id=trial_id, **fields)
        return [line.message for chunk in stub.GetTrialLogs(request, timeout=30) for line in chunk.lines]

    every = lines()
    assert every == [f"line {i}" for i in range(10)]
    assert lines(tail=3) == every[-3:]
    assert lines(tail=50) == every
    with pytest.raises(grpc.RpcError) as e:
        lines(tail=-1)
    assert (
        e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        and e.value.details() == "tail must be 0 or more, got -1"
    )
