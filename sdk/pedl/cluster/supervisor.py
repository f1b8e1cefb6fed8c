"""The process `cluster up` leaves behind: it restarts a crashed service and records its new pid.

`python -m pedl.cluster.supervisor --home H` runs detached (own session, pid in cluster.json). It
watches the services recorded in cluster.json by pid (they need not be its children: `cluster up`
started the first generation), restarts one that died with its recorded argv after a backoff, and
writes the new pid, start time and restart count, so `cluster down` stops what runs now. On SIGTERM
it finishes the step it is in (a spawned service is always recorded) and exits; `cluster down`
then stops the services itself, agents first.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from pedl import _timeutil
from pedl.cluster import processes
from pedl.cluster.paths import ClusterPaths
from pedl.cluster.state import ClusterRecord, ServiceRecord, load_state, save_state

POLL_SECONDS = 0.5


@dataclass(frozen=True)
class Backoff:
    """Doubling delays between restarts of a service that keeps dying, reset once it stays up."""

    first_seconds: float = 1.0
    max_seconds: float = 30.0
    # A service that ran this long before it died is restarted after `first_seconds` again.
    stable_seconds: float = 60.0

    def delay(self, crashes_in_a_row: int) -> float:
        return min(self.max_seconds, self.first_seconds * 2 ** max(0, crashes_in_a_row - 1))


def supervisor_argv(home: Path) -> list[str]:
    return [sys.executable, "-m", "pedl.cluster.supervisor", "--home", str(home)]


def uptime_seconds(started_at: str) -> float:
    if not started_at:
        return 0.0
    started = datetime.fromisoformat(started_at.replace("Z", "+00:00"))
    return (datetime.fromisoformat(_timeutil.utc_now().replace("Z", "+00:00")) - started).total_seconds()


class Supervisor:
    def __init__(self, paths: ClusterPaths, state: ClusterRecord, backoff: Backoff = Backoff()) -> None:
        self.paths = paths
        self.state = state
        self.backoff = backoff
        self.stopping = False
        self.children: dict[str, subprocess.Popen[bytes]] = {}
        self.crashes: dict[str, int] = {}  # consecutive crashes per service
        self.due: dict[str, float] = {}  # when a dead service is restarted (monotonic)

    def log(self, line: str) -> None:
        print(f"{_timeutil.utc_now()} {line}", flush=True)

    def step(self, now: float) -> None:
        """One look at every service: notice deaths, restart those whose backoff has passed."""
        for child in self.children.values():
            child.poll()  # reap, so a dead child is not a zombie that still looks alive
        for svc in self.state.services:
            if svc.name in self.due:
                if now >= self.due[svc.name] and not self.stopping:
                    self._restart(svc)
                continue
            if processes.is_ours(svc.pid, svc.argv):
                continue
            ran = uptime_seconds(svc.started_at)
            crashes = 1 if ran >= self.backoff.stable_seconds else self.crashes.get(svc.name, 0) + 1
            self.crashes[svc.name] = crashes
            delay = self.backoff.delay(crashes)
            self.due[svc.name] = now + delay
            self.log(f"{svc.name} (pid {svc.pid}) is gone after {ran:.0f} s; restarting in {delay:.0f} s")

    def _restart(self, svc: ServiceRecord) -> None:
        try:
            proc = processes.spawn(svc.argv, Path(svc.log), cwd=self.paths.root, append=True)
        except OSError as e:
            self.log(f"cannot restart {svc.name}: {e}")
            self.due[svc.name] = time.monotonic() + self.backoff.delay(self.crashes.get(svc.name, 1) + 1)
            return
        self.children[svc.name] = proc
        del self.due[svc.name]
        svc.pid = proc.pid
        svc.started_at = _timeutil.utc_now()
        svc.restarts += 1
        save_state(self.paths.state_file, self.state)
        self.log(f"restarted {svc.name}: pid {proc.pid} (restart {svc.restarts})")

    def run(self) -> int:
        self.state.supervisor_pid = os.getpid()
        self.state.supervisor_argv = supervisor_argv(self.paths.home)
        save_state(self.paths.state_file, self.state)
        self.log(f"supervising {', '.join(s.name for s in self.state.services)}")
        while not self.stopping:
            self.step(time.monotonic())
            time.sleep(POLL_SECONDS)
        self.log("stopping (cluster down)")
        return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pedl.cluster.supervisor")
    parser.add_argument("--home", required=True)
    args = parser.parse_args(argv)
    paths = ClusterPaths(Path(args.home))
    state = load_state(paths.state_file)
    if state is None:
        print(f"no cluster recorded in {paths.state_file}", file=sys.stderr)
        return 2
    supervisor = Supervisor(paths, state)

    def stop(signum: int, frame: object) -> None:
        supervisor.stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    return supervisor.run()


if __name__ == "__main__":
    sys.exit(main())
