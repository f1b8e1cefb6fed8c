"""Chaos run: an ASHA and a PBT search on 2 agents, PostgreSQL and S3 (SeaweedFS), while a seeded
schedule kill -9s an agent, the scheduler, the checkpoint store and SeaweedFS, keeps the checkpoint
store down for a longer outage, and crashes (kill -9 of the postmaster) and fast-restarts PostgreSQL
itself, at random moments (`--database sqlite`, the default where PostgreSQL is not installed, leaves
the database faults out).

Each stopped process comes back after a short random delay on its port and data. Afterwards the run
checks what a user owns survived: every experiment COMPLETED; the trials and their hyperparameters
equal a fault-free run of the same searches (same seed, run first by this script); each trial's
step and validation rows are exactly the fault-free run's (none lost, none twice); every checkpoint
the scheduler lists downloads with matching hashes; once the scheduler's reconciler and the store's
orphan sweep have converged, the bucket holds no object that is not one of the scheduler's COMPLETED
checkpoints (an orphan is printed with every log line naming it); and no process is left behind
(a descendant of a killed process, or a harness still running after its search ended).

    .venv/bin/python benchmarks/chaos.py [--seed 7] [--faults 30] [--smoke] [--database postgres]

Prints faults injected by kind, faults survived (all of them when every check passes, else none),
steps and validations lost and twice, the trial restarts spent (a user's max_restarts), orphans,
orphan processes, and the wall time against the fault-free run's. Faults stop when the searches end,
so a short search gets fewer than --faults. Exits 1 when any check fails.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from _chaos_faults import (  # noqa: E402
    DB_CRASH,
    DB_KINDS,
    PROCESS_KINDS,
    STORE_OUTAGE,
    Chaos,
    Sizes,
    orphan_processes,
)

from pedl import _grpc  # noqa: E402
from pedl._metrics import from_struct  # noqa: E402
from pedl.checkpoints import CheckpointStoreClient  # noqa: E402
from pedl.context import pack  # noqa: E402
from pedl.v1 import common_pb2, scheduler_pb2, scheduler_pb2_grpc  # noqa: E402
from support.models import write_tiny_model  # noqa: E402
from support.postgres import PostgresServer, PostgresUnavailable, find_bin_dir, postgres_server  # noqa: E402
from support.processes import LocalCluster, local_cluster  # noqa: E402
from support.seaweedfs import SeaweedFS, seaweedfs  # noqa: E402

COMMON = """
hyperparameters:
  learning_rate: {{type: log, minval: -2, maxval: -0.3}}
reproducibility: {{experiment_seed: {seed}}}
batches_per_step: {bps}
min_checkpoint_period: {{batches: {period}}}
min_validation_period: {{batches: {period}}}
"""
# ASHA runs one trial at a time so that its promotions do not depend on which trial reports first;
# PBT's generations are synchronous. Both are then reproducible from the seed alone.
ASHA = (
    "searcher: {{name: adaptive_asha, metric: error, max_trials: {trials}, "
    "max_length: {{batches: {length}}}, divisor: 2, max_rungs: 2, mode: aggressive, "
    "max_concurrent_trials: 1}}\n"
)
PBT = (
    "searcher: {{name: pbt, metric: error, population_size: 2, num_rounds: {rounds}, "
    "length_per_round: {{batches: {length}}}, replace_function: {{truncate_fraction: 0.5}}, "
    "explore_function: {{resample_probability: 0.5, perturb_factor: 0.2}}}}\n"
)
TERMINAL = {
    common_pb2.EXPERIMENT_STATE_COMPLETED,
    common_pb2.EXPERIMENT_STATE_ERROR,
    common_pb2.EXPERIMENT_STATE_CANCELED,
}


SMOKE = Sizes(10, 10, 3, 80, 2, 40, 5, (1.0, 2.5), (0.5, 1.0), (0.5, 1.0), (*PROCESS_KINDS, DB_CRASH))
LONG = Sizes(
    10, 20, 8, 240, 5, 80, 30, (2.0, 5.0), (0.5, 3.0), (8.0, 15.0), (*PROCESS_KINDS, STORE_OUTAGE, *DB_KINDS)
)


def sizes_for(smoke: bool, postgres: bool) -> Sizes:
    """The searches' sizes; on SQLite (no database server to stop) the database faults are left out."""
    sizes = SMOKE if smoke else LONG
    if not postgres:
        sizes.kinds = tuple(k for k in sizes.kinds if k not in DB_KINDS)
        sizes.faults = min(sizes.faults, len(sizes.kinds)) if smoke else sizes.faults
    return sizes


