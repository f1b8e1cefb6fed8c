"""An experiment's model definition is unpacked once per agent and each run gets a copy-on-write view.

On a real cluster, forked (the default) and spawned, sandboxed and not: three trials of one experiment
on two slots (two at once, then a third) each find the model definition as shipped, then add a file,
rewrite shipped files in place and delete one; none of that reaches the agent's shared tree or another
run. Under bubblewrap a trial of a second experiment cannot see the first one's tree.
"""

from __future__ import annotations

import json
import shutil
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_cluster import logs, stub, submit, wait

from pedl.timeline import timeline_records
from pedl.v1 import common_pb2, scheduler_pb2
from support.models import write_tiny_model
from support.processes import LocalCluster, local_cluster

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
BWRAP = shutil.which("bwrap") is not None

CONFIG = """
hyperparameters:
  learning_rate: {type: categorical, vals: [0.1, 0.05, 0.02]}
searcher: {name: grid, metric: error, max_length: {batches: 10}}
batches_per_step: 10
max_restarts: 0
"""

PROBE = r"""
import json, os, time
from pathlib import Path


def run():
    here = Path.cwd()
    facts = json.loads((here / "facts.json").read_text())
    assert (here / "shipped.txt").read_text() == "shipped\n", "shipped.txt was changed by another run"
    assert (here / "sub" / "deep.txt").read_text() == "deep\n", "sub/deep.txt was changed by another run"
    assert (here / "doomed.txt").exists(), "doomed.txt was deleted by another run"
    assert not (here / "new.txt").exists(), "new.txt was left by another run"
    (here / "new.txt").write_text("mine\n")
    with open(here / "shipped.txt", "r+") as f:  # in place: the same file, truncated and rewritten
        f.truncate(0)
        f.write("rewritten\n")
    with open(here / "sub" / "deep.txt", "a") as f:
        f.write("appended\n")
    (here / "doomed.txt").unlink()
    assert (here / "shipped.txt").read_text() == "rewritten\n"
    for path in facts["hidden"]:
        assert not os.path.exists(path), f"this trial sees {path}"
    time.sleep(facts["linger"])  # the runs of one experiment overlap
    print("model view checked")
"""


@pytest.fixture
def home() -> Iterator[Path]:
    """Outside /tmp (whose private copy would hide the agent's files on its own in a sandbox)."""
    path = ROOT / ".cache" / f"views-{uuid.uuid4().hex[:8]}"
    path.mkdir(parents=True)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _model(directory: Path, hidden: list[str], linger: float) -> Path:
    model = write_tiny_model(directory, "import views_probe; views_probe.run()")
    (model / "views_probe.py").write_text(PROBE)
    (model / "shipped.txt").write_text("shipped\n")
    (model / "doomed.txt").write_text("doomed\n")
    (model / "sub").mkdir()
    (model / "sub" / "deep.txt").write_text("deep\n")
    (model / "facts.json").write_text(json.dumps({"hidden": hidden, "linger": linger}))
    return model


def _wait_for_log(cluster: LocalCluster, text: str, seconds: float = 300) -> None:
    deadline = time.monotonic() + seconds
    while text not in cluster.agents[0].log():
        assert time.monotonic() < deadline, f"{text!r} not in the agent's log after {seconds} s"
        time.sleep(0.5)


def _completed(cluster: LocalCluster, exp_id: int) -> scheduler_pb2.GetExperimentResponse:
    response = wait(cluster, exp_id, timeout=300)
    trial_logs = {t.id: logs(cluster, t.id) for t in response.trials}
    assert response.experiment.state == common_pb2.EXPERIMENT_STATE_COMPLETED, trial_logs
    for text in trial_logs.values():
        assert "model view checked" in text, text
    return response


@pytest.mark.parametrize(
    ("isolation", "start"),
    [
        *([("bwrap", "fork"), ("bwrap", "spawn")] if BWRAP else []),
        ("none", "fork"),
        ("none", "spawn"),
    ],
)
def test_runs_share_one_unpacked_tree_and_change_only_their_own_view(
    isolation: str, start: str, home: Path
) -> None:
    agent_args = ["--isolation", isolation, "--harness-start", start]
    with local_cluster(home / "cluster", slots=2, agent_args=agent_args) as cluster:
        try:
            if start == "fork":  # until then, runs spawn rather than wait for its imports
                _wait_for_log(cluster, "fork server ready")
            first = submit(cluster, _model(home / "first", [], linger=2.0), CONFIG)
            response = _completed(cluster, first)
            assert len(response.trials) == 3
            trees = home / "cluster" / "agent0" / "model_definitions" / "trees"
            tree = trees / str(first)
            # Under the sandbox a trial of another experiment sees no experiment's tree.
            hidden = [str(tree), str(tree / "shipped.txt")] if isolation == "bwrap" else []
            single = CONFIG.replace("{type: categorical, vals: [0.1, 0.05, 0.02]}", "0.1").replace(
                "grid", "single"
            )
            second = submit(cluster, _model(home / "second", hidden, linger=0.0), single)
            _completed(cluster, second)
            agent_log = cluster.agents[0].log()
            timeline = timeline_records(
                stub(cluster)
                .GetTrial(scheduler_pb2.GetTrialRequest(trial_id=response.trials[0].id), timeout=30)
                .timeline
            )
        except BaseException:
            print(cluster.logs())
            raise
    # The shared tree is as shipped, whatever the runs did to their model directories.
    assert (tree / "shipped.txt").read_text() == "shipped\n"
    assert (tree / "sub" / "deep.txt").read_text() == "deep\n"
    assert (tree / "doomed.txt").exists() and not (tree / "new.txt").exists()
    unpacked = [line for line in agent_log.splitlines() if "model definition unpacked" in line]
    assert len(unpacked) == 2, unpacked  # once per experiment, not once per run
    assert "model definition fetched and unpacked" in {p["name"] for p in timeline}
    forked = [line for line in agent_log.splitlines() if "harness forked" in line]
    if start == "fork":
        assert len(forked) == 4 and all('"overlay": true' in line for line in forked), forked
    else:
        assert not forked
