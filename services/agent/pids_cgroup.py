"""A per-trial process limit (`pedl-agent --trial-pids-limit`): each run's processes in a pids cgroup of
its own, whose `pids.max` a fork bomb runs into (its forks fail with EAGAIN) without touching any other
trial, and which is removed, with whatever is left in it, when the run ends.

Which mechanism applies is decided once per agent (`choose`, pure): cgroup v1's pids hierarchy, else
cgroup v2's pids controller (where the agent's cgroup can hand it down), else RLIMIT_NPROC set by the
harness itself, but only where it cannot starve another trial: it counts every process of the Unix user,
so on an agent with more than one slot one trial's bomb would take the others' forks; root is exempt.
Otherwise none, and every trial's log says so in one line; a trial never fails for it.

The cgroup writes are thin (`TrialCgroups`); a spawned harness enters its cgroup before it execs
(`enter_argv`), a forked one before it reads the end of its request (`ForkServer.fork`), so no process
of the trial runs outside it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import structlog

CGROUP_ROOT = Path("/sys/fs/cgroup")
V1 = "cgroup v1"
V2 = "cgroup v2"
RLIMIT = "RLIMIT_NPROC"
NONE = "none"
# The agent's directory of trial cgroups, named for its pid (a sweep removes those of dead agents).
AGENT_PREFIX = "pedl-agent-"
# On cgroup v2 where the agent's own cgroup could not hand pids down: the leaf the agent moves into.
AGENT_LEAF = "agent"
REMOVE_SECONDS = 10.0
FLAG = "pedl-agent --trial-pids-limit"


@dataclass(frozen=True)
class PidsPlan:
    """How this agent bounds each trial's processes and threads."""

    mechanism: str  # V1, V2, RLIMIT or NONE
    limit: int  # 0: no limit asked for
    parent: Path | None = None  # the cgroup the agent makes its directory of trial cgroups in
    why_not_cgroup: str = ""

    @property
    def rlimit(self) -> int:
        """What the harness lowers RLIMIT_NPROC to (0: it leaves it)."""
        return self.limit if self.mechanism == RLIMIT else 0

    def trial_line(self) -> str:
        """The line each trial's log gets when no cgroup bounds it ("" when one does, or none is asked)."""
        if self.mechanism in (V1, V2) or self.limit == 0:
            return ""
        if self.mechanism == RLIMIT:
            return (
                f"process limit: {self.limit} processes and threads of the trial's Unix user (RLIMIT_NPROC, "
                f"{FLAG}); no pids cgroup here: {self.why_not_cgroup}"
            )
        return f"no process limit applies to this trial ({FLAG} {self.limit} asked): {self.why_not_cgroup}"


def own_cgroup(proc_self_cgroup: str, controller: str) -> str | None:
    """This process's cgroup path in `controller`'s v1 hierarchy, or the v2 one for "" (from the text of
    /proc/self/cgroup: `ID:CONTROLLERS:PATH` lines; v2's is `0::PATH`)."""
    for line in proc_self_cgroup.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        names = parts[1].split(",") if parts[1] else []
        if (controller == "" and parts[0] == "0" and not names) or (controller and controller in names):
            return parts[2]
    return None


def _under(mount: Path, path: str) -> Path:
    return mount / path.lstrip("/")


def choose(
    limit: int,
    proc_self_cgroup: str,
    slots: int,
    trials_as_root: bool,
    root: Path = CGROUP_ROOT,
    writable: Callable[[Path], bool] = lambda p: os.access(p, os.W_OK),
) -> PidsPlan:
    """Which mechanism bounds a trial's processes on this agent (see the module's docstring)."""
    if limit <= 0:
        return PidsPlan(NONE, 0)
    reasons: list[str] = []
    v1 = root / "pids"
    v1_path = own_cgroup(proc_self_cgroup, "pids")
    if (v1 / "cgroup.procs").exists() and not (v1 / "cgroup.controllers").exists() and v1_path is not None:
        parent = _under(v1, v1_path)
        if writable(parent):
            return PidsPlan(V1, limit, parent)
        reasons.append(f"{parent} is not writable")
    mount = root if (root / "cgroup.controllers").exists() else root / "unified"
    v2_path = own_cgroup(proc_self_cgroup, "")
    if (mount / "cgroup.controllers").exists() and v2_path is not None:
        parent = _under(mount, v2_path)
        controllers = _read(parent / "cgroup.controllers").split()
        if "pids" not in controllers:
            reasons.append(f"cgroup v2 has no pids controller in {parent}")
        elif not writable(parent):
            reasons.append(f"{parent} is not writable")
        else:
            return PidsPlan(V2, limit, parent)
    if not reasons:
        reasons.append("no cgroup pids controller is mounted")
    return fallback(limit, "; ".join(reasons), slots, trials_as_root)