@dataclass
class Outcome:
    wall: float
    states: list[int]
    trials: list[list[tuple[Any, ...]]]  # per experiment: (hparams, total_batches) per trial by id
    steps: list[list[list[int]]]  # per experiment, per trial: the steps' total_batches
    validations: list[list[list[int]]] = field(default_factory=list)  # the same, of validations
    restarts: int = 0  # trial restarts, all trials together: what the user's max_restarts paid
    processes: list[str] = field(default_factory=list)  # processes left behind (orphans)
    checkpoints: dict[str, common_pb2.Checkpoint] = field(default_factory=dict)
    orphans: int = 0  # bucket objects of no COMPLETED checkpoint
    missing: int = 0  # COMPLETED checkpoints with no object in the bucket
    bad: int = 0  # downloads that failed or whose bytes do not match the listed hashes
    swept: list[str] = field(default_factory=list)  # what the store's orphan sweep removed, and why
    swept_uuids: set[str] = field(default_factory=set)


def stub(cluster: LocalCluster) -> scheduler_pb2_grpc.SchedulerServiceStub:
    return scheduler_pb2_grpc.SchedulerServiceStub(_grpc.channel(cluster.master))


def retrying(call: Callable[[], Any], timeout: float = 120) -> Any:
    """Calls until the scheduler answers: it may be down for a moment."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return call()
        except grpc.RpcError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.3)


def configs(sizes: Sizes, seed: int, s3: SeaweedFS, bucket: str) -> list[str]:
    common = COMMON.format(seed=seed, bps=sizes.bps, period=sizes.period)
    block = yaml.safe_dump({"checkpoint_storage": s3.storage_config(bucket)})
    return [
        common + block + ASHA.format(trials=sizes.asha_trials, length=sizes.asha_length),
        common + block + PBT.format(rounds=sizes.pbt_rounds, length=sizes.pbt_length),
    ]


def submit(cluster: LocalCluster, model: Path, config: str) -> int:
    packed = pack(model)
    request = scheduler_pb2.CreateExperimentRequest(
        config_yaml=config, model_definition=packed.data, model_definition_name=packed.name
    )
    return retrying(lambda: stub(cluster).CreateExperiment(request, timeout=30)).experiment.id


def states(cluster: LocalCluster, exp_ids: list[int]) -> list[int]:
    def get(exp_id: int) -> int:
        request = scheduler_pb2.GetExperimentRequest(experiment_id=exp_id)
        return stub(cluster).GetExperiment(request, timeout=10).experiment.state

    return [retrying(lambda e=e: get(e)) for e in exp_ids]


def collect(cluster: LocalCluster, exp_ids: list[int], wall: float) -> Outcome:
    api = stub(cluster)
    outcome = Outcome(wall, states(cluster, exp_ids), [], [])
    for exp_id in exp_ids:
        response = api.GetExperiment(scheduler_pb2.GetExperimentRequest(experiment_id=exp_id), timeout=30)
        trials, steps, validations = [], [], []
        for trial in sorted(response.trials, key=lambda t: t.id):
            detail = api.GetTrial(scheduler_pb2.GetTrialRequest(trial_id=trial.id), timeout=30)
            hparams = sorted(from_struct(trial.hparams).items())
            trials.append((repr(hparams), trial.total_batches))
            steps.append([s.total_batches for s in detail.steps])
            validations.append([v.total_batches for v in detail.validations])
            outcome.restarts += trial.restarts
            for c in detail.checkpoints:
                if c.state == common_pb2.CHECKPOINT_STATE_COMPLETED:
                    outcome.checkpoints[c.uuid] = c
        outcome.trials.append(trials)
        outcome.steps.append(steps)
        outcome.validations.append(validations)
    return outcome


def run(
    cluster: LocalCluster, model: Path, cfgs: list[str], chaos: Chaos | None, timeout: float
) -> tuple[list[int], float]:
    """Submits the searches, injects faults while they run; the ids and the wall time to their end."""
    start = time.monotonic()
    exp_ids = [submit(cluster, model, c) for c in cfgs]
    deadline = start + timeout
    while not all(s in TERMINAL for s in states(cluster, exp_ids)):
        if time.monotonic() > deadline:
            raise SystemExit(f"experiments {exp_ids} did not end in {timeout:.0f} s:\n{cluster.logs()}")
        if chaos is not None and chaos.injected < chaos.sizes.faults:
            time.sleep(chaos.rng.uniform(*chaos.sizes.gap))
            if not all(s in TERMINAL for s in states(cluster, exp_ids)):
                chaos.fault()
        else:
            time.sleep(0.3)
    return exp_ids, time.monotonic() - start


def bucket_uuids(s3: SeaweedFS, bucket: str) -> set[str]:
    keys: set[str] = set()
    for page in s3.client().get_paginator("list_objects_v2").paginate(Bucket=bucket):
        keys.update(o["Key"].split("/", 1)[0] for o in page.get("Contents", []))
    return keys


def converge(
    cluster: LocalCluster, s3: SeaweedFS, bucket: str, exp_ids: list[int], timeout: float
) -> Outcome:
    """The outcome once the bucket and the scheduler's COMPLETED checkpoints agree (or at timeout)."""
    deadline = time.monotonic() + timeout
    while True:
        outcome = collect(cluster, exp_ids, 0.0)
        if bucket_uuids(s3, bucket) == set(outcome.checkpoints) or time.monotonic() > deadline:
            return outcome
        time.sleep(1.0)


