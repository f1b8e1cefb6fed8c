"""The bubblewrap sandbox each harness process runs in, so trial code stays inside its trial.

The harness sees the system read-only, its own trial directory writable, its own /tmp and /dev/shm
(shared by the run's ranks on this machine) and its own PID namespace (it cannot see or signal the
agent, and when its first process ends every process it started dies with it). The agent's secrets
and state are covered: $PEDL_HOME, the agent's work directory (other trials, model-definition
cache), the socket directory (only this run's socket is bound back) and any path the operator names
(`--hide-path`: a database's data directory, a store's root). Loopback networking stays, for gloo
rendezvous between ranks.
"""

from __future__ import annotations

import glob
import hashlib
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

BWRAP = "bwrap"
ISOLATION_MODES = ("bwrap", "none")
# Inside a fork server's sandbox: the machine's /dev/shm, and where a child stages its own paths.
FORK_HOST_SHM = "/run/pedl-host-shm"
FORK_STAGE = "/run/pedl-stage"


def bwrap_path() -> str | None:
    return shutil.which(BWRAP)


def default_isolation() -> str:
    """`bwrap` where it is installed and works here, else `none` (which the agent warns about)."""
    path = bwrap_path()
    return "bwrap" if path and bwrap_problem(path) is None else "none"


