"""A real Slurm controller and compute daemon for tests: private slurm.conf, ports and state
directories, started as root (`slurmctld -D -i`, `slurmd -D`) and stopped by PID.

Authentication is `auth/none` with `cred/none` (no munge daemon), which Debian's slurm-wlm 22.05
supports for exactly this: daemons and clients that trust one another on one machine.
"""

from __future__ import annotations

import os
import shlex
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from support.netns import Rig
from support.processes import BIN, LocalCluster, free_port, local_cluster, stop


def unavailable_reason() -> str | None:
    """Why real Slurm cannot run here (None when it can)."""
    for binary in ("slurmctld", "slurmd", "sbatch", "squeue", "scancel"):
        if shutil.which(binary) is None:
            return f"{binary} is not installed (scripts/setup-env installs slurm-wlm as root)"
    if os.geteuid() != 0:
        return "slurmd must run as root"
    return None


@dataclass(frozen=True)
class Node:
    """One compute node: `address` is where slurmctld reaches its slurmd."""

    name: str
    address: str
    hostname: str
    cpus: int = 4


@dataclass
class SlurmCluster:
    workdir: Path
    conf: Path
    partition: str
    processes: list[subprocess.Popen] = field(default_factory=list)
    # How the test process runs Slurm's clients (`ip netns exec NS` when the controller is on a rig host).
    prefix: list[str] = field(default_factory=list)

    @property
    def env(self) -> dict[str, str]:
        """What Slurm's clients need to reach this controller (merge into os.environ)."""
        return {"SLURM_CONF": str(self.conf)}

    def run(self, *argv: str, check: bool = True) -> str:
        out = subprocess.run(
            [*self.prefix, *argv], env={**os.environ, **self.env}, capture_output=True, text=True, timeout=30
        )
        if check and out.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)}: {out.stderr.strip()}\n{self.logs()}")
        return out.stdout

    def jobs(self) -> list[dict[str, str]]:
        """Every job slurmctld still lists: id, name, state and reason."""
        out = self.run("squeue", "--noheader", "--format=%i|%j|%T|%r")
        rows = [line.split("|") for line in out.splitlines() if line.strip()]
        return [{"id": r[0], "name": r[1], "state": r[2], "reason": r[3]} for r in rows]

    def logs(self) -> str:
        parts = []
        for log in sorted(self.workdir.glob("*.log")):
            parts.append(f"==== {log.name}\n{log.read_text(errors='replace')[-3000:]}")
        return "\n".join(parts)

    def stop(self) -> None:
        """Cancels every job, then stops the daemons. A job's slurmstepd is reparented away from
        slurmd, so stopping the daemons alone leaves a running job's step (and its pedl-agent) behind;
        whatever a cancel did not end is killed by its environment (`SLURM_CONF` of this cluster)."""
        if self.processes:
            try:
                for job in self.jobs():
                    self.run("scancel", job["id"], check=False)
                deadline = time.monotonic() + 15
                while self.jobs() and time.monotonic() < deadline:
                    time.sleep(0.5)
            except (OSError, RuntimeError, subprocess.SubprocessError):
                pass  # the controller is gone already: the sweep below still runs
        for process in reversed(self.processes):
            stop(process)
        self.processes.clear()
        _kill_job_processes(f"SLURM_CONF={self.conf}".encode())


def _kill_job_processes(marker: bytes) -> None:
    """SIGKILLs every process whose environment holds `marker`, and the slurmstepd above each."""
    doomed: set[int] = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if marker not in (entry / "environ").read_bytes().split(b"\0"):
                continue
            doomed.add(int(entry.name))
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            if (Path("/proc") / str(parent) / "cmdline").read_bytes().startswith(b"slurmstepd"):
                doomed.add(parent)
        except (OSError, ValueError, IndexError):
            continue
    for pid in doomed:
        try:
            os.kill(pid, 9)
        except OSError:
            pass


def write_conf(
    workdir: Path, nodes: list[Node], partition: str, controller: str, ctld_port: int, slurmd_port: int
) -> Path:
    """A slurm.conf whose every path lies under `workdir`."""
    state = workdir / "state"
    state.mkdir(parents=True, exist_ok=True)
    for node in nodes:
        (workdir / f"spool-{node.name}").mkdir(parents=True, exist_ok=True)
    lines = [
        "ClusterName=pedltest",
        f"SlurmctldHost={socket.gethostname()}({controller})",
        f"SlurmctldPort={ctld_port}",
        f"SlurmdPort={slurmd_port}",
        "AuthType=auth/none",
        "CredType=cred/none",
        "SlurmUser=root",
        "SlurmdUser=root",
        f"StateSaveLocation={state}",
        f"SlurmdSpoolDir={workdir}/spool-%n",
        f"SlurmctldPidFile={workdir}/slurmctld.pid",
        f"SlurmdPidFile={workdir}/slurmd-%n.pid",
        f"SlurmctldLogFile={workdir}/slurmctld.log",
        f"SlurmdLogFile={workdir}/slurmd-%n.log",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "MpiDefault=none",
        "SwitchType=switch/none",
        "JobAcctGatherType=jobacct_gather/none",
        "AccountingStorageType=accounting_storage/none",
        "SchedulerType=sched/backfill",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_CPU",
        "ReturnToService=2",
        "SlurmctldTimeout=30",
        "SlurmdTimeout=60",
        "InactiveLimit=0",
        "KillWait=5",
        "MinJobAge=30",
        # Nodes offer what this file says, not what the machine has (tests ask for more CPUs than a
        # CI runner has; the pilots' work is light).
        "SlurmdParameters=config_overrides",
    ]
    for node in nodes:
        lines.append(
            f"NodeName={node.name} NodeHostname={node.hostname} NodeAddr={node.address} "
            f"CPUs={node.cpus} State=UNKNOWN"
        )
    names = ",".join(n.name for n in nodes)
    lines.append(f"PartitionName={partition} Nodes={names} Default=YES MaxTime=INFINITE State=UP")
    conf = workdir / "slurm.conf"
    conf.write_text("\n".join(lines) + "\n")
    return conf