def explain_orphans(
    cluster: LocalCluster, s3: SeaweedFS, bucket: str, uuids: list[str], what: str = "orphan"
) -> None:
    """Each checkpoint's objects and every log line that names it: how it came to be an orphan (or
    to be missing from the bucket)."""
    logs = {p.name: p.read_text(errors="replace") for p in cluster.workdir.glob("*.log")}
    for uuid in uuids:
        listing = s3.client().list_objects_v2(Bucket=bucket, Prefix=f"{uuid}/").get("Contents", [])
        print(f"{what} {uuid}: {[(o['Key'], str(o['LastModified'])) for o in listing]}")
        for name, text in sorted(logs.items()):
            for line in text.splitlines():
                if uuid in line:
                    print(f"  {name}: {line[:400]}")


SWEPT = ("orphan checkpoint removed", "direct upload abandoned")


def sweep_evidence(cluster: LocalCluster) -> tuple[list[str], set[str]]:
    """What the store's orphan sweep cleaned up during the run, each with the earlier log lines naming
    its uuid (the story of how it was left behind)."""
    lines = cluster.store.log().splitlines()
    events = []
    for line in lines:
        if line.startswith("{") and any(kind in line for kind in SWEPT):
            events.append(json.loads(line))
    logs = {p.name: p.read_text(errors="replace").splitlines() for p in cluster.workdir.glob("*.log")}
    out = []
    for event in events:
        uuid = event.get("uuid", "")
        out.append(f"swept: {event.get('event')} {uuid} (age {event.get('age_seconds', '?')} s)")
        for name, text in sorted(logs.items()):
            out += [f"  {name}: {line[:300]}" for line in text if uuid and uuid in line]
    return out, {e.get("uuid", "") for e in events}


def download_mismatches(
    cluster: LocalCluster, checkpoints: dict[str, common_pb2.Checkpoint], tmp: Path
) -> int:
    bad = 0
    with CheckpointStoreClient(cluster.store.address) as store:
        for uuid, listed in checkpoints.items():
            target = tmp / "downloads" / uuid
            try:
                store.download(uuid, target)
            except Exception as e:  # noqa: BLE001 - a failed download is a figure, not a crash
                print(f"checkpoint {uuid}: download failed: {e}")
                bad += 1
                continue
            for f in listed.files:
                digest = hashlib.sha256((target / f.path).read_bytes()).hexdigest()
                if digest != f.sha256:
                    print(f"checkpoint {uuid}: {f.path} hashes {digest}, listed {f.sha256}")
                    bad += 1
    return bad


