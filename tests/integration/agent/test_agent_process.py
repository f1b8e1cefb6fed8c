"""The real `pedl-agent` process against a fake scheduler, with a fake harness speaking HarnessService."""

from __future__ import annotations

import json
import shutil
import signal
import sys
import time
from typing import Any

import pytest
from conftest import FakeScheduler, make_archive, pid_alive, wait_until
from google.protobuf import struct_pb2

from pedl.v1 import agent_pb2, common_pb2
from pedl_agent.version import AGENT_PROTOCOL

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

RUN_STEP = common_pb2.WORKLOAD_KIND_RUN_STEP
TERMINATE = common_pb2.WORKLOAD_KIND_TERMINATE


def start_trial(
    s: FakeScheduler,
    trial_id: int,
    run_id: int = 1,
    experiment_id: int = 1,
    after: tuple[tuple[int, int], ...] = (),
    **hp: float,
) -> None:
    hparams = struct_pb2.Struct()
    hparams.update(hp)
    s.send(
        start_trial=agent_pb2.StartTrial(
            trial_id=trial_id,
            run_id=run_id,
            experiment_id=experiment_id,
            hparams=hparams,
            slot_ids=["cpu0"],
            trial_seed=7,
            model_definition_name="my_model",
            after=[agent_pb2.RunRef(trial_id=t, run_id=r) for t, r in after],
        )
    )


def workload(s: FakeScheduler, trial_id: int, kind: int, step: int, run_id: int = 1) -> None:
    w = common_pb2.Workload(
        kind=kind, trial_id=trial_id, run_id=run_id, step_id=step, total_batches=step * 10
    )
    s.send(run_workload=agent_pb2.RunWorkload(workload=w))


def exited(s: FakeScheduler, trial_id: int) -> agent_pb2.TrialExited:
    return s.wait_for("trial_exited", lambda e: e.trial_id == trial_id)[0][1]


def test_registers_with_its_slots_and_heartbeats(scheduler, start_agent):
    start_agent("--slots", "2", "--resource-pool", "pool-a")
    _, reg = scheduler.wait_for("register")[0]
    assert reg.agent_id == "agent-under-test"
    assert [(s.id, s.type) for s in reg.slots] == [("cpu0", "cpu"), ("cpu1", "cpu")]
    assert list(reg.environments) == ["default"]
    assert reg.resource_pool == "pool-a"
    assert reg.version and reg.hostname and reg.address
    assert list(reg.running_trials) == []
    assert reg.protocol == AGENT_PROTOCOL
    scheduler.wait_for("heartbeat", count=3)


def test_a_scheduler_of_an_older_link_protocol_stops_the_agent_with_a_clear_error(scheduler, start_agent):
    # As a scheduler from before WorkloadResult.early_exit answers (it would drive a trial that ended
    # itself on); one from before StartTrial.config_json says 0, refused the same way.
    scheduler.protocol = 1
    agent = start_agent()
    assert agent.proc.wait(30) == 2
    log = agent.log_path.read_text()
    assert "pedl-agent: error: the scheduler at 127.0.0.1:" in log
    assert "speaks agent-link protocol 1, older than the 2 this agent" in log
    assert "upgrade the scheduler" in log
    assert len(scheduler.messages("register")) == 1  # no retrying what cannot work


