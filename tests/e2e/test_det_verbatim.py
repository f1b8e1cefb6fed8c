"""Determined's CLI, typed verbatim as `det ...`, against one real local cluster: each invocation
either has its effect (checked on its output or on disk) or is refused with one line saying why."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_cli import User, cluster_up
from tests.support.models import write_tiny_model

pytestmark = pytest.mark.e2e

GRID = """
description: tiny grid
hyperparameters:
  learning_rate:
    type: categorical
    vals: [0.1, 0.05]
  units:
    type: const
    val: 8
  flag: true
searcher:
  name: grid
  metric: error
  smaller_is_better: true
  max_length:
    batches: 40
batches_per_step: 10
min_validation_period:
  batches: 20
"""
LONG = GRID.replace("batches: 40", "batches: 1000000").replace("name: grid", "name: single")
LONG = LONG.replace("vals: [0.1, 0.05]", "vals: [0.1]")


class Cluster:
    def __init__(self, user: User, tmp: Path) -> None:
        self.user, self.tmp = user, tmp
        self.values: dict[str, str] = {"tmp": str(tmp)}

    def det(self, command: str) -> subprocess.CompletedProcess:
        argv = shlex.split(command.format(**self.values))
        assert argv[0] == "det"
        return self.user.run(*argv, timeout=120)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    tmp = tmp_path_factory.mktemp("det")
    user, _ = cluster_up(tmp / "home", "--agents", "1", "--slots-per-agent", "2")
    try:
        c = Cluster(user, tmp)
        write_tiny_model(tmp / "model")
        (tmp / "grid.yaml").write_text(textwrap.dedent(GRID))
        (tmp / "long.yaml").write_text(textwrap.dedent(LONG))
        out = user.ok("det", "e", "create", str(tmp / "grid.yaml"), str(tmp / "model"), "-f", timeout=600)
        exp = re.search(r"Created experiment (\d+)", out).group(1)
        listed = json.loads(user.ok("det", "e", "lt", exp, "--json"))
        checkpoints = json.loads(user.ok("det", "e", "lc", exp, "--json"))
        c.values.update(
            exp=exp,
            trial=str(listed[0]["id"]),
            uuid=checkpoints[0]["uuid"],
            grid=str(tmp / "grid.yaml"),
            long=str(tmp / "long.yaml"),
            model=str(tmp / "model"),
        )
        yield c
    finally:
        down = user.run("pedl", "cluster", "down")
        assert down.returncode == 0, down.stderr


def refused(*words: str) -> Callable[[Cluster, subprocess.CompletedProcess], None]:
    def check(c: Cluster, r: subprocess.CompletedProcess) -> None:
        assert r.returncode != 0, r.stdout
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), r.stderr
        for word in words:
            assert word in lines[0], lines[0]

    return check


def out(pattern: str) -> Callable[[Cluster, subprocess.CompletedProcess], None]:
    def check(c: Cluster, r: subprocess.CompletedProcess) -> None:
        assert r.returncode == 0, r.stderr
        assert re.search(pattern.format(**c.values), r.stdout, re.M), r.stdout

    return check


def as_json(test: Callable[[Any, Cluster], bool]) -> Callable[[Cluster, subprocess.CompletedProcess], None]:
    def check(c: Cluster, r: subprocess.CompletedProcess) -> None:
        assert r.returncode == 0, r.stderr
        assert test(json.loads(r.stdout), c), r.stdout

    return check


def absent(pattern: str) -> Callable[[Cluster, subprocess.CompletedProcess], None]:
    def check(c: Cluster, r: subprocess.CompletedProcess) -> None:
        assert r.returncode == 0, r.stderr
        assert not re.search(pattern.format(**c.values), r.stdout, re.M), r.stdout

    return check


def files(*names: str) -> Callable[[Cluster, subprocess.CompletedProcess], None]:
    def check(c: Cluster, r: subprocess.CompletedProcess) -> None:
        assert r.returncode == 0, r.stderr
        for name in names:
            path = Path(name.format(**c.values))
            assert path.exists() and (path.is_file() or any(path.iterdir())), path

    return check


def lines(count: int) -> Callable[[Cluster, subprocess.CompletedProcess], None]:
    def check(c: Cluster, r: subprocess.CompletedProcess) -> None:
        assert r.returncode == 0, r.stderr
        assert len(r.stdout.splitlines()) == count, r.stdout

    return check


def _typed_trial(t: dict[str, Any]) -> bool:
    hp = t["hparams"]
    return (
        isinstance(t["id"], int)
        and isinstance(t["total_batches"], int)
        and t["total_batches"] == 40
        and t["state"] == "COMPLETED"
        and type(hp["units"]) is int
        and type(hp["learning_rate"]) is float
        and hp["flag"] is True
    )


EXP = r"^\s*{exp}\s+COMPLETED"
GC = "det e set gc-policy {{exp}} --save-experiment-best 1 --save-trial-best 0 --save-trial-latest 0{yes}"
TABLE: list[tuple[str, Callable[[Cluster, subprocess.CompletedProcess], None]]] = [
    ("det e", out(EXP)),
    ("det experiment list", out(EXP)),
    ("det e list -a", out(EXP)),
    (
        "det e list --json",
        as_json(lambda d, c: d[0]["id"] == int(c.values["exp"]) and d[0]["state"] == "COMPLETED"),
    ),
    ("det e list --csv", out(r"^id,state,.*\n{exp},COMPLETED,")),
    ("det e describe {exp}", out(r"State:\s+COMPLETED")),
    ("det experiment describe {exp} --json", as_json(lambda d, c: all(_typed_trial(t) for t in d["trials"]))),
    ("det e describe {exp} --csv", out(r"^id,experiment_id,state,hparams\.")),
    ("det e describe {exp},{exp} --json", as_json(lambda d, c: len(d) == 2)),
    ("det e describe {exp} --metrics", out(r"Training steps:")),
    ("det e describe {exp} --metrics --json", as_json(lambda d, c: len(d["trials"][0]["steps"]) == 4)),
    ("det e describe {exp} --outdir {tmp}/out", files("{tmp}/out/experiments.csv", "{tmp}/out/trials.csv")),
    ("det e describe {exp} --metrics --outdir {tmp}/out2", files("{tmp}/out2/workloads.csv")),
    ("det e config {exp}", out(r"^searcher:")),
    ("det e list-trials {exp}", out(r"^\s*{trial}\s+COMPLETED")),
    ("det e lt {exp} --json", as_json(lambda d, c: len(d) == 2 and all(_typed_trial(t) for t in d))),
    ("det e lt {exp} --csv", out(r"^id,.*hparams\.learning_rate")),
    ("det e list-checkpoints {exp}", out(r"{uuid}")),
    (
        "det e lc {exp} --best 1 --json",
        as_json(lambda d, c: len(d) == 1 and isinstance(d[0]["total_batches"], int)),
    ),
    ("det e lc {exp} --csv", out(r"^uuid,trial_id,total_batches")),
    ("det e download {exp} --top-n 1 -o {tmp}/dl", out(r"Downloaded checkpoint")),
    ("det e download-model-def {exp} -o {tmp}/md", files("{tmp}/md/__init__.py")),
    ("det e wait {exp}", out(r"COMPLETED")),
    ("det t describe {trial}", out(r"State:\s+COMPLETED")),
    ("det trial describe {trial} --metrics", out(r"Training steps:")),
    ("det t describe {trial} --json", as_json(lambda d, c: _typed_trial(d))),
    (
        "det t describe {trial} --metrics --json",
        as_json(lambda d, c: isinstance(d["steps"][0]["num_batches"], int)),
    ),
    ("det t describe {trial} --csv", out(r"^id,experiment_id,state")),
    ("det trial logs {trial}", lambda c, r: r.returncode == 0 or pytest.fail(r.stderr)),
    ("det t logs {trial} --head 1 --system", lines(1)),
    ("det t logs {trial} --tail 1 --system", lines(1)),
    ("det t logs {trial} --system", out(r"^\[pedl\] ")),
    ("det t logs {trial} --system --json", out(r'"system": true')),
    ("det t download {trial} --best -o {tmp}/best", files("{tmp}/best")),
    ("det t download {trial} --latest -o {tmp}/latest", files("{tmp}/latest")),
    ("det checkpoint list {exp}", out(r"{uuid}")),
    (
        "det checkpoint list {exp} --json",
        as_json(lambda d, c: all(isinstance(r["size_bytes"], int) for r in d)),
    ),
    ("det checkpoint list {exp} --csv", out(r"^uuid,trial_id,total_batches,state,num_files,size_bytes")),
    ("det checkpoint download {uuid} -o {tmp}/ck", files("{tmp}/ck")),
    ("det master info", out(r"^version: ")),
    ("det master info --json", as_json(lambda d, c: d["version"] and d["checkpoint_store_address"])),
    ("det master logs --tail 3", lines(3)),
    ("det --version", out(r"^det \d")),
    ("det version", out(r"^master: ")),
    ("det agent list", out(r"agent-1")),
    ("det a list --json", as_json(lambda d, c: d[0]["num_slots"] == 2)),
    ("det slot list", out(r"agent-1")),
    ("det s list --csv", out(r"^agent_id,slot_id")),
    ("det user whoami", out(r"admin")),
    ("det user list", out(r"admin")),
    ("det u list --json", as_json(lambda d, c: any(u["admin"] is True for u in d))),
    ("det tensorboard start {exp} --help", out(r"EXPERIMENT_ID")),
    ("det t kill {trial}", refused("has already ended (COMPLETED)")),
    ("det t kill 9999", refused("trial 9999 not found")),
    ("det agent disable agent-1", out(r"^Disabled agent agent-1")),
    ("det agent list --json", as_json(lambda d, c: d[0]["enabled"] is False)),
    ("det agent enable --all", out(r"^Enabled agent agent-1")),
    ("det slot disable agent-1 0", out(r"^Disabled slot 0 of agent agent-1")),
    ("det slot list --json", as_json(lambda d, c: [s["enabled"] for s in d] == [False, True])),
    ("det slot enable agent-1 0", out(r"^Enabled slot 0")),
    ("det slot disable agent-1 9", refused("has no slot '9'")),
    ("det agent disable nobody", refused("agent 'nobody' is not connected")),
    ("det user activate nobody", refused("user 'nobody' not found")),
    ("det user deactivate admin", refused("cannot deactivate themself")),
    ("det e set description {exp} 'first grid'", out(r"^Set description of experiment {exp}")),
    ("det e describe {exp} --json", as_json(lambda d, c: d["experiment"]["description"] == "first grid")),
    ("det e set max-slots {exp} 2", refused("has ended (COMPLETED): resources.max_slots")),
    ("det e set priority {exp} 100", lambda c, r: r.returncode == 2 or pytest.fail(r.stderr)),
    ("det e label add {exp} mine", out(r"labels: mine")),
    ("det e label add {exp} best", out(r"labels: mine, best")),
    ("det e label remove {exp} mine", out(r"labels: best\)")),
    ("det e label remove {exp} nope", refused("no label 'nope'")),
    ("det e list --json", as_json(lambda d, c: d[0]["labels"] == ["best"] and d[0]["archived"] is False)),
    ("det e archive {exp}", out(r"^Archived experiment {exp}")),
    ("det e list", absent(r"^\s*{exp}\s")),
    ("det e list --all", out(EXP)),
    ("det e unarchive {exp}", out(r"^Unarchived experiment {exp}")),
    ("det e", out(EXP)),
    # A new GC policy for the ended experiment: previewed (a script must confirm), then applied.
    (GC.format(yes=""), refused("pass --yes")),
    (
        GC.format(yes=" --yes"),
        out(r"^Set the checkpoint GC policy .*: [1-9]\d* checkpoint\(s\) deleted"),
    ),
    ("det e config {exp}", out(r"save_experiment_best: 1\n(.|\n)*save_trial_latest: 0")),
    # Determined's spellings that pedl lacked (#38): an alias, an experiment's log, the master's
    # settings, one checkpoint, a rename.
    ("det e ls", out(EXP)),
    ("det e logs {exp} --tail 1 --system", lines(1)),
    ("det experiment logs {exp}", lambda c, r: r.returncode == 0 or pytest.fail(r.stderr)),
    ("det e logs 9999", refused("experiment 9999 not found")),
    ("det master config", out(r"^port: \d+$")),
    (
        "det master config --json",
        as_json(
            lambda d, c: d["cluster-secret-file"] == d["admin-password-file"] == "(set)" and d["port"] > 0
        ),
    ),
    ("det checkpoint describe {uuid}", out(r"^UUID:\s+{uuid}$(.|\n)*^Validation:.* error=")),
    (
        "det checkpoint describe {uuid} --json",
        as_json(
            lambda d, c: d["uuid"] == c.values["uuid"] and d["files"] and "error" in d["validation_metrics"]
        ),
    ),
    ("det e set name {exp} renamed-grid", out(r"^Set name of experiment {exp} to 'renamed-grid'")),
    (
        "det e describe {exp} --json",
        as_json(lambda d, c: d["experiment"]["config"]["name"] == "renamed-grid"),
    ),
    ("det e config {exp}", out(r"^name: renamed-grid$")),
    ("det e set name {exp} ' '", refused("name must be 1-")),
    ("det notebook list", refused("notebook")),
    ("det shell start", refused("shell")),
    ("det cmd run echo hi", refused("command")),
    ("det template list", refused("template")),
    ("det project list", refused("project")),
    ("det workspace list", refused("workspace")),
    ("det model list", refused("model registry")),
    # Creating and stopping experiments last, so the listings above see one experiment.
    ("det e create {grid} {model} -t", out(r"^Test run of the model definition passed")),
    (
        "det e create {grid} {model} --paused --config searcher.max_length.batches=20 --config name=later",
        out(r"^Created experiment \d+ \(paused"),
    ),
    (
        "det e describe {paused_id} --json",
        as_json(
            lambda d, c: (
                d["experiment"]["state"] == "PAUSED"
                and d["experiment"]["config"]["name"] == "later"
                and d["experiment"]["config"]["searcher"]["max_length"] == {"batches": 20}
                and all(t["total_batches"] == 0 for t in d["trials"])
            )
        ),
    ),
    ("det e kill {paused_id}", out(r"experiment {paused_id}")),
    ("det e create {grid} {model} --config searcher.metric=[", refused("--config", "not valid YAML")),
    ("det e create {grid} {model} --config description.x=1", refused("description is a str, not a section")),
    ("det e create {grid} {model} --config nokey", refused("expected KEY=VALUE")),
    (
        "det e create {grid} {model} --follow-first-trial --config hyperparameters.learning_rate.vals=[0.1]",
        out(r"^Following the log of trial \d+$(.|\n)*^Trial \d+ ended COMPLETED$"),
    ),
    ("det e create {grid} {model} --test-mode -f", out(r"COMPLETED")),
    ("det experiment create {long} {model}", out(r"^Created experiment \d+")),
    ("det e archive {long_id}", refused("only an ended experiment")),
    ("det e set max-slots {long_id} 1", out(r"^Set resources.max_slots of experiment {long_id} to 1")),
    ("det e set weight {long_id} 2.5", out(r"resources.weight of experiment {long_id} to 2.5")),
    ("det e set priority {long_id} 10", out(r"resources.priority of experiment {long_id} to 10")),
    ("det e describe {long_id}", out(r"^  resources:.*max_slots=1 .*priority=10")),
    (
        "det e describe {long_id} --json",
        as_json(
            lambda d, c: (
                d["experiment"]["config"]["resources"] | {"weight": 2.5, "priority": 10, "max_slots": 1}
                == d["experiment"]["config"]["resources"]
            )
        ),
    ),
    ("det e set max-slots {long_id} none", out(r"to none \(no cap\)")),
    ("det e set priority {long_id} 0", lambda c, r: r.returncode == 2 or pytest.fail(r.stderr)),
    ("det e pause {long_id}", out(r"^Paused experiment")),
    ("det e activate {long_id}", out(r"^Activated experiment")),
    ("det e delete {long_id} --yes", refused("only an ended experiment can be deleted")),
    ("det e cancel {long_id}", out(r"experiment {long_id}")),
    (
        "det e wait {long_id}",
        lambda c, r: r.returncode == 1 and "CANCELED" in r.stdout or pytest.fail(r.stdout),
    ),
    ("det e delete {long_id}", refused("pass --yes")),
    ("det e delete {long_id} --yes", out(r"^Deleted experiment {long_id} and its \d+ checkpoint")),
    ("det e describe {long_id}", refused("not found")),
    ("det e lt {long_id}", refused("not found")),
]


def test_the_table_is_long_enough() -> None:
    assert len(TABLE) >= 60


@pytest.mark.timeout(1500)  # ~100 commands, six of which run experiments to their end
def test_determined_cli_verbatim(cluster: Cluster) -> None:
    failures = []
    for command, check in TABLE:
        needed = [name for name in ("long_id", "paused_id") if f"{{{name}}}" in command]
        if any(name not in cluster.values for name in needed):
            failures.append(f"{command}: the experiment it names was not created")
            continue
        started = time.monotonic()
        result = cluster.det(command)
        print(f"{time.monotonic() - started:6.1f} s  {command}")
        try:
            check(cluster, result)
        except (AssertionError, pytest.fail.Exception) as e:
            failures.append(f"{command}: {e}")
        if command.startswith("det experiment create {long}") and result.returncode == 0:
            cluster.values["long_id"] = re.search(r"Created experiment (\d+)", result.stdout).group(1)
        if "--paused" in command and result.returncode == 0:
            cluster.values["paused_id"] = re.search(r"Created experiment (\d+)", result.stdout).group(1)
    assert not failures, "\n\n".join(failures)


def test_only_the_owner_or_an_admin_changes_an_experiment(cluster: Cluster) -> None:
    admin = cluster.user
    created = admin.run("det", "user", "create", "bob", "--password-stdin", input="pw-bob-long-enough\n")
    assert created.returncode == 0, created.stderr
    bob = User(cluster.tmp / "bob-home", admin.env["PEDL_MASTER"])
    login = bob.run("det", "user", "login", "bob", "--password-stdin", input="pw-bob-long-enough\n")
    assert login.returncode == 0, login.stderr
    exp = cluster.values["exp"]
    for argv in (
        ("e", "label", "add", exp, "x"),
        ("e", "set", "description", exp, "mine"),
        ("e", "archive", exp),
    ):
        result = bob.run("det", *argv)
        assert result.returncode == 1 and "only its owner or an admin" in result.stderr, result.stderr
    assert json.loads(admin.ok("det", "e", "describe", exp, "--json"))["experiment"]["labels"] == ["best"]

    # Users: bob changes his own password (not admin's); deactivated, he is out until reactivated.
    other = bob.run("det", "user", "change-password", "admin", "--password-stdin", input="x" * 12 + "\n")
    assert other.returncode == 1 and "only an admin" in other.stderr, other.stderr
    changed = bob.run(
        "det", "user", "change-password", "--password-stdin", input="pw-bob-long-enough\nnew-bob-password\n"
    )
    assert changed.returncode == 0 and "Changed the password of bob" in changed.stdout, changed.stderr
    admin.ok("det", "user", "deactivate", "bob")
    users = json.loads(admin.ok("det", "user", "list", "--json"))
    assert [u["active"] for u in users if u["username"] == "bob"] == [False]
    out = bob.run("det", "e", "list")
    assert out.returncode == 1 and "not authenticated" in out.stderr, out.stderr  # his sessions ended
    relogin = bob.run("det", "user", "login", "bob", "--password-stdin", input="new-bob-password\n")
    assert relogin.returncode == 1, relogin.stdout
    admin.ok("det", "user", "activate", "bob")
    login = bob.run("det", "user", "login", "bob", "--password-stdin", input="new-bob-password\n")
    assert login.returncode == 0, login.stderr
    bob.ok("det", "e", "list")


SDK_SCRIPT = """
import os, sys, yaml
from determined.experimental import client

