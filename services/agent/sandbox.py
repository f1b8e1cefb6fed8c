"""The bubblewrap sandbox each harness process runs in, so trial code stays inside its trial.

The harness sees an allow-list (`trial_view`): the system directories and a few /etc files
read-only, its Python environment read-only, its own trial directory writable, its own /tmp and
/dev/shm (shared by the run's ranks on this machine), its socket, its experiment's bind_mounts, and
its own PID namespace (it cannot see or signal the agent, and when its first process ends every
process it started dies with it). Nothing else of the host is there: not /root, /home, /var, the
agent's work directory or $PEDL_HOME. Paths the operator hides (`--hide-path`) stay covered where
they lie inside something the view holds. Under a root agent the harness runs as an unprivileged
user (`--trial-user`, or the one its pedl user is linked to), never as root. Loopback networking
stays, for gloo rendezvous between ranks.
"""

from __future__ import annotations

import functools
import glob
import hashlib
import os
import posixpath
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .trial_view import (
    ETC_DIR,
    SYSTEM_PATHS,
    Mount,
    TrialUser,
    minimal,
    python_paths,
    system_args,
    write_identity,
)

BWRAP = "bwrap"
ISOLATION_MODES = ("bwrap", "none")
# Inside a fork server's sandbox: the machine's /dev/shm, and where a child stages its own paths.
FORK_HOST_SHM = "/run/pedl-host-shm"
FORK_STAGE = "/run/pedl-stage"
# What a root agent's sandbox keeps to become the run's user (`become`): gone once it has.
_SWITCH_CAPS = ("CAP_SETUID", "CAP_SETGID", "CAP_SETPCAP")
SETPRIV = "setpriv"


@functools.cache
def _system_args() -> tuple[str, ...]:
    return tuple(system_args())


# Where a bubblewrap option's destination is, counted from the option.
_DEST = {"--dir": 1, "--tmpfs": 1, "--bind": 2, "--ro-bind": 2, "--symlink": 2, "--dev-bind": 2}


def _bind(out: list[str], flag: str, source: Path, dest: Path) -> None:
    """Binds `source` at `dest`, first making its parents in the view traversable (0755: bubblewrap
    makes missing ones 0700, which the run's unprivileged user could not pass)."""
    parents = [str(p) for p in reversed(dest.parents) if p != Path("/")]
    made = {out[i + _DEST[a]] for i, a in enumerate(out) if a in _DEST}
    out += [a for p in parents if p not in made for a in ("--dir", p)]
    out += [flag, str(source), str(dest)]


def _in_tmp(path: Path) -> bool:
    return path.is_relative_to("/tmp") or path.is_relative_to("/var/tmp")


def become(user: TrialUser) -> list[str]:
    """The command prefix that runs the rest as `user`, with no supplementary group and no capability
    left (util-linux's setpriv; bubblewrap has set no_new_privs, so nothing can give one back)."""
    return [
        shutil.which(SETPRIV) or SETPRIV,
        f"--reuid={user.uid}",
        f"--regid={user.gid}",
        "--clear-groups",
        "--bounding-set=-all",
        "--inh-caps=-all",
        "--",
    ]


def own_tree(user: TrialUser | None, tree: Path) -> None:
    """Gives the run's user an experiment's unpacked tree (the lower directory of its runs' overlays,
    which only their overlays show), unless it has it already: a root agent's trial can then rewrite
    its model directory's files in place, as it can a copy's."""
    if user is not None and os.geteuid() == 0 and tree.stat().st_uid != user.uid:
        _chown_tree(tree, user)


def hand_over(user: TrialUser | None, trial_dir: Path, socket_path: Path, shm: Path | None) -> None:
    """Gives the run's user its trial directory (model directory copy included), its socket and its
    /dev/shm, where it is not the agent's own user."""
    if user is None or os.geteuid() != 0:
        return
    _chown_tree(trial_dir, user)
    for path in (socket_path, shm):
        if path is not None and path.exists():
            os.chown(path, user.uid, user.gid)