def fallback(limit: int, why: str, slots: int, trials_as_root: bool) -> PidsPlan:
    """RLIMIT_NPROC where it cannot starve another trial, else none; `why`: why no cgroup."""
    if trials_as_root:
        return PidsPlan(NONE, limit, None, f"{why}, and trials run as root, whom RLIMIT_NPROC does not bound")
    if slots > 1:
        return PidsPlan(
            NONE,
            limit,
            None,
            f"{why}, and RLIMIT_NPROC counts every process of the Unix user this agent's {slots} slots' "
            "trials share, so one trial's fork bomb would starve the others",
        )
    return PidsPlan(RLIMIT, limit, None, why)


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def enter_argv(cgroup: Path | None, argv: list[str]) -> list[str]:
    """`argv` run by a shell that first moves itself into `cgroup` (before the exec, so nothing the
    harness starts is outside it); `argv` itself without one."""
    if cgroup is None:
        return argv
    script = 'echo $$ > "$0" || echo "pedl: could not enter the trial\'s pids cgroup $0" >&2; exec "$@"'
    return ["/bin/sh", "-c", script, str(cgroup / "cgroup.procs"), *argv]


class TrialCgroups:
    """The agent's directory of trial pids cgroups (`<parent>/pedl-agent-<pid>/<trial>-<run>`)."""

    def __init__(self, plan: PidsPlan) -> None:
        assert plan.parent is not None and plan.mechanism in (V1, V2)
        self.plan = plan
        self.home = plan.parent / f"{AGENT_PREFIX}{os.getpid()}"

    def setup(self) -> str:
        """Makes the agent's directory (on v2 with the pids controller handed down to it); "" or why not.
        Call it before the agent starts any process."""
        self.sweep_dead_agents()
        try:
            self.home.mkdir(exist_ok=True)
            if self.plan.mechanism == V2:
                self._hand_down()
        except OSError as e:
            with contextlib.suppress(OSError):
                self.home.rmdir()
            return f"cannot make {self.home} with pids.max ({e.strerror or e})"
        return ""

    def _hand_down(self) -> None:
        """Enables pids in the agent's cgroup's and its directory's subtree_control. cgroup v2 lets a
        cgroup that holds processes hand no controller down (EBUSY), so where the agent's does (a
        systemd unit with Delegate=pids, a container's root) the agent first moves itself into a leaf
        of its directory (`AGENT_LEAF`), and back where that does not help."""
        parent = self.plan.parent
        assert parent is not None
        try:
            _enable_pids(parent)
        except OSError as e:
            if e.errno != errno.EBUSY:
                raise
            leaf = self.home / AGENT_LEAF
            leaf.mkdir(exist_ok=True)
            place(leaf, os.getpid())
            try:
                _enable_pids(parent)
            except OSError:
                place(parent, os.getpid())
                with contextlib.suppress(OSError):
                    leaf.rmdir()
                raise
        _enable_pids(self.home)

    def make(self, name: str) -> Path:
        """A new cgroup for one run with the limit in place (OSError when it cannot be made)."""
        path = self.home / name
        if path.exists():  # an earlier run of this name the agent could not remove
            remove(path)
        path.mkdir()
        (path / "pids.max").write_text(f"{self.plan.limit}\n")
        return path

    def close(self) -> None:
        """Removes the runs' cgroups and the agent's directory (one holding the agent itself, on
        cgroup v2, stays: a later agent's sweep removes it once this one has exited)."""
        for child in self.home.glob("*"):
            if child.is_dir() and child.name != AGENT_LEAF:
                remove(child)
        with contextlib.suppress(OSError):
            self.home.rmdir()

    def sweep_dead_agents(self) -> None:
        """Removes the directories an agent killed before its clean-up left behind."""
        assert self.plan.parent is not None
        for home in self.plan.parent.glob(f"{AGENT_PREFIX}*"):
            pid = home.name[len(AGENT_PREFIX) :]
            if pid.isdigit() and not _alive(int(pid)):
                for child in home.glob("*"):
                    if child.is_dir():
                        remove(child, seconds=1.0)
                with contextlib.suppress(OSError):
                    home.rmdir()


