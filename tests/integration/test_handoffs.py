"""Slot handoffs with the real scheduler and agent: the next trial of a slot is sent while the slot's
run finishes; on CPU slots its harness starts and builds its trial meanwhile, and gets its first
workload only once that run has taken its last work (whose checkpoint upload and exit overlap the next
run's training; two harnesses never train on one slot at once)."""

from __future__ import annotations

import pytest
from test_cluster import logs, stub, submit, wait

from pedl.timeline import timeline_records
from pedl.v1 import common_pb2, scheduler_pb2
from support.models import write_tiny_model
from support.processes import local_cluster

pytestmark = pytest.mark.integration

CONFIG = """
hyperparameters:
  learning_rate: {type: double, minval: 0.01, maxval: 0.1}
searcher:
  {name: random, metric: error, max_trials: 4, max_concurrent_trials: 2, max_length: {batches: 20}}
batches_per_step: 10
max_restarts: 0
"""

# Each harness records when it built its model and when its process ends, in its own trial directory
# (the parent of its model definition; a sandboxed harness can write nowhere else).
RECORD_LIFETIME = """import atexit, os, time
        path = os.path.join(os.path.dirname(os.getcwd()), "lifetime")
        with open(path, "a") as f:
            f.write(f"start {time.time()}\\n")
        atexit.register(lambda: open(path, "a").write(f"end {time.time()}\\n"))"""


# A harness that is slow to exit once its work is done: its exit hook sleeps (as a trial's own
# at-exit cleanup may), and records when its process really ends.
SLOW_EXIT = """import atexit, os, time
        path = os.path.join(os.path.dirname(os.getcwd()), "lifetime")
        with open(path, "a") as f:
            f.write(f"start {time.time()}\\n")
        def _slow_end():
            time.sleep(8)
            open(path, "a").write(f"end {time.time()}\\n")
        atexit.register(_slow_end)"""

# A harness that fails after it has done all its work (an exit hook ends the process with code 3).
CRASH_AFTER_DONE = """import atexit, os
        atexit.register(lambda: os._exit(3))"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """One agent with one slot, shared by this module's tests (trial directories kept)."""
    workdir = tmp_path_factory.mktemp("handoffs")
    with local_cluster(workdir / "cluster", agents=1, slots=1, agent_args=["--keep-trial-dirs", "1h"]) as c:
        yield c


def _run(cluster, model, config: str, timeout: float = 180) -> scheduler_pb2.GetExperimentResponse:
    try:
        return wait(cluster, submit(cluster, model, config), timeout=timeout)
    except BaseException:
        print(cluster.logs())
        raise


def _lifetimes(cluster, response: scheduler_pb2.GetExperimentResponse) -> list[tuple[float, float]]:
    """(harness built its model, process ended) of each of the experiment's runs, in start order."""
    trials = cluster.workdir / "agent0" / "trials"
    lifetimes = []
    for t in response.trials:
        for f in trials.glob(f"{t.id}-*/lifetime"):
            marks = dict(line.split() for line in f.read_text().splitlines())
            lifetimes.append((float(marks["start"]), float(marks["end"])))
    return sorted(lifetimes)


def _work_spans(cluster, response: scheduler_pb2.GetExperimentResponse) -> list[tuple[float, float, float]]:
    """(first training or validation, last one, slot handed over or exit) of each run, in order."""
    runs = []
    for t in response.trials:
        phases = timeline_records(
            stub(cluster).GetTrial(scheduler_pb2.GetTrialRequest(trial_id=t.id), timeout=30).timeline
        )
        by = {p["name"]: p for p in phases}
        trained = [p for p in phases if p["name"] in ("train step", "validation")]
        first_work, last_work = min(p["start"] for p in trained), max(p["end"] for p in trained)
        runs.append((first_work, last_work, by.get("slot handed over", by["exit"])["start"]))
    return sorted(runs)


def test_trials_take_over_a_slot_once_its_run_has_taken_its_last_work(cluster, tmp_path) -> None:
    model = write_tiny_model(tmp_path / "tiny", RECORD_LIFETIME)
    response = _run(cluster, model, CONFIG)
    assert response.experiment.state == common_pb2.EXPERIMENT_STATE_COMPLETED
    assert [t.state for t in response.trials] == [common_pb2.TRIAL_STATE_COMPLETED] * 4
    trial_logs = {t.id: logs(cluster, t.id) for t in response.trials}
    handed = [t for t, text in trial_logs.items() if "taking them over from trial" in text]
    assert len(handed) >= 2, trial_logs  # all but the first start behind the run before them
    lifetimes = _lifetimes(cluster, response)
    assert len(lifetimes) == 4
    # One slot: a harness trains only after the one before has trained and validated all it will and
    # taken its last work; only its final checkpoint's save and upload and its exit may overlap.
    runs = _work_spans(cluster, response)
    for (_, last_work, released), (first_work, _, _) in zip(runs, runs[1:], strict=False):
        assert first_work >= released >= last_work, runs


def test_a_run_slow_to_exit_after_its_work_does_not_hold_its_slot(cluster, tmp_path) -> None:
    model = write_tiny_model(tmp_path / "slow", SLOW_EXIT)
    # Two trials: the scheduler hands a slot on once at a time (a third trial waits for the first
    # run's exit, as the slot's taker is recorded only then).
    config = CONFIG.replace("max_trials: 4,", "max_trials: 2,")
    response = _run(cluster, model, config)
    assert [t.state for t in response.trials] == [common_pb2.TRIAL_STATE_COMPLETED] * 2
    ends = [end for _, end in _lifetimes(cluster, response)]
    runs = _work_spans(cluster, response)
    assert len(ends) == len(runs) == 2
    # The second run trains on the one slot while the first is still exiting (8 s of exit hook).
    for end, (first_work, _, _) in zip(ends, runs[1:], strict=False):
        assert first_work < end, (ends, runs)


def test_a_run_that_fails_after_its_work_is_done_is_reported_failed(cluster, tmp_path) -> None:
    model = write_tiny_model(tmp_path / "crash", CRASH_AFTER_DONE)
    config = CONFIG.replace("max_trials: 4,", "max_trials: 1,")
    response = _run(cluster, model, config)
    assert [t.state for t in response.trials] == [common_pb2.TRIAL_STATE_ERROR]
    trial_id = response.trials[0].id
    text = logs(cluster, trial_id)
    assert f"trial {trial_id} failed" in text, text  # the user sees why: the run's stderr tail