def _start(argv: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen:
    with open(log, "ab") as out:
        return subprocess.Popen(
            argv, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, **env}, start_new_session=True
        )


def wait_idle(cluster: SlurmCluster, count: int, timeout: float = 60) -> None:
    """Until `count` nodes answer IDLE (or MIXED/ALLOCATED: ready to run jobs)."""
    deadline = time.monotonic() + timeout
    states = ""
    while time.monotonic() < deadline:
        for p in cluster.processes:
            if p.poll() is not None:
                raise RuntimeError(f"a Slurm daemon exited ({p.args}):\n{cluster.logs()}")
        states = cluster.run("sinfo", "--noheader", "--Node", "--format=%N|%t", check=False)
        ready = [
            line
            for line in states.splitlines()
            if line.split("|")[-1].rstrip("*") in {"idle", "mix", "alloc"}
        ]
        if len(ready) >= count:
            return
        time.sleep(0.3)
    raise RuntimeError(f"Slurm nodes not ready: {states}\n{cluster.logs()}")


@contextmanager
def slurm_cluster(workdir: Path, cpus: int = 4, partition: str = "pedl") -> Iterator[SlurmCluster]:
    """slurmctld and one slurmd on this machine (node `n1` on 127.0.0.1)."""
    workdir.mkdir(parents=True, exist_ok=True)
    node = Node("n1", "127.0.0.1", socket.gethostname(), cpus)
    conf = write_conf(workdir, [node], partition, "127.0.0.1", free_port(), free_port())
    cluster = SlurmCluster(workdir, conf, partition)
    env = cluster.env
    try:
        cluster.processes.append(
            _start(["slurmctld", "-D", "-i", "-f", str(conf)], workdir / "slurmctld.out.log", env)
        )
        cluster.processes.append(
            _start(["slurmd", "-D", "-N", node.name, "-f", str(conf)], workdir / "slurmd.out.log", env)
        )
        wait_idle(cluster, 1)
        yield cluster
    finally:
        for job in _job_ids(cluster):
            cluster.run("scancel", job, check=False)
        cluster.stop()


def _job_ids(cluster: SlurmCluster) -> list[str]:
    try:
        return [j["id"] for j in cluster.jobs()]
    except Exception:
        return []


def on_rig(rig: Rig, node_hosts: list[str], cpus: int = 2, partition: str = "pedl") -> SlurmCluster:
    """slurmctld on the rig's `server` host and one slurmd on each of `node_hosts` (network namespaces:
    each node is its own machine on the bridge). The rig stops them with its other services."""
    server = rig.hosts["server"]
    workdir = server.root / "slurm"
    workdir.mkdir(parents=True, exist_ok=True)
    nodes = [Node(name, rig.hosts[name].address, socket.gethostname(), cpus) for name in node_hosts]
    conf = write_conf(workdir, nodes, partition, server.address, 6817, 6818)
    rig.extra_env["SLURM_CONF"] = str(conf)
    cluster = SlurmCluster(workdir, conf, partition, prefix=server.command([]))
    rig.start(server, "slurmctld", ["slurmctld", "-D", "-i", "-f", str(conf)])
    for node in nodes:
        # Only the host's network namespace: `ip netns exec` would mount a /sys of its own, without
        # the cgroups slurmd 22.05 needs to start.
        net = f"--net=/run/netns/{rig.hosts[node.name].namespace}"
        argv = ["nsenter", net, "slurmd", "-D", "-N", node.name, "-f", str(conf)]
        rig.start(None, f"slurmd-{node.name}", argv)
    wait_idle(cluster, len(nodes))
    return cluster


@contextmanager
def pedl_on_slurm(root: Path, pool: str, cpus: int = 4) -> Iterator[tuple[SlurmCluster, LocalCluster]]:
    """A real Slurm (slurm_cluster) and a pedl cluster with no agents of its own whose pool `pool` is
    the Slurm partition: its scheduler sbatches pilot agents, polls squeue every 0.5 s, and its
    pilots exit after 2 s idle."""
    with slurm_cluster(root / "slurm", cpus=cpus) as slurm:
        workdir = root / "pedl"
        agent = [str(BIN / "pedl-agent"), "--cluster-secret-file", str(workdir / "cluster-secret")]
        scheduler_args = [
            "--resource-pool",
            f"{pool}=slurm:{slurm.partition}",
            "--slurm-agent-command",
            shlex.join(agent),
            "--slurm-poll",
            "0.5",
            "--slurm-exit-when-idle",
            "2",
            "--slurm-output-dir",
            str(root / "jobs"),
        ]
        # sbatch passes the scheduler's environment to the pilots: their work dirs go under HOME.
        env = {**slurm.env, "HOME": str(root / "home")}
        with local_cluster(workdir, agents=0, scheduler_args=scheduler_args, scheduler_env=env) as pedl:
            yield slurm, pedl


def until(check: Any, what: str, pedl: LocalCluster, slurm: SlurmCluster, timeout: float = 120) -> Any:
    """check()'s first true value, polled; else fail with `what`, Slurm's queue and both clusters' logs."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"{what}; Slurm lists {_job_ids(slurm)}\n{pedl.logs()}\n{slurm.logs()}")