def _enable_pids(cgroup: Path) -> None:
    control = cgroup / "cgroup.subtree_control"
    if "pids" not in _read(control).split():
        control.write_text("+pids\n")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def place(cgroup: Path, pid: int) -> None:
    """Moves process `pid` (all its threads) into `cgroup`."""
    (cgroup / "cgroup.procs").write_text(f"{pid}\n")


def refused_forks(cgroup: Path) -> int:
    """How many forks `pids.max` refused in `cgroup` (its pids.events' `max` count)."""
    for line in _read(cgroup / "pids.events").splitlines():
        name, _, count = line.partition(" ")
        if name == "max" and count.strip().isdigit():
            return int(count)
    return 0


def refused_line(refused: int, limit: int) -> str:
    return (
        f"the trial reached its process limit of {limit} processes and threads ({FLAG}): "
        f"{refused} of its forks or new threads were refused (EAGAIN)"
    )


def members(cgroup: Path) -> list[int]:
    return [int(p) for p in _read(cgroup / "cgroup.procs").split() if p.isdigit()]


def remove(cgroup: Path, seconds: float = REMOVE_SECONDS) -> bool:
    """Kills whatever is left in `cgroup` and removes it; False when it could not within `seconds`."""
    deadline = time.monotonic() + seconds
    kill_file = cgroup / "cgroup.kill"  # v2 (Linux 5.14+): the whole cgroup at once
    while True:
        if kill_file.exists():
            with contextlib.suppress(OSError):
                kill_file.write_text("1\n")
        for pid in members(cgroup):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        try:
            cgroup.rmdir()
            return True
        except FileNotFoundError:
            return True
        except OSError as e:
            if e.errno not in (errno.EBUSY, errno.ENOTEMPTY) or time.monotonic() > deadline:
                structlog.get_logger().warning(
                    "cannot remove a trial's pids cgroup", cgroup=str(cgroup), error=str(e)
                )
                return False
        time.sleep(0.02)


@dataclass
class ProcessLimit:
    """The agent's per-trial process limit: its plan, and the cgroups that carry it out (if any)."""

    plan: PidsPlan
    cgroups: TrialCgroups | None = None

    @classmethod
    def for_agent(cls, limit: int, slots: int, trials_as_root: bool) -> ProcessLimit:
        plan = choose(limit, _read(Path("/proc/self/cgroup")), slots, trials_as_root)
        if plan.mechanism not in (V1, V2):
            return cls(plan)
        cgroups = TrialCgroups(plan)
        why = cgroups.setup()
        if why:
            return cls(fallback(limit, why, slots, trials_as_root))
        return cls(plan, cgroups)

    def make(self, name: str) -> tuple[Path | None, str]:
        """The run's cgroup (None without one) and the line its trial log gets ("" for none)."""
        if self.cgroups is None:
            return None, self.plan.trial_line()
        try:
            return self.cgroups.make(name), ""
        except OSError as e:
            why = f"cannot make its pids cgroup {self.cgroups.home / name} ({e.strerror or e})"
            return None, f"no process limit applies to this trial ({FLAG} {self.plan.limit} asked): {why}"

    def close(self) -> None:
        if self.cgroups is not None:
            self.cgroups.close()


@dataclass
class RunPids:
    """One run's share of the process limit: its cgroup from its harness's start to its end."""

    limit: ProcessLimit
    cgroup: Path | None = None
    hit: str = ""  # the line saying the run reached its limit ("" while it has not)

    def make(self, name: str) -> str:
        """Makes the run's cgroup; returns the line its trial log gets ("" for none)."""
        self.cgroup, note = self.limit.make(name)
        return note

    def enter_argv(self, argv: list[str]) -> list[str]:
        return enter_argv(self.cgroup, argv)

    def place(self, pid: int) -> None:
        """Moves a forked harness into the run's cgroup (before it runs anything of the trial)."""
        if self.cgroup is not None:
            try:
                place(self.cgroup, pid)
            except OSError as e:
                log = structlog.get_logger()
                log.warning("cannot move a harness into its pids cgroup", pid=pid, error=str(e))

    def remove(self) -> str:
        """Kills what is left of the run and removes its cgroup; returns `hit`."""
        if self.cgroup is not None:
            refused = refused_forks(self.cgroup)
            if refused:
                self.hit = refused_line(refused, self.limit.plan.limit)
            remove(self.cgroup)
            self.cgroup = None
        return self.hit
