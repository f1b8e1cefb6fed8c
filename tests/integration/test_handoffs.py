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


def test_trials_take_over_a_slot_once_its_run_has_taken_its_last_work(tmp_path) -> None:
    model = write_tiny_model(tmp_path / "tiny", RECORD_LIFETIME)
    with local_cluster(
        tmp_path / "cluster", agents=1, slots=1, agent_args=["--keep-trial-dirs", "1h"]
    ) as cluster:
        try:
            exp_id = submit(cluster, model, CONFIG)
            response = wait(cluster, exp_id, timeout=180)
            assert response.experiment.state == common_pb2.EXPERIMENT_STATE_COMPLETED
            assert [t.state for t in response.trials] == [common_pb2.TRIAL_STATE_COMPLETED] * 4
            trial_logs = {t.id: logs(cluster, t.id) for t in response.trials}
            timelines = [
                timeline_records(
                    stub(cluster).GetTrial(scheduler_pb2.GetTrialRequest(trial_id=t.id), timeout=30).timeline
                )
                for t in response.trials
            ]
        except BaseException:
            print(cluster.logs())
            raise
    handed = [t for t, text in trial_logs.items() if "taking them over from trial" in text]
    assert len(handed) >= 2, trial_logs  # all but the first start behind the run before them
    lifetimes = []
    for f in (tmp_path / "cluster" / "agent0" / "trials").glob("*/lifetime"):
        marks = dict(line.split() for line in f.read_text().splitlines())
        lifetimes.append((float(marks["start"]), float(marks["end"])))
    lifetimes.sort()
    assert len(lifetimes) == 4
    # One slot: a harness trains only after the one before has trained and validated all it will and
    # taken its last work; only its final checkpoint's save and upload and its exit may overlap.
    runs = []
    for phases in timelines:
        by = {p["name"]: p for p in phases}
        trained = [p for p in phases if p["name"] in ("train step", "validation")]
        first_work, last_work = min(p["start"] for p in trained), max(p["end"] for p in trained)
        runs.append((first_work, last_work, by.get("slot handed over", by["exit"])["start"]))
    runs.sort()
    for (_, last_work, released), (first_work, _, _) in zip(runs, runs[1:], strict=False):
        assert first_work >= released >= last_work, runs
