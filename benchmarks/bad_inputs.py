"""Bad input at create, counted: a catalogue of bad configs (every case Determined's schema tests expect
to fail), bad model definitions (a syntax error, an import error, an entrypoint naming no class or a
function or a missing module, a Trial whose __init__ raises, an empty directory) and bad archives (a
file too big, symlinks out of the tree, absolute and ../ paths, a declared 10 GiB entry, garbage),
sent to `pedl experiment create` against a local cluster (1 agent, SQLite).

Directories go through the CLI as a user runs it; crafted archives, which the CLI never makes, go
to the same CreateExperiment call the CLI makes, and the one line a refusal carries is what the CLI
prints. Each case is sorted into: refused at create with exactly one line (and no experiment made),
refused with more than one line, or accepted — then followed to its end: what it failed with, after
how many restarts (`max_restarts: 1`), or that it ran.

    .venv/bin/python benchmarks/bad_inputs.py [--smoke] [--markdown]

Prints each case's outcome and a table by kind; `--markdown` prints the table as the README has it.
`--smoke` sends a few of each kind. Exits 1 when an input that must fail at create (a config, an archive
other than a directory the CLI packs without its outward symlink) was accepted, or any refusal took
more than one line.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import grpc
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from _bad_input_cases import Case, archive_cases, determined_config_cases, model_cases  # noqa: E402

from pedl import _grpc  # noqa: E402
from pedl.v1 import common_pb2, scheduler_pb2, scheduler_pb2_grpc  # noqa: E402
from support.models import TINY_TRIAL  # noqa: E402

TINY = TINY_TRIAL.format(build_model_body="pass")  # a good model definition's __init__.py
from support.processes import LocalCluster, local_cluster  # noqa: E402

TERMINAL = {
    common_pb2.EXPERIMENT_STATE_COMPLETED,
    common_pb2.EXPERIMENT_STATE_ERROR,
    common_pb2.EXPERIMENT_STATE_CANCELED,
}


@dataclass
class Result:
    case: Case
    outcome: str  # "refused, one line", "refused, N lines", "accepted, failed later", "accepted, ran"
    text: str  # the refusal, or what it failed with later


def stub(cluster: LocalCluster) -> scheduler_pb2_grpc.SchedulerServiceStub:
    return scheduler_pb2_grpc.SchedulerServiceStub(_grpc.channel(cluster.master))


def experiment_count(cluster: LocalCluster) -> int:
    return len(stub(cluster).ListExperiments(scheduler_pb2.ListExperimentsRequest(), timeout=30).experiments)


def create(cluster: LocalCluster, case: Case, tmp: Path) -> tuple[int | None, str]:
    """Creates the case's experiment: (its id, "") or (None, what the user was told)."""
    config = yaml.safe_dump(case.config)
    if case.archive is not None:
        request = scheduler_pb2.CreateExperimentRequest(
            config_yaml=config, model_definition=case.archive, model_definition_name="model_def"
        )
        try:
            return stub(cluster).CreateExperiment(request, timeout=60).experiment.id, ""
        except grpc.RpcError as e:
            return None, e.details() or ""
    model = Path(tempfile.mkdtemp(prefix="model-", dir=tmp))
    for name, text in (case.files if case.files is not None else {"__init__.py": TINY}).items():
        (model / name).write_text(text)
    if case.prepare:
        case.prepare(model)
    (tmp / "config.yaml").write_text(config)
    env = {**os.environ, "PEDL_MASTER": cluster.master, "PEDL_TOKEN": cluster.token}
    done = subprocess.run(
        [sys.executable, "-m", "pedl.cli", "experiment", "create", str(tmp / "config.yaml"), str(model)],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    said = (done.stdout + done.stderr).strip()
    if done.returncode != 0:
        return None, said
    if found := re.search(r"Created experiment (\d+)", said):
        return int(found.group(1)), said
    raise SystemExit(f"create succeeded but named no experiment id: {said!r}")


def follow(cluster: LocalCluster, exp_id: int, timeout: float) -> tuple[bool, str]:
    """Waits for the experiment's end: (it COMPLETED, what its trials failed with and their restarts)."""
    deadline = time.monotonic() + timeout
    while True:
        got = stub(cluster).GetExperiment(
            scheduler_pb2.GetExperimentRequest(experiment_id=exp_id), timeout=30
        )
        if got.experiment.state in TERMINAL or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    state = common_pb2.ExperimentState.Name(got.experiment.state).removeprefix("EXPERIMENT_STATE_")
    if got.experiment.state not in TERMINAL:
        stub(cluster).KillExperiment(scheduler_pb2.KillExperimentRequest(experiment_id=exp_id), timeout=30)
        state += f" after {timeout:.0f} s (killed)"
    errors = [t.error.strip().splitlines()[-1] for t in got.trials if t.error.strip()]
    restarts = sum(t.restarts for t in got.trials)
    detail = f"{state}, {restarts} restarts" + (f": {errors[0]}" if errors else "")
    return got.experiment.state == common_pb2.EXPERIMENT_STATE_COMPLETED, detail


def judge(cluster: LocalCluster, case: Case, tmp: Path) -> Result:
    before = experiment_count(cluster)
    exp_id, said = create(cluster, case, tmp)
    if exp_id is None:
        lines = [line for line in said.splitlines() if line.strip()]
        made = experiment_count(cluster) - before
        outcome = "refused, one line" if len(lines) == 1 and made == 0 else f"refused, {len(lines)} lines"
        if made:
            outcome += f", {made} experiment(s) made anyway"
        return Result(case, outcome, said)
    ran, detail = follow(cluster, exp_id, timeout=180)
    warned = [line for line in said.splitlines() if line.strip() and "Created experiment" not in line]
    detail += "".join(f"; the CLI said: {line.strip()}" for line in warned)
    return Result(case, "accepted, ran" if ran else "accepted, failed later", detail)


def catalogue(smoke: bool) -> list[Case]:
    tiny = TINY
    configs, models, archives = determined_config_cases(), model_cases(tiny), archive_cases(tiny)
    if smoke:
        return configs[:: max(1, len(configs) // 3)][:3] + models[:1] + models[2:3] + archives[2:4]
    return configs + models + archives


def table(results: list[Result]) -> str:
    kinds = list(dict.fromkeys(r.case.kind for r in results))
    rows = [
        "| bad input | sent | refused at create, one line | refused, more lines "
        "| accepted, failed later | accepted, ran |",
        "|---|---|---|---|---|---|",
    ]
    for kind in kinds:
        mine = [r for r in results if r.case.kind == kind]
        count = {
            o: sum(r.outcome == o for r in mine)
            for o in ("refused, one line", "accepted, failed later", "accepted, ran")
        }
        more = len(mine) - sum(count.values())
        rows.append(
            f"| {kind}s | {len(mine)} | {count['refused, one line']} | {more} | "
            f"{count['accepted, failed later']} | {count['accepted, ran']} |"
        )
    return "\n".join(rows)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--smoke", action="store_true", help="a few cases of each kind")
    p.add_argument("--markdown", action="store_true", help="print the table as the README has it")
    args = p.parse_args()
    cases = catalogue(args.smoke)
    results: list[Result] = []
    with (
        tempfile.TemporaryDirectory(prefix="pedl-bad-inputs-") as d,
        local_cluster(Path(d) / "cluster") as cluster,
    ):
        for case in cases:
            result = judge(cluster, case, Path(d))
            results.append(result)
            text = result.text.replace("\n", " | ")
            print(f"[{case.kind}] {case.what}: {result.outcome}: {text[:300]}", flush=True)
    print(table(results))
    bad = [
        r
        for r in results
        if r.outcome.startswith("refused,")
        and r.outcome != "refused, one line"
        or r.case.must_refuse
        and r.outcome.startswith("accepted")
    ]
    print(
        f"sent: {len(results)}; refused at create with one line: "
        f"{sum(r.outcome == 'refused, one line' for r in results)}; needing a look: {len(bad)}"
    )
    for r in bad:
        print(f"  needs a look: [{r.case.kind}] {r.case.what}: {r.outcome}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
