"""A forked harness's model directory as a copy-on-write view of the agent's shared model definition.

The agent unpacks each experiment's model definition once (`pedl_agent.model_trees`); a harness
forked for one of its runs mounts an overlay in its own mount namespace: the shared tree below, an
upper directory in the run's trial directory above. A file the trial writes, rewrites in place or
deletes changes only its upper directory: the shared tree, and every other run, never see it.
Where no overlay can be mounted the tree is copied in instead (still no un-gzip per run).

Outside the initial user namespace (a non-root agent, or its fork server's bubblewrap sandbox)
overlayfs keeps its own metadata in `user.` extended attributes (`userxattr`): without it, removing
a directory of the shared tree fails there; renaming one fails with EXDEV, as across file systems
(`shutil.move` and `mv` copy then). In the initial user namespace `redirect_dir=on` lets such a
rename happen in place. Only called in a freshly forked child.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from pedl.harness import _namespaces

CLONE_NEWUSER = 0x10000000
CAP_SYS_ADMIN = 21


@dataclass(frozen=True)
class ModelView:
    """The run's model directory (`target`) over the shared tree (`lower`); `upper` and `work` are
    the overlay's directories in the run's trial directory."""

    lower: str
    target: str
    upper: str
    work: str

    @classmethod
    def from_dict(cls, data: dict) -> ModelView:
        return cls(str(data["lower"]), str(data["target"]), str(data["upper"]), str(data["work"]))


def _escape(path: str) -> str:
    """A path inside overlayfs's comma- and colon-separated options."""
    return path.replace("\\", "\\\\").replace(",", "\\,").replace(":", "\\:")


def overlay_options(lower: str, upper: str, work: str, user_namespace: bool, redirect: bool = True) -> str:
    options = f"lowerdir={_escape(lower)},upperdir={_escape(upper)},workdir={_escape(work)}"
    if user_namespace:
        return options + ",userxattr"
    return options + (",redirect_dir=on" if redirect else "")


def in_initial_user_namespace() -> bool:
    try:
        fields = Path("/proc/self/uid_map").read_text().split()
    except OSError:
        return True
    return fields[:3] == ["0", "0", "4294967295"]


def has_sys_admin() -> bool:
    """Whether this process may mount in a mount namespace of its own (CAP_SYS_ADMIN effective)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("CapEff:"):
                return bool(int(line.split()[1], 16) >> CAP_SYS_ADMIN & 1)
    except (OSError, ValueError):
        pass
    return False


def enter_mount_namespace() -> None:
    """A mount namespace of this process's own, nothing mounted there reaching its parent's. Without
    CAP_SYS_ADMIN, inside a new user namespace that maps this uid and gid to themselves."""
    if has_sys_admin():
        _namespaces.unshare(_namespaces.CLONE_NEWNS)
    else:
        uid, gid = os.geteuid(), os.getegid()
        _namespaces.unshare(CLONE_NEWUSER | _namespaces.CLONE_NEWNS)
        Path("/proc/self/setgroups").write_text("deny")
        Path("/proc/self/uid_map").write_text(f"{uid} {uid} 1")
        Path("/proc/self/gid_map").write_text(f"{gid} {gid} 1")
    _namespaces.mount(None, "/", None, _namespaces.MS_REC | _namespaces.MS_PRIVATE)


def mount_overlay(view: ModelView, lower: str | None = None) -> None:
    """The overlay at `view.target`, over `lower` (where the shared tree is reachable now; by
    default `view.lower`)."""
    Path(view.upper).mkdir(parents=True, exist_ok=True)
    Path(view.work).mkdir(parents=True, exist_ok=True)
    Path(view.target).mkdir(parents=True, exist_ok=True)
    user_namespace = not in_initial_user_namespace()
    flags = _namespaces.MS_NOSUID | _namespaces.MS_NODEV
    options = overlay_options(lower or view.lower, view.upper, view.work, user_namespace)
    try:
        _namespaces.mount("overlay", view.target, "overlay", flags, options)
    except OSError:
        if user_namespace:
            raise
        # A kernel built without redirect_dir: directories of the tree then rename with EXDEV.
        options = overlay_options(lower or view.lower, view.upper, view.work, False, redirect=False)
        _namespaces.mount("overlay", view.target, "overlay", flags, options)


def copy_tree(source: str, target: str) -> None:
    """The shared tree's files into an emptied `target` (the fallback: a copy, never an un-gzip)."""
    if os.path.lexists(target):
        shutil.rmtree(target)
    shutil.copytree(source, target, symlinks=True)


def show(view: ModelView, lower: str | None = None) -> str:
    """Mounts the view in the current mount namespace, or copies the tree; "" or why it copied."""
    try:
        mount_overlay(view, lower)
        return ""
    except OSError as e:
        copy_tree(lower or view.lower, view.target)
        return str(e)


def show_alone(view: ModelView) -> str:
    """`show` for a harness outside any sandbox: in a mount namespace of its own first."""
    try:
        enter_mount_namespace()
    except OSError as e:
        copy_tree(view.lower, view.target)
        return str(e)
    return show(view)


def probe(sandboxed: bool, near: str | None = None) -> str:
    """Whether a forked child can mount a view here (as it would: in the fork server's sandbox, or
    in a mount namespace of its own), with its upper directory in `near` (where the runs' will be:
    the file system decides too), else in the temporary directory: "" if so, else why not. Forks;
    call before any thread starts."""
    if near is not None and not (os.path.isdir(near) and os.access(near, os.W_OK)):
        near = None
    scratch = tempfile.mkdtemp(prefix=".pedl-overlay-probe-", dir=near)
    view = ModelView(*(os.path.join(scratch, d) for d in ("lower", "target", "upper", "work")))
    Path(view.lower).mkdir()
    Path(view.lower, "shipped").write_text("shipped\n")
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        code, why = 0, b""
        try:
            if sandboxed:
                _namespaces.unshare(_namespaces.CLONE_NEWNS)
                _namespaces.mount(None, "/", None, _namespaces.MS_REC | _namespaces.MS_PRIVATE)
            else:
                enter_mount_namespace()
            mount_overlay(view)
            Path(view.target, "shipped").write_text("rewritten\n")
            Path(view.target, "shipped").unlink()
        except BaseException as e:  # noqa: BLE001 - a child that must report, then exit
            code, why = 1, f"{type(e).__name__}: {e}".encode()
        os.write(write_end, why)
        os._exit(code)
    os.close(write_end)
    try:
        chunks = []
        while chunk := os.read(read_end, 4096):
            chunks.append(chunk)
        _, status = os.waitpid(pid, 0)
        untouched = Path(view.lower, "shipped").read_text() == "shipped\n"
    finally:
        os.close(read_end)
        _remove(scratch)
    if os.waitstatus_to_exitcode(status) != 0:
        return b"".join(chunks).decode(errors="replace") or f"the probe exited with status {status}"
    return "" if untouched else "a write through the overlay changed its lower directory"


def _remove(path: str) -> None:
    """Removes a probe's scratch directory, whose overlay work directory overlayfs left mode 000."""
    for parent, dirs, _ in os.walk(path):
        for name in dirs:
            try:
                os.chmod(os.path.join(parent, name), 0o700)
            except OSError:
                pass
    shutil.rmtree(path, ignore_errors=True)