def test_trial_runs_its_workloads_and_exits_zero(scheduler, start_agent):
    scheduler.model_definitions[1] = make_archive({"behavior.txt": "ok\n", "model_def.py": "x = 1\n"})
    agent = start_agent()
    scheduler.wait_for("register")
    start_trial(scheduler, trial_id=3, lr=0.5)
    workload(scheduler, 3, RUN_STEP, 1)
    workload(scheduler, 3, RUN_STEP, 2, run_id=99)  # an older/other run's workload is dropped
    workload(scheduler, 3, RUN_STEP, 2)
    workload(scheduler, 3, TERMINATE, 2)

    done = [r.result for _, r in scheduler.wait_for("workload_completed", count=3)]
    assert [(r.workload.kind, r.workload.step_id, r.workload.run_id) for r in done] == [
        (RUN_STEP, 1, 1),
        (RUN_STEP, 2, 1),
        (TERMINATE, 2, 1),
    ]
    assert done[1].metrics["loss"] == 0.5 and done[1].num_batches == 20
    ex = exited(scheduler, 3)
    assert (ex.run_id, ex.exit_code, ex.error, ex.killed) == (1, 0, "", False)

    model_dir = agent.trial_dir(3, 1) / "my_model"
    assert (model_dir / "model_def.py").read_text() == "x = 1\n"
    stdout = [m for src, m in scheduler.log_lines(3) if src == "stdout"]
    assert stdout[0] == (
        f"info trial=3 run=1 env_trial=3 dir={model_dir} cwd={model_dir} hparams=[('lr', 0.5)]"
    )
    assert "workload WORKLOAD_KIND_RUN_STEP step=2 total=20" in stdout
    assert "workload WORKLOAD_KIND_RUN_STEP step=2 total=990" not in " ".join(stdout)
    trial_log = (agent.trial_dir(3, 1) / "trial.log").read_text()
    assert "[stdout] workload WORKLOAD_KIND_TERMINATE step=2 total=20" in trial_log
    # Logs are sent before the exit that follows them.
    kinds = [m.WhichOneof("message") for _, m in scheduler.received if m.WhichOneof("message") != "heartbeat"]
    assert kinds.index("trial_exited") > max(i for i, k in enumerate(kinds) if k == "trial_logs")

    # A second trial of the same experiment uses the cached model definition.
    start_trial(scheduler, trial_id=4)
    workload(scheduler, 4, TERMINATE, 0)
    assert exited(scheduler, 4).exit_code == 0
    assert scheduler.model_definition_fetches == 1


def test_a_handoff_gets_its_first_workload_only_once_the_slots_run_has_taken_its_last_work(
    scheduler, start_agent
):
    """On CPU slots the next harness starts (and builds its trial) while the run before still trains,
    and gets its first workload when that run has taken TERMINATE (its exit overlaps the next run's
    work); two harnesses never work on one slot at once."""
    scheduler.model_definitions[1] = make_archive({"behavior.txt": "ok\n"})
    start_agent()
    register = scheduler.wait_for("register")[0][1]
    assert register.accepts_handoffs
    start_trial(scheduler, trial_id=3, step_sleep=3.0)
    workload(scheduler, 3, RUN_STEP, 1)
    workload(scheduler, 3, TERMINATE, 1)
    # The next trial for the slot, sent while trial 3 still trains, with all its workloads.
    start_trial(scheduler, trial_id=4, after=((3, 1), (77, 1)))  # run 77 is not here: not waited for
    workload(scheduler, 4, RUN_STEP, 1)
    workload(scheduler, 4, TERMINATE, 1)
    assert exited(scheduler, 4).exit_code == 0
    assert exited(scheduler, 3).exit_code == 0  # its TERMINATE result may come after 4's
    order = [
        (
            kind,
            getattr(m, kind).trial_id
            if kind != "workload_completed"
            else m.workload_completed.result.workload.trial_id,
        )
        for _, m in scheduler.received
        if (kind := m.WhichOneof("message")) in ("workload_completed", "trial_logs")
    ]
    # Trial 4's step (no sleep) completes only after trial 3's (3 s): it waited for the slot.
    assert order.index(("workload_completed", 3)) < order.index(("workload_completed", 4))
    # ... although its harness had started meanwhile: its first line came while 3 was training.
    assert order.index(("trial_logs", 4)) < order.index(("workload_completed", 3))
    done = [
        m.workload_completed.result.workload.trial_id for _, m in scheduler.messages("workload_completed")
    ]
    assert sorted(done) == [3, 3, 4, 4]


def test_failing_user_code_reports_its_traceback(scheduler, start_agent):
    scheduler.model_definitions[1] = make_archive({"behavior.txt": "raise"})
    start_agent()
    scheduler.wait_for("register")
    start_trial(scheduler, trial_id=5)
    workload(scheduler, 5, RUN_STEP, 1)
    ex = exited(scheduler, 5)
    assert ex.exit_code == 1 and not ex.killed
    assert "Traceback (most recent call last)" in ex.error
    assert ex.error.rstrip().endswith("ValueError: boom from user code")
    lines = scheduler.log_lines(5)
    assert ("stderr", "about to fail") in lines
    assert ("stderr", "ValueError: boom from user code") in lines
    assert any(src == "stdout" and m.startswith("info trial=5") for src, m in lines)