def _chown_tree(top: Path, user: TrialUser) -> None:
    os.chown(top, user.uid, user.gid)
    for parent, dirs, files in os.walk(top):
        for name in (*dirs, *files):
            path = os.path.join(parent, name)
            # Never a file with other names (a hard link an earlier run made): only its own copies.
            if name in dirs or os.lstat(path).st_nlink == 1:
                os.lchown(path, user.uid, user.gid)


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
    """What every sandboxed harness on one agent sees and hides; `wrap` adds what one run may reach."""

    bwrap: str
    # Directories and files no trial may read (covered by an empty tmpfs, or /dev/null for a file)
    # where they lie inside something the view holds (an operator's --bind, a Python environment).
    hidden: Sequence[Path] = field(default_factory=tuple)
    # Device nodes bound in (GPUs), e.g. /dev/nvidia0, /dev/nvidiactl.
    devices: Sequence[str] = field(default_factory=tuple)
    # Files a harness needs that may lie in a hidden place (the TLS CA bundle), bound back read-only.
    readable: Sequence[Path] = field(default_factory=tuple)
    # Directories the operator shares with every trial, writable (--bind: datasets, scratch). Bound
    # before the hidden paths, so the agent's own files inside one stay hidden.
    shared: Sequence[Path] = field(default_factory=tuple)
    # What the harnesses' Python environments import from (`trial_view.python_paths`), read-only.
    python: Sequence[Path] = field(default_factory=tuple)
    # Whom trials run as when the agent is root (--trial-user); None: as the agent's own user.
    trial_user: TrialUser | None = None
    # Where experiments' bind_mounts may take host paths from (--allowed-bind-root, and --bind).
    bind_roots: Sequence[Path] = field(default_factory=tuple)

    def needed(self, trial_dir: Path, socket_path: Path) -> list[Path]:
        """What a bind mount's container_path must not cover: the system, the Python environment,
        the run's own paths."""
        system = [Path(p) for p in (*SYSTEM_PATHS, "/etc", "/proc", "/dev")]
        return [*system, *self.python, trial_dir, socket_path]

    def _view(self, trial_dir: Path, user: TrialUser | None) -> list[str]:
        """The allow-listed base every sandbox starts from (bubblewrap's root is an empty tmpfs)."""
        passwd, group = write_identity(trial_dir, user or TrialUser.current())
        out = [self.bwrap, *_system_args(), "--ro-bind", str(passwd), "/etc/passwd"]
        out += ["--ro-bind", str(group), "/etc/group", "--dev", "/dev", "--proc", "/proc"]
        if Path("/sys").is_dir():  # read-only, as containers have it: CPU and GPU topology
            out += ["--ro-bind", "/sys", "/sys"]
        return out

    def _environment(self, out: list[str]) -> None:
        """The Python environments (after /tmp: one may live in a checkout there) and --bind dirs."""
        for path in self.python:
            _bind(out, "--ro-bind", path, path)
        if Path("/run/systemd/resolve").is_dir():  # /etc/resolv.conf may point here
            _bind(out, "--ro-bind", Path("/run/systemd/resolve"), Path("/run/systemd/resolve"))
        for path in self.shared:
            _bind(out, "--bind", path, path)

    def wrap(
        self,
        argv: Sequence[str],
        trial_dir: Path,
        cwd: Path,
        socket_path: Path,
        mounts: Sequence[Mount] = (),
        user: TrialUser | None = None,
    ) -> list[str]:
        """The bwrap command line that runs `argv` in `cwd` with only `trial_dir` (and the run's
        writable bind mounts) writable, as the run's user (`user`, else the agent's --trial-user)."""
        user = user or self.trial_user
        out = self._view(trial_dir, user)
        # /tmp and /dev/shm are the run's own but shared by its ranks on this machine (data one rank
        # downloads for all, NCCL's shared-memory transport): /tmp in its trial dir, /dev/shm in RAM.
        tmp = trial_dir / ".tmp"
        tmp.mkdir(parents=True, exist_ok=True)
        out += [
            "--bind",
            str(tmp),
            "/tmp",
            "--dir",
            "/var",
            "--bind",
            str(tmp),
            "/var/tmp",
            "--tmpfs",
            "/run",
        ]
        shm = self.shm_dir(trial_dir)
        if shm is not None:
            shm.mkdir(mode=0o700, exist_ok=True)
            out += ["--bind", str(shm), "/dev/shm"]
        self._environment(out)
        covered = self._covers(out)
        _bind(out, "--bind", trial_dir, trial_dir)
        _bind(out, "--bind", socket_path, socket_path)
        for mount in mounts:
            # Relative: from the model directory (`../NAME` lies beside it, in the trial directory).
            target = Path(posixpath.normpath(cwd / mount.container))
            _bind(out, "--ro-bind" if mount.read_only else "--bind", mount.host, target)
        # Read-only once the run's own paths are bound inside them: nothing written there persists
        # or can be mistaken for the agent's files.
        for path in reversed(covered):
            out += ["--remount-ro", str(path)]
        out += ["--remount-ro", "/"]  # the skeleton bubblewrap made: nothing written there is kept
        hand_over(user, trial_dir, socket_path, shm)
        out += ["--unshare-pid", "--die-with-parent", "--chdir", str(cwd)]
        if user is None:
            # No capability inside: trial code could otherwise unmount the covers above.
            return [*out, "--cap-drop", "ALL", "--", *argv]
        # A root agent's sandbox: only what it takes to become the run's user, which leaves none.
        caps = ["--cap-drop", "ALL", *(a for c in _SWITCH_CAPS for a in ("--cap-add", c))]
        return [*out, *caps, "--", *become(user), *argv]

    def _covers(self, out: list[str]) -> list[Path]:
        """Adds the covers of hidden paths inside what the view holds (and what is bound back in) to
        `out`; returns the directories covered. Ancestors first: a tmpfs over a parent would cover one
        already laid over its child."""
        covered: list[Path] = []
        visible = [*self.python, *self.shared, *(Path(p) for p in SYSTEM_PATHS)]
        for path in sorted(set(self.hidden), key=lambda p: len(p.parts)):
            if any(path.is_relative_to(c) for c in covered):
                continue  # already out of sight
            if not any(path.is_relative_to(v) for v in visible):
                continue  # never in the view
            if path.is_dir():
                out += ["--tmpfs", str(path)]
                covered.append(path)
            elif path.exists():
                out += ["--ro-bind", "/dev/null", str(path)]
        for path in self.readable:
            if path.exists():
                _bind(out, "--ro-bind", path, path)
        for dev in self.devices:
            out += ["--dev-bind", dev, dev]
        return covered

    def wrap_fork_server(
        self, argv: Sequence[str], trials_root: Path, socket_dir: Path, trees_root: Path | None = None
    ) -> list[str]:
        """The sandbox of a fork server (`fork_server.py`): as a harness's, but seeing every run's
        directory and socket (and, read-only, the unpacked model definitions each child's model
        directory is a view of), with the machine's /dev/shm at FORK_HOST_SHM, and the capabilities
        (in its own user namespace) each child needs to narrow that to its own run (`child_plan`)
        and, for a root agent, to become the run's user."""
        out = self._view(socket_dir / ".fork-server", self.trial_user)  # not a run for the sweep
        out += [
            "--tmpfs",
            "/tmp",
            "--dir",
            "/var",
            "--tmpfs",
            "/var/tmp",
            "--tmpfs",
            "/run",
            "--dir",
            FORK_STAGE,
        ]
        if Path("/dev/shm").is_dir():
            out += ["--bind", "/dev/shm", FORK_HOST_SHM]
        self._environment(out)
        covered = self._covers(out)
        _bind(out, "--bind", trials_root, trials_root)
        _bind(out, "--bind", socket_dir, socket_dir)
        if trees_root is not None:
            _bind(out, "--ro-bind", trees_root, trees_root)
        for path in reversed(covered):
            out += ["--remount-ro", str(path)]
        out += ["--cap-add", "CAP_SYS_ADMIN", "--cap-add", "CAP_SETPCAP"]
        if self.trial_user is not None:
            out += [a for c in _SWITCH_CAPS for a in ("--cap-add", c)]
        return [*out, "--die-with-parent", "--", *argv]

    def child_plan(
        self,
        trial_dir: Path,
        socket_path: Path,
        trials_root: Path,
        trees_root: Path | None = None,
        user: TrialUser | None = None,
        tree: Path | None = None,
    ) -> dict[str, object]:
        """What a forked harness narrows its fork server's view to (`pedl.harness._namespaces`): every
        experiment's model definition is covered too, once its own is mounted as its model directory.
        It becomes the run's user (a root agent's) before any trial code runs."""
        user = user or self.trial_user
        (trial_dir / ".tmp").mkdir(parents=True, exist_ok=True)
        write_identity(trial_dir, user or TrialUser.current())
        shm = self.shm_dir(trial_dir)
        if shm is not None:
            shm.mkdir(mode=0o700, exist_ok=True)
        hand_over(user, trial_dir, socket_path, shm)
        if tree is not None:  # the overlay's lower tree: its files are the run's to rewrite, as a copy's
            own_tree(user, tree)
        covered = [trials_root, socket_path.parent, *([trees_root] if trees_root is not None else [])]
        in_tmp = [p for p in (*self.shared, *self.python) if _in_tmp(p)]
        return {
            "trial_dir": str(trial_dir),
            "socket_path": str(socket_path),
            "covered": [str(c) for c in covered],
            "shm": f"{FORK_HOST_SHM}/{shm.name}" if shm is not None else "",
            "host_shm": FORK_HOST_SHM if Path("/dev/shm").is_dir() else "",
            "stage": FORK_STAGE,
            "shared": [str(p) for p in in_tmp],
            "readable": [str(p) for p in self.readable if p.is_file() and _in_tmp(p)],
            "etc": str(trial_dir / ETC_DIR),
            "uid": user.uid if user is not None else -1,
            "gid": user.gid if user is not None else -1,
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
    trial_user: TrialUser | None = None,
    bind_roots: Sequence[Path] = (),
) -> Sandbox | None:
    """The agent's sandbox for `--isolation`, or None for `none`; a ValueError if bwrap is absent.
    A root agent runs trials as `trial_user` (by default nobody); any other runs them as itself."""
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
    if os.geteuid() == 0:
        trial_user = trial_user or TrialUser.default()
        if shutil.which(SETPRIV) is None:
            raise ValueError(
                "--isolation bwrap as root: util-linux's `setpriv` is not installed; trials must not run "
                "as root (install util-linux)"
            )
    elif trial_user is not None and (trial_user.uid, trial_user.gid) != (os.getuid(), os.getgid()):
        raise ValueError(
            f"--trial-user {trial_user.uid}:{trial_user.gid}: only an agent started as root can run "
            "trials as another user; this one runs them as itself"
        )
    else:
        trial_user = None
    python = minimal(p for program in harness_programs for p in python_paths(program))
    return Sandbox(
        path,
        tuple(p.resolve() for p in hidden),
        tuple(gpu_devices(have_gpus)),
        tuple(p.resolve() for p in readable),
        tuple(p.resolve() for p in shared),
        tuple(python),
        trial_user,
        tuple(p.resolve() for p in (*bind_roots, *shared)),
    )