def row_figures(expected: list[list[list[int]]], actual: list[list[list[int]]]) -> tuple[int, int]:
    """(lost, duplicated) rows of `actual` against `expected`, trial by trial."""
    lost = duplicated = 0
    for exp_steps, act_steps in zip(expected, actual, strict=False):
        for want, got in zip(exp_steps, act_steps, strict=False):
            duplicated += len(got) - len(set(got)) + len(set(got) - set(want))
            lost += len(set(want) - set(got))
    return lost, duplicated


def one_cluster(
    tmp: Path,
    name: str,
    pg: PostgresServer | None,
    s3: SeaweedFS,
    sizes: Sizes,
    seed: int,
    chaos_rng: random.Random | None,
) -> tuple[Outcome, Chaos | None]:
    """One run of the searches on a cluster of its own: with faults when `chaos_rng` is given. On
    PostgreSQL, in the database named `name`; else in the cluster's SQLite file."""
    bucket = f"chaos-{name}"
    s3.create_bucket(bucket)
    scheduler_args = [
        *(["--db", pg.url(name)] if pg else []),
        "--checkpoint-reconcile-interval", "2",
        "--orphan-checkpoint-grace", "5",
    ]  # fmt: skip
    # The cluster allows experiments' checkpoints in this bucket on this SeaweedFS (and nowhere else).
    allow = ["--allowed-s3-bucket", bucket, "--allowed-s3-endpoint", s3.endpoint_url]
    # The store sweeps bytes no record or upload claims (a crash's leftovers) once 5 s old, every second.
    sweep = ["--orphan-sweep-grace", "5", "--orphan-sweep-interval", "1"]
    model = write_tiny_model(tmp / "tiny")
    with local_cluster(
        tmp / name,
        agents=2,
        scheduler_args=scheduler_args + allow,
        store_args=allow + sweep,
        reconnect_grace=10,
    ) as cluster:
        chaos = Chaos(cluster, s3, pg, chaos_rng, sizes) if chaos_rng else None
        try:
            exp_ids, wall = run(cluster, model, configs(sizes, seed, s3, bucket), chaos, timeout=1800)
            outcome = converge(cluster, s3, bucket, exp_ids, timeout=90)
            outcome.wall = wall
            outcome.processes = orphan_processes(chaos, cluster)
            for line in outcome.processes:
                print(f"orphan process {line}")
            orphans = sorted(bucket_uuids(s3, bucket) - set(outcome.checkpoints))
            outcome.orphans = len(orphans)
            explain_orphans(cluster, s3, bucket, orphans)
            missing = sorted(set(outcome.checkpoints) - bucket_uuids(s3, bucket))
            outcome.missing = len(missing)
            explain_orphans(cluster, s3, bucket, missing, "missing")
            outcome.swept, outcome.swept_uuids = sweep_evidence(cluster)
            outcome.bad = download_mismatches(cluster, outcome.checkpoints, tmp / name)
        except BaseException:
            print(cluster.logs())
            raise
    return outcome, chaos


def _interrupt(signum: int, frame: object) -> None:
    """SIGTERM unwinds like Ctrl-C, so every process this run started is stopped by PID on the way out."""
    raise KeyboardInterrupt


def postgres_available() -> bool:
    try:
        find_bin_dir()
        import psycopg  # noqa: F401
    except (PostgresUnavailable, ImportError):
        return False
    return True