def test_bad_model_definitions_fail_the_trial_with_a_reason(scheduler, start_agent):
    scheduler.model_definitions[1] = b"this is not a tarball"
    start_agent()
    scheduler.wait_for("register")
    start_trial(scheduler, trial_id=6, experiment_id=1)
    start_trial(scheduler, trial_id=7, experiment_id=42)  # the scheduler does not know it
    bad, missing = exited(scheduler, 6), exited(scheduler, 7)
    assert bad.exit_code != 0 and "experiment 1" in bad.error and "archive" in bad.error
    assert missing.exit_code != 0 and "experiment 42" in missing.error and "not found" in missing.error
    assert ("pedl", bad.error) in scheduler.log_lines(6)


@pytest.mark.parametrize("isolation", ["default", "none"])
def test_kill_trial_kills_the_whole_process_group(scheduler, start_agent, isolation):
    scheduler.model_definitions[1] = make_archive({"behavior.txt": "child"})
    agent = start_agent(*([] if isolation == "default" else ["--isolation", isolation]))
    _, reg = scheduler.wait_for("register")[0]
    assert (
        reg.isolation == ("bwrap" if shutil.which("bwrap") else "none")
        if isolation == "default"
        else isolation
    )
    start_trial(scheduler, trial_id=8)
    harness_pid, child_pid = agent.harness_pids(8, 1)
    assert pid_alive(harness_pid) and pid_alive(child_pid)

    scheduler.send(kill_trial=agent_pb2.KillTrial(trial_id=8, run_id=1))
    ex = exited(scheduler, 8)
    assert ex.killed and ex.exit_code != 0
    assert not pid_alive(harness_pid)
    wait_until(lambda: not pid_alive(child_pid), "the harness's child (it ignores SIGTERM) to die")
    wait_until(lambda: not list((agent.work_dir / "sock").glob("8-1.sock")), "the trial's socket to go")


def test_reconnects_and_delivers_what_happened_meanwhile(scheduler, start_agent):
    scheduler.model_definitions[1] = make_archive({"behavior.txt": "ok"})
    start_agent()
    scheduler.wait_for("register")
    start_trial(scheduler, trial_id=9, step_sleep=1.5)
    workload(scheduler, 9, RUN_STEP, 1)
    scheduler.wait_for("trial_logs", lambda t: any("step=1" in line.message for line in t.lines))
    scheduler.stop()  # the result of step 1 arrives while the scheduler is down
    scheduler.start()

    stream, reg = scheduler.wait_for("register", count=2)[1]
    assert [(t.trial_id, t.run_id) for t in reg.running_trials] == [(9, 1)]
    s, done = scheduler.wait_for("workload_completed")[0]
    assert s == stream and done.result.workload.step_id == 1
    workload(scheduler, 9, TERMINATE, 1)
    ex = exited(scheduler, 9)
    assert ex.exit_code == 0


def test_sigterm_stops_the_agent_and_its_harnesses(scheduler, start_agent):
    scheduler.model_definitions[1] = make_archive({"behavior.txt": "child"})
    agent = start_agent()
    scheduler.wait_for("register")
    start_trial(scheduler, trial_id=10)
    pids = agent.harness_pids(10, 1)

    agent.proc.send_signal(signal.SIGTERM)
    assert agent.proc.wait(30) == 0
    for pid in pids:
        wait_until(lambda pid=pid: not pid_alive(pid), f"process {pid} to die")
    ex = exited(scheduler, 10)
    assert not ex.killed and "shut down" in ex.error


def test_without_tensorflow_preloading_the_fork_server_imports_torch_only(scheduler, start_agent):
    # For agents whose trials are PyTorch only: their fork servers start ~8 s of CPU sooner.
    agent = start_agent("--harness-command", f"{sys.executable} -m pedl.harness", "--no-preload-tensorflow")
    scheduler.wait_for("register")

    def ready() -> dict[str, Any] | None:
        for line in agent.log_path.read_text().splitlines(keepends=True):
            if '"fork server ready"' in line and line.endswith("\n"):  # whole: it may be mid-write
                return json.loads(line)
        return None

    deadline = time.monotonic() + 120  # importing torch on a loaded 2-core machine
    while ready() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    preloaded = (ready() or {})["preloaded"]
    assert "torch" in preloaded and "pedl.harness.main" in preloaded
    assert "tensorflow" not in preloaded and "pedl.keras" not in preloaded