exp_id, grid, model, out = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
exp = client.get_experiment(exp_id)
assert exp.state == client.ExperimentState.COMPLETED == "COMPLETED", exp.state
assert exp.config["searcher"]["name"] == "grid"
trials = list(exp.list_trials())
assert [t.id for t in trials] == sorted(t.id for t in trials) and trials
newest = list(exp.list_trials(sort_by=client.TrialSortBy.ID, order_by=client.OrderBy.DESC, limit=1))
assert newest[0].id == trials[-1].id
trial = client.get_trial(trials[0].id)
assert trial.experiment_id == exp_id and trial.state == client.TrialState.COMPLETED
validations = list(trial.iter_metrics("validation"))
assert validations and "error" in validations[-1].metrics and validations[-1].steps_completed == 40
assert [m.steps_completed for m in trial.iter_metrics("training")] == [10, 20, 30, 40]
assert trial.summary_metrics["training"]["loss"]["count"] == 4
assert list(trial.logs(system=True)) and len(list(trial.logs(system=True, tail=1))) == 1
assert len(list(trial.logs(system=True, head=2))) == 2
best = exp.top_checkpoint()
assert best.state == client.CheckpointState.COMPLETED and best.resources
assert best.training.experiment_id == exp_id and "error" in best.training.validation_metrics["avgMetrics"]
assert exp.list_checkpoints()[0].uuid == best.uuid == exp.top_n_checkpoints(5)[0].uuid
by_batches = exp.list_checkpoints(sort_by=client.CheckpointSortBy.BATCH_NUMBER, order_by=client.OrderBy.ASC)
assert [c.total_batches for c in by_batches] == sorted(c.total_batches for c in by_batches)
same = client.get_checkpoint(best.uuid)
assert same.resources == best.resources and same.training.trial_id == best.trial_id
own = client.get_trial(best.trial_id)
assert own.select_checkpoint(uuid=best.uuid).uuid == best.uuid == own.top_checkpoint().uuid
assert own.select_checkpoint(latest=True).total_batches == 40
path = best.download(os.path.join(out, "sdk-best"))  # not {tmp}/best, which `det t download` fills
assert "model_state_dict.pt" in os.listdir(path)
assert exp_id in [e.id for e in client.list_experiments()]
try:
    trial.select_checkpoint(latest=True, best=True)
except ValueError as e:
    assert "exactly one" in str(e)
else:
    raise AssertionError("select_checkpoint(latest, best) was accepted")

config = yaml.safe_load(open(grid))
config["hyperparameters"]["learning_rate"]["vals"] = [0.1]
created = client.create_experiment(config, model)
assert created.wait(interval=0.2) == client.ExperimentState.COMPLETED
first = created.await_first_trial()
assert [m.steps_completed for m in first.iter_metrics("validation")] == [20, 40]
created.set_name("from-the-sdk")
created.add_label("sdk")
assert created.name == "from-the-sdk" and created.labels == ["sdk"]
print("sdk ok")
"""


def test_determined_sdk_workflow(cluster: Cluster) -> None:
    """Determined's documented `client` workflow, as a user's script runs it."""
    v = cluster.values
    compat = cluster.user.ok("python", "-m", "pedl.harness.compat").strip()  # as the README says
    env = cluster.user.env | {"PYTHONPATH": compat}
    result = subprocess.run(
        ["python", "-c", SDK_SCRIPT, v["exp"], v["grid"], v["model"], str(cluster.tmp)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0 and "sdk ok" in result.stdout, result.stderr