def run_both(
    args: argparse.Namespace, sizes: Sizes, tmp: Path, pg: PostgresServer | None
) -> tuple[Outcome, Outcome, Chaos]:
    """The fault-free run, then the run under faults, of the same searches."""
    if pg is not None:
        import psycopg

        with psycopg.connect(pg.url(), autocommit=True) as admin:
            admin.execute("CREATE DATABASE baseline")
            admin.execute("CREATE DATABASE chaos")
    with seaweedfs(tmp / "s3") as s3:
        db = "PostgreSQL" if pg else "SQLite"
        print(f"== chaos run, seed {args.seed}: ASHA + PBT on 2 agents, {db}, SeaweedFS", flush=True)
        baseline, _ = one_cluster(tmp, "baseline", pg, s3, sizes, args.seed, None)
        print(f"fault-free run: {baseline.wall:.1f} s", flush=True)
        chaotic, chaos = one_cluster(tmp, "chaos", pg, s3, sizes, args.seed, random.Random(args.seed))
    assert chaos is not None
    return baseline, chaotic, chaos


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seed", type=int, default=7, help="seeds the searches and the fault schedule")
    p.add_argument("--faults", type=int, default=0, help="faults to inject (default 30; 5 with --smoke)")
    p.add_argument("--smoke", action="store_true", help="small searches and one fault of each kind")
    p.add_argument(
        "--database",
        choices=("postgres", "sqlite"),
        default="postgres" if postgres_available() else "sqlite",
        help="the scheduler's database: PostgreSQL (default where its binaries are installed; "
        "then crashed and restarted among the faults) or SQLite",
    )
    args = p.parse_args()
    signal.signal(signal.SIGTERM, _interrupt)
    sizes = sizes_for(args.smoke, args.database == "postgres")
    if args.faults:
        sizes.faults = args.faults
    with tempfile.TemporaryDirectory(prefix="pedl-chaos-") as d:
        if args.database == "postgres":
            with postgres_server() as pg:
                baseline, chaotic, chaos = run_both(args, sizes, Path(d), pg)
        else:
            baseline, chaotic, chaos = run_both(args, sizes, Path(d), None)
    return report(baseline, chaotic, chaos)


def report(baseline: Outcome, chaotic: Outcome, chaos: Chaos) -> int:
    """Prints the figures; 0 when nothing a user owns was lost, doubled or left behind."""
    lost, duplicated = row_figures(baseline.steps, chaotic.steps)
    v_lost, v_duplicated = row_figures(baseline.validations, chaotic.validations)
    completed = all(s == common_pb2.EXPERIMENT_STATE_COMPLETED for s in chaotic.states)
    same_trials = chaotic.trials == baseline.trials
    orphans, missing, bad = chaotic.orphans, chaotic.missing, chaotic.bad
    print(f"faults injected:   {chaos.injected}")
    for kind, count in sorted(chaos.kinds.items()):
        print(f"  {kind + ':':<28}{count}")
    print(f"faults survived:   {chaos.survived if completed else 0}")
    names = [common_pb2.ExperimentState.Name(s) for s in chaotic.states]
    print(f"experiments:       {'all COMPLETED' if completed else names}")
    print(f"trials, hparams:   {'equal to' if same_trials else 'DIFFERENT from'} the fault-free run")
    steps = sum(len(t) for e in baseline.steps for t in e)
    validations = sum(len(t) for e in baseline.validations for t in e)
    print(f"step rows:         {steps} in the fault-free run")
    print(f"steps lost:        {lost}")
    print(f"duplicates:        {duplicated}")
    print(f"validation rows:   {validations} in the fault-free run")
    print(f"validations lost:  {v_lost}")
    print(f"validations twice: {v_duplicated}")
    print(f"user restarts:     {chaotic.restarts} (fault-free run: {baseline.restarts})")
    print(
        f"checkpoints:       {len(chaotic.checkpoints)} listed, {bad} failed download/hash, {missing} missing"
    )
    if chaotic.swept:
        print("\n".join(chaotic.swept))
    print(f"swept by store:    {len(chaotic.swept_uuids)}")
    print(f"orphans:           {orphans}")
    print(f"orphan processes:  {len(chaotic.processes)}")
    ratio = chaotic.wall / baseline.wall
    print(f"wall time:         {chaotic.wall:.1f} s vs {baseline.wall:.1f} s fault-free, ratio {ratio:.2f}")
    if not same_trials:
        print(f"fault-free trials: {baseline.trials}\nchaos trials:      {chaotic.trials}")
    ok = (
        completed
        and same_trials
        and lost == duplicated == v_lost == v_duplicated == 0
        and orphans == missing == bad == 0
        and not chaotic.processes
    )
    print("result:            " + ("PASS" if ok else "FAIL"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
