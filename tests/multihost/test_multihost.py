"""pedl deployed on several machines, as a user would: scheduler and checkpoint store on one host,
an agent on each of two others, a client on a fourth; network namespaces stand in for machines, and
no host shares a directory or an environment variable with another (see support.netns)."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from rig_support import (
    agents_of,
    digests,
    lose_host_and_resume,
    rig_config,
    steps_of,
    write_rig_model,
)

from pedl.v1 import common_pb2, scheduler_pb2
from support.netns import Rig, multihost_rig, unavailable_reason
from tests.integration.test_cluster import logs, stub, submit, wait

pytestmark = pytest.mark.integration

_REASON = unavailable_reason()
if _REASON is not None:
    pytest.skip(_REASON, allow_module_level=True)

COMPLETED = common_pb2.EXPERIMENT_STATE_COMPLETED


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    with multihost_rig(tmp_path_factory.mktemp("rig"), block=1, agents=2, slots=1) as r:
        yield r


@pytest.fixture
def model(tmp_path):
    return write_rig_model(tmp_path / "rig_model")


@pytest.fixture(autouse=True)
def _show_logs_on_failure(request, rig: Rig) -> Iterator[None]:
    yield
    report = getattr(request.node, "rep_call", None)
    if report is not None and report.failed:
        print(rig.logs())


def test_agents_register_at_their_own_addresses_and_a_wrong_address_is_refused(rig: Rig) -> None:
    agents = stub(rig).ListAgents(scheduler_pb2.ListAgentsRequest(), timeout=30).agents
    assert {a.id: a.address for a in agents} == {
        "host1": rig.hosts["host1"].address,
        "host2": rig.hosts["host2"].address,
    }
    listed = rig.cli(rig.hosts["client"], "agent", "list")
    assert listed.returncode == 0, listed.stderr
    assert rig.hosts["host1"].address in listed.stdout and rig.hosts["host2"].address in listed.stdout

    host1 = rig.hosts["host1"]
    wrong = rig.start_agent(host1, 1, ["--agent-id", "wrong", "--address", rig.hosts["host2"].address])
    assert wrong.process.wait(timeout=60) == 2
    assert f"--address {rig.hosts['host2'].address} is not an address of this machine" in wrong.log()


def test_a_trial_runs_on_a_remote_agent_and_a_client_host_downloads_its_checkpoint(rig: Rig, model) -> None:
    exp_id = submit(rig, model, rig_config(max_batches=40))
    result = wait(rig, exp_id, timeout=180)
    assert result.experiment.state == COMPLETED
    (trial,) = result.trials
    assert steps_of(rig, trial.id) == [10, 20, 30, 40]
    detail = stub(rig).GetTrial(scheduler_pb2.GetTrialRequest(trial_id=trial.id))
    uuid = detail.checkpoints[-1].uuid

    client = rig.hosts["client"]
    target = client.root / "downloaded"
    downloaded = rig.cli(client, "checkpoint", "download", uuid, "--output-dir", str(target))
    assert downloaded.returncode == 0, downloaded.stderr
    assert any(p.is_file() and p.stat().st_size for p in target.rglob("*")), downloaded.stdout


def test_a_search_spreads_over_the_agents(rig: Rig, model) -> None:
    exp_id = submit(rig, model, rig_config(max_batches=20, searcher="random"))
    result = wait(rig, exp_id, timeout=240)
    assert result.experiment.state == COMPLETED
    assert len(result.trials) == 4
    placed = set().union(*(agents_of(logs(rig, t.id)) for t in result.trials))
    assert placed == {"host1", "host2"}
    assert all(steps_of(rig, t.id) == [10, 20] for t in result.trials)


def test_a_two_slot_trial_spans_two_hosts_with_equal_weights_on_both_ranks(rig: Rig, model) -> None:
    exp_id = submit(rig, model, rig_config(max_batches=40, slots=2))  # one slot per host
    result = wait(rig, exp_id, timeout=240)
    (trial,) = result.trials
    text = logs(rig, trial.id)
    assert result.experiment.state == COMPLETED, text
    assert trial.restarts == 0, text
    assert agents_of(text) == {"host1", "host2"}
    assert steps_of(rig, trial.id) == [10, 20, 30, 40]
    found = digests(text)
    assert set(found) == {0, 1} and found[0] == found[1], found


def test_ranks_that_cannot_reach_each_other_fail_once_naming_every_address(rig: Rig, model) -> None:
    loopback = "environment:\n  environment_variables:\n    - GLOO_SOCKET_IFNAME=lo\n"
    exp_id = submit(rig, model, rig_config(max_batches=20, slots=2, extra=loopback))
    result = wait(rig, exp_id, timeout=240)
    (trial,) = result.trials
    assert result.experiment.state == common_pb2.EXPERIMENT_STATE_ERROR
    assert trial.restarts == 0, logs(rig, trial.id)
    assert "ranks cannot reach each other" in trial.error, trial.error
    assert re.search(r"rank 0 listens on 127\.0\.0\.1:\d+ \(GLOO_SOCKET_IFNAME=lo\)", trial.error), (
        trial.error
    )
    assert re.search(r"rank 1 listens on 127\.0\.0\.1:\d+", trial.error), trial.error
    assert "GLOO_SOCKET_IFNAME" in trial.error and "--address" in trial.error


def test_a_four_slot_gang_on_two_hosts_of_two_slots_trains_equal_weights(rig: Rig, model) -> None:
    rig.restart_agents(slots=2)
    exp_id = submit(rig, model, rig_config(max_batches=20, slots=4))
    result = wait(rig, exp_id, timeout=240)
    (trial,) = result.trials
    text = logs(rig, trial.id)
    assert result.experiment.state == COMPLETED, text
    assert agents_of(text) == {"host1", "host2"}
    assert steps_of(rig, trial.id) == [10, 20]
    found = digests(text)
    assert set(found) == {0, 1, 2, 3} and all(found[r] == found[0] for r in range(4)), found


def test_a_lost_host_s_trial_resumes_on_the_other_from_its_checkpoint(rig: Rig, model) -> None:
    """Last in the module: it takes a host down."""
    lose_host_and_resume(rig, model)