def bwrap_problem(path: str) -> str | None:
    """Why bwrap cannot make a sandbox on this machine (no namespaces for this user, ...), or None."""
    argv = [path, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-pid", "true"]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        return str(e)
    return None if done.returncode == 0 else (done.stderr.strip() or f"exit code {done.returncode}")


@dataclass(frozen=True)
class Sandbox:
    """What every sandboxed harness on one agent hides; `wrap` adds what one run may reach."""

    bwrap: str
    # Directories and files no trial may read (covered by an empty tmpfs, or /dev/null for a file).
    hidden: Sequence[Path] = field(default_factory=tuple)
    # Device nodes bound in (GPUs), e.g. /dev/nvidia0, /dev/nvidiactl.
    devices: Sequence[str] = field(default_factory=tuple)
    # Files a harness needs that may lie in a hidden place (the TLS CA bundle), bound back read-only.
    readable: Sequence[Path] = field(default_factory=tuple)
    # Directories the operator shares with every trial, writable (--bind: datasets, scratch). Bound
    # before the hidden paths, so the agent's own files inside one stay hidden.
    shared: Sequence[Path] = field(default_factory=tuple)

    def wrap(self, argv: Sequence[str], trial_dir: Path, cwd: Path, socket_path: Path) -> list[str]:
        """The bwrap command line that runs `argv` in `cwd` with only `trial_dir` writable."""
        out = [self.bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
        # /tmp and /dev/shm are the run's own but shared by its ranks on this machine (data one rank
        # downloads for all, NCCL's shared-memory transport): /tmp in its trial dir, /dev/shm in RAM.
        tmp = trial_dir / ".tmp"
        tmp.mkdir(parents=True, exist_ok=True)
        out += ["--bind", str(tmp), "/tmp", "--bind", str(tmp), "/var/tmp", "--tmpfs", "/run"]
        shm = self.shm_dir(trial_dir)
        if shm is not None:
            shm.mkdir(mode=0o700, exist_ok=True)
            out += ["--bind", str(shm), "/dev/shm"]
        if Path("/run/systemd/resolve").is_dir():  # /etc/resolv.conf may point here
            out += ["--ro-bind", "/run/systemd/resolve", "/run/systemd/resolve"]
        for path in self.shared:
            out += ["--bind", str(path), str(path)]
        covered = self._covers(out)
        out += ["--bind", str(trial_dir), str(trial_dir)]
        out += ["--bind", str(socket_path), str(socket_path)]
        # Read-only once the run's own paths are bound inside them: nothing written there persists
        # or can be mistaken for the agent's files.
        for path in reversed(covered):
            out += ["--remount-ro", str(path)]
        # No capability inside: a root agent's bwrap would otherwise hand its own on, and trial code
        # could unmount the covers above (or remount them writable).
        out += ["--cap-drop", "ALL", "--unshare-pid", "--die-with-parent", "--chdir", str(cwd), "--"]
        return out + list(argv)

    def _covers(self, out: list[str]) -> list[Path]:
        """Adds the hidden paths' covers (and what is bound back in) to `out`; returns the directories
        covered. Ancestors first: a tmpfs over a parent would cover one already laid over its child."""
        covered: list[Path] = []
        for path in sorted(set(self.hidden), key=lambda p: len(p.parts)):
            if any(path.is_relative_to(c) for c in covered):
                continue  # already out of sight
            if path.is_dir():
                out += ["--tmpfs", str(path)]
                covered.append(path)
            elif path.exists():
                out += ["--ro-bind", "/dev/null", str(path)]
        for path in self.readable:
            if path.exists():
                out += ["--ro-bind", str(path), str(path)]
        for dev in self.devices:
            out += ["--dev-bind", dev, dev]
        return covered

    def wrap_fork_server(
        self, argv: Sequence[str], trials_root: Path, socket_dir: Path, trees_root: Path | None = None
    ) -> list[str]:
        """The sandbox of a fork server (`fork_server.py`): as a harness's, but seeing every run's
        directory and socket (and, read-only, the unpacked model definitions each child's model
        directory is a view of), with the machine's /dev/shm at FORK_HOST_SHM, and the capabilities
        (in its own user namespace) each child needs to narrow that to its own run (`child_plan`)."""
        out = [self.bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
        out += ["--tmpfs", "/tmp", "--tmpfs", "/var/tmp", "--tmpfs", "/run", "--dir", FORK_STAGE]
        if Path("/dev/shm").is_dir():
            out += ["--bind", "/dev/shm", FORK_HOST_SHM]
        if Path("/run/systemd/resolve").is_dir():
            out += ["--ro-bind", "/run/systemd/resolve", "/run/systemd/resolve"]
        for path in self.shared:
            out += ["--bind", str(path), str(path)]
        covered = self._covers(out)
        out += ["--bind", str(trials_root), str(trials_root), "--bind", str(socket_dir), str(socket_dir)]
        if trees_root is not None:
            out += ["--ro-bind", str(trees_root), str(trees_root)]
        for path in reversed(covered):
            out += ["--remount-ro", str(path)]
        out += ["--cap-add", "CAP_SYS_ADMIN", "--cap-add", "CAP_SETPCAP", "--die-with-parent", "--"]
        return out + list(argv)

    def child_plan(
        self, trial_dir: Path, socket_path: Path, trials_root: Path, trees_root: Path | None = None
    ) -> dict[str, object]:
        """What a forked harness narrows its fork server's view to (`pedl.harness._namespaces`): every
        experiment's model definition is covered too, once its own is mounted as its model directory."""
        (trial_dir / ".tmp").mkdir(parents=True, exist_ok=True)
        shm = self.shm_dir(trial_dir)
        if shm is not None:
            shm.mkdir(mode=0o700, exist_ok=True)
        covered = [trials_root, socket_path.parent, *([trees_root] if trees_root is not None else [])]
        return {
            "trial_dir": str(trial_dir),
            "socket_path": str(socket_path),
            "covered": [str(c) for c in covered],
            "shm": f"{FORK_HOST_SHM}/{shm.name}" if shm is not None else "",
            "host_shm": FORK_HOST_SHM if Path("/dev/shm").is_dir() else "",
            "stage": FORK_STAGE,
            "shared": [
                str(p) for p in self.shared if p.is_relative_to("/tmp") or p.is_relative_to("/var/tmp")
            ],
            "readable": [
                str(p)
                for p in self.readable
                if p.is_file() and (p.is_relative_to("/tmp") or p.is_relative_to("/var/tmp"))
            ],
        }

    @staticmethod
    def shm_dir(trial_dir: Path) -> Path | None:
        """The run's /dev/shm: a directory of the machine's, named for the run's trial directory."""
        if not Path("/dev/shm").is_dir():
            return None
        return Path("/dev/shm") / f"pedl-{hashlib.sha1(str(trial_dir).encode()).hexdigest()[:16]}"

    def release(self, trial_dir: Path) -> None:
        """Frees what the run's sandbox held outside its trial directory (its shared memory)."""
        shm = self.shm_dir(trial_dir)
        if shm is not None:
            shutil.rmtree(shm, ignore_errors=True)


def gpu_devices(have_gpus: bool) -> list[str]:
    """The NVIDIA device nodes to bind in when the agent has GPUs."""
    if not have_gpus:
        return []
    return sorted(glob.glob("/dev/nvidia*"))


def make_sandbox(
    isolation: str,
    hidden: Sequence[Path],
    have_gpus: bool,
    readable: Sequence[Path] = (),
    shared: Sequence[Path] = (),
    harness_programs: Sequence[str] = (),
) -> Sandbox | None:
    """The agent's sandbox for `--isolation`, or None for `none`; a ValueError if bwrap is absent."""
    if isolation == "none":
        return None
    if isolation != "bwrap":
        raise ValueError(f"--isolation must be one of {', '.join(ISOLATION_MODES)}, got {isolation!r}")
    path = bwrap_path()
    if path is None:
        raise ValueError(
            "--isolation bwrap: bubblewrap (`bwrap`) is not installed; install it "
            "(apt-get install bubblewrap) or run with --isolation none"
        )
    problem = bwrap_problem(path)
    if problem is not None:
        raise ValueError(
            f"--isolation bwrap: {path} cannot make a sandbox here ({problem}); fix that or run "
            "with --isolation none"
        )
    harnesses = [Path(a) for a in harness_programs]
    for hidden_path in hidden:
        for program in harnesses:
            if program.is_absolute() and program.absolute().is_relative_to(hidden_path.absolute()):
                raise ValueError(
                    f"--isolation bwrap hides {hidden_path} from trials, but the harness program "
                    f"{program} lies inside it; install the Python environment elsewhere"
                )
    return Sandbox(
        path,
        tuple(p.resolve() for p in hidden),
        tuple(gpu_devices(have_gpus)),
        tuple(p.resolve() for p in readable),
        tuple(p.resolve() for p in shared),
    )
