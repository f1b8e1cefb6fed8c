"""The chaos run's fault schedule and its count of processes left behind.

Each fault stops one process the way a crash or an operator would (kill -9 of an agent, the
scheduler, the checkpoint store or SeaweedFS; the checkpoint store kept down for a longer outage;
kill -9 of PostgreSQL's postmaster, or its fast restart as `pg_ctl restart -m fast` does), waits,
then starts it again on its port and data. Before each kill the killed process's descendants are
noted: any of them still alive at the end (same pid and start time) is an orphan process, as is a
harness other than an agent's fork server still running once every search has ended.
"""

from __future__ import annotations

import os
import random
import signal
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from support.postgres import PostgresServer, restart_server, start_again
from support.processes import LocalCluster
from support.seaweedfs import SeaweedFS

# Every kind of fault, by the name the run prints; a run uses those its database allows.
AGENT, SCHEDULER = "kill -9 agent", "kill -9 scheduler"
STORE, SEAWEEDFS = "kill -9 checkpoint store", "kill -9 SeaweedFS"
STORE_OUTAGE = "checkpoint store outage"
DB_CRASH, DB_RESTART = "kill -9 PostgreSQL", "PostgreSQL fast restart"
PROCESS_KINDS = (AGENT, SCHEDULER, STORE, SEAWEEDFS)
DB_KINDS = (DB_CRASH, DB_RESTART)
HARNESS = b"pedl.harness"
FORK_SERVER = b"pedl.harness.zygote"


@dataclass
class Sizes:
    bps: int
    period: int
    asha_trials: int
    asha_length: int
    pbt_rounds: int
    pbt_length: int
    faults: int
    gap: tuple[float, float]  # seconds between one fault's restart and the next fault
    down: tuple[float, float]  # seconds a killed process stays down
    outage: tuple[float, float]  # seconds the checkpoint store stays down in an outage
    kinds: tuple[str, ...]  # the kinds of fault this size draws from (those the database allows)


def _argv(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").strip()
    except OSError:
        return b""


def _stat(pid: int) -> tuple[int, str] | None:
    """(parent pid, start time) of `pid`, or None when it is gone or a zombie."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[1]), fields[19]) if fields[0] != "Z" else None


def descendants(root: int) -> dict[int, str]:
    """Every live process under `root` (not `root` itself), with its start time."""
    stats = {
        int(p.name): s for p in Path("/proc").iterdir() if p.name.isdigit() and (s := _stat(int(p.name)))
    }
    under: set[int] = {root}
    while more := {pid for pid, (parent, _) in stats.items() if parent in under} - under:
        under |= more
    return {pid: stats[pid][1] for pid in under - {root}}


class Chaos:
    """The seeded fault schedule: one process stopped, then started again on its port and data."""

    def __init__(
        self,
        cluster: LocalCluster,
        s3: SeaweedFS,
        pg: PostgresServer | None,
        rng: random.Random,
        sizes: Sizes,
    ) -> None:
        self.cluster, self.s3, self.pg, self.rng, self.sizes = cluster, s3, pg, rng, sizes
        self.injected = 0
        self.survived = 0
        self.kinds: Counter[str] = Counter()
        self.log: list[str] = []
        self.order: list[str] = []
        self.watched: dict[int, str] = {}  # pid -> start time of processes under a killed one

    def _watch(self, pid: int) -> None:
        self.watched.update(descendants(pid))

    def fault(self) -> None:
        # Each round hits every kind once, in a seeded order.
        if not self.order:
            self.order = self.rng.sample(self.sizes.kinds, len(self.sizes.kinds))
        kind = self.order.pop()
        down = self.rng.uniform(*(self.sizes.outage if kind == STORE_OUTAGE else self.sizes.down))
        self.injected += 1
        c = self.cluster
        what = kind
        if kind == AGENT:
            agent = c.agents.pop(self.rng.randrange(len(c.agents)))
            self._watch(agent.process.pid)
            os.kill(agent.process.pid, signal.SIGKILL)
            agent.process.wait(timeout=10)
            what = f"kill -9 {agent.name}"
            time.sleep(down)
            c.start_agent(int(agent.name.removeprefix("agent")))
        elif kind == SCHEDULER:
            self._watch(c.scheduler.process.pid)
            c.kill_scheduler()
            time.sleep(down)
            c.start_scheduler()
        elif kind in (STORE, STORE_OUTAGE):
            self._watch(c.store.process.pid)
            c.kill_store()
            time.sleep(down)
            c.start_store()
        elif kind == SEAWEEDFS:
            self.s3.kill()
            time.sleep(down)
            self.s3.start()
        else:
            assert self.pg is not None, "database faults need PostgreSQL"
            self._watch(self.pg.process.pid)
            if kind == DB_CRASH:
                self.pg.process.send_signal(signal.SIGKILL)
                self.pg.process.wait(timeout=10)
                time.sleep(down)
                start_again(self.pg)
            else:
                down = 0.0  # stopped and started at once, as `pg_ctl restart -m fast` does
                restart_server(self.pg, crash=False)
        self.kinds[kind] += 1
        self.survived += 1  # it came back up; whether the work survived is checked after
        self.log.append(f"fault {self.injected}: {what}, down {down:.1f} s")
        print(self.log[-1], flush=True)


def orphan_processes(chaos: Chaos | None, cluster: LocalCluster, timeout: float = 30) -> list[str]:
    """Processes left behind once every search ended: any descendant of a killed process still
    alive, and any harness under a live agent other than its fork server. Waits up to `timeout`
    for them to exit (a harness finishing its last report is not an orphan yet)."""
    deadline = time.monotonic() + timeout
    while True:
        left = []
        if chaos is not None:
            for pid, started in chaos.watched.items():
                stat = _stat(pid)
                if stat is not None and stat[1] == started:
                    left.append(
                        f"{pid} (under a killed process): {_argv(pid).decode(errors='replace')[:200]}"
                    )
        for agent in cluster.agents:
            for pid in descendants(agent.process.pid):
                argv = _argv(pid)
                parent = _stat(pid)
                forked = parent is not None and _argv(parent[0]) == argv  # a harness the fork server forked
                if HARNESS in argv and (forked or FORK_SERVER not in argv):
                    left.append(f"{pid} (harness under {agent.name}): {argv.decode(errors='replace')[:200]}")
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.5)
