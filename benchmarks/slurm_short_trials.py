"""The short-trials workload (benchmarks/short_trials.py) through a Slurm pool on one node, beside
pedl's own agent, same machine, same run; each as a ratio to ideal (trials x work / slots).

Both clusters start cold: the Slurm figure includes what a Slurm user pays, the pilot job's queueing
and its agent's start, once per pilot (a pilot runs many trials), not per trial. Needs root and
Debian's slurm-wlm (scripts/setup-env); a real slurmctld and slurmd start with a private config.

    .venv/bin/python benchmarks/slurm_short_trials.py [--trials 16] [--slots 2] [--smoke]
"""

from __future__ import annotations

import argparse
import shlex
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from short_trials import MODEL, Workload, _search  # noqa: E402

from pedl import _grpc  # noqa: E402
from pedl.context import pack  # noqa: E402
from pedl.v1 import scheduler_pb2_grpc  # noqa: E402
from support.processes import BIN, local_cluster  # noqa: E402
from support.slurm import slurm_cluster, unavailable_reason  # noqa: E402

POOL = "hpc"


def _stub(master: str) -> scheduler_pb2_grpc.SchedulerServiceStub:
    return scheduler_pb2_grpc.SchedulerServiceStub(_grpc.channel(master))


def run_agents(root: Path, packed, work: Workload, slots: int) -> float:
    with local_cluster(root / "agents", agents=1, slots=slots) as cluster:
        return _search(_stub(cluster.master), packed, work, work.trials)


def run_slurm(root: Path, packed, work: Workload, slots: int) -> float:
    with slurm_cluster(root / "slurm", cpus=slots) as slurm:
        workdir = root / "pilots"
        agent = [str(BIN / "pedl-agent"), "--cluster-secret-file", str(workdir / "cluster-secret")]
        args = [
            "--resource-pool", f"{POOL}=slurm:{slurm.partition}",
            "--slurm-agent-command", shlex.join(agent),
            "--slurm-slots-per-node", str(slots),
            "--slurm-max-jobs", "1",
            "--slurm-poll", "0.5",
            "--slurm-output-dir", str(root / "jobs"),
        ]  # fmt: skip
        env = {**slurm.env, "HOME": str(root / "home")}
        with local_cluster(workdir, agents=0, scheduler_args=args, scheduler_env=env) as cluster:
            extra = f"resources: {{resource_pool: {POOL}}}\n"
            return _search(_stub(cluster.master), packed, work, work.trials, extra)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--trials", type=int, default=16)
    p.add_argument("--slots", type=int, default=2)
    p.add_argument(
        "--smoke", action="store_true", help="4 trials of 0.01 s batches: that it runs, not its figures"
    )
    args = p.parse_args()
    reason = unavailable_reason()
    if reason is not None:
        print(f"slurm_short_trials: skipped ({reason})")
        return
    work = Workload(trials=4, sleep=0.01) if args.smoke else Workload(trials=args.trials, sleep=0.25)
    slots = 2 if args.smoke else args.slots
    print(f"== {work.trials} trials x {work.steps} steps of {work.per_step} batches, {slots} slots, one node")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        model = root / "short"
        model.mkdir()
        (model / "__init__.py").write_text(MODEL.format(sleep=work.sleep))
        packed = pack(model)
        ideal = work.ideal(slots)
        agents = run_agents(root, packed, work, slots)
        print(f"pedl agent done ({agents:.2f} s)", flush=True)
        pilots = run_slurm(root, packed, work, slots)
    print(f"ideal {ideal:.2f} s")
    print(f"pedl agent: {agents:.2f} s ({agents / ideal:.2f}x ideal)")
    print(f"Slurm pilot: {pilots:.2f} s ({pilots / ideal:.2f}x ideal)")
    print(f"ratio Slurm/agent {pilots / agents:.2f}")


if __name__ == "__main__":
    main()
