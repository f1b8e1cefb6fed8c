"""Linux namespaces, mounts and capabilities through libc: how a forked harness gets its own sandbox.

The agent's fork server runs inside a bubblewrap sandbox that sees every run's directory; each
harness it forks first narrows that view to what bubblewrap would have given it alone (its trial
directory, its socket, its /tmp and /dev/shm, its own PID namespace and /proc), then drops every
capability (a root agent's run becoming its unprivileged user) before any user code runs. Only
called in a freshly forked, single-threaded child.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

CLONE_NEWNS = 0x00020000
CLONE_NEWPID = 0x20000000
MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
MNT_DETACH = 2
PR_SET_PDEATHSIG = 1
PR_GET_PDEATHSIG = 2
PR_CAPBSET_DROP = 24
PR_SET_NO_NEW_PRIVS = 38
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
_LINUX_CAPABILITY_VERSION_3 = 0x20080522
CAP_LAST = 63

_libc = ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")


def prctl(option: int, arg: int = 0) -> int:
    return int(
        _libc.prctl(option, ctypes.c_ulong(arg), ctypes.c_ulong(0), ctypes.c_ulong(0), ctypes.c_ulong(0))
    )


def die_with_parent(sig: int) -> None:
    _check(prctl(PR_SET_PDEATHSIG, sig), "prctl(PR_SET_PDEATHSIG)")


def parent_death_signal() -> int:
    """The signal this process gets when its parent dies (0: none)."""
    sig = ctypes.c_int(0)
    _check(_libc.prctl(PR_GET_PDEATHSIG, ctypes.byref(sig), 0, 0, 0), "prctl(PR_GET_PDEATHSIG)")
    return sig.value


def unshare(flags: int) -> None:
    _check(_libc.unshare(ctypes.c_int(flags)), f"unshare({flags:#x})")


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    _check(
        _libc.mount(
            None if source is None else source.encode(),
            target.encode(),
            None if fstype is None else fstype.encode(),
            ctypes.c_ulong(flags),
            None if data is None else data.encode(),
        ),
        f"mount {source} on {target}",
    )


def bind(source: str, target: str) -> None:
    mount(source, target, None, MS_BIND | MS_REC)


def umount(target: str) -> None:
    _check(_libc.umount2(target.encode(), ctypes.c_int(MNT_DETACH)), f"umount {target}")


def remount_read_only(target: str) -> None:
    mount(None, target, None, MS_REMOUNT | MS_BIND | MS_RDONLY)


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    ]


def drop_all_capabilities(uid: int = -1, gid: int = -1) -> None:
    """No capability left (bounding, ambient, effective, permitted, inheritable) and no way to gain
    one back (no_new_privs), as bubblewrap leaves its sandboxed command; with a `uid` (a root agent's
    run) as that user and `gid`, with no supplementary group, first."""
    _check(prctl(PR_SET_NO_NEW_PRIVS, 1), "prctl(PR_SET_NO_NEW_PRIVS)")
    for cap in range(CAP_LAST + 1):
        if prctl(PR_CAPBSET_DROP, cap) != 0 and ctypes.get_errno() != 22:  # EINVAL: no such capability
            _check(-1, f"prctl(PR_CAPBSET_DROP, {cap})")
    prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)
    if uid >= 0:  # the bounding set is dropped (which takes CAP_SETPCAP) before the user changes
        armed, parent = parent_death_signal(), os.getppid()
        os.setgroups([])
        os.setresgid(gid, gid, gid)
        os.setresuid(uid, uid, uid)
        if armed:  # a change of user clears the parent-death signal (prctl(2)): it is set again,
            die_with_parent(armed)  # else a killed agent would leave this run behind
            if os.getppid() != parent:  # the parent died in between: as the signal would have had it
                os.kill(os.getpid(), armed)
    header = _CapHeader(_LINUX_CAPABILITY_VERSION_3, 0)
    data = (_CapData * 2)()
    _check(_libc.capset(ctypes.byref(header), data), "capset")


@dataclass(frozen=True)
class ChildSandbox:
    """What one forked harness may see, inside the fork server's sandbox (see Sandbox.child_plan)."""

    trial_dir: str
    socket_path: str
    # Directories the fork server sees every run's files in: covered, then only this run's bound back.
    covered: tuple[str, ...]
    # This run's /dev/shm, as the fork server sees the machine's /dev/shm ("" for none).
    shm: str = ""
    # Where the fork server's sandbox has the machine's /dev/shm, and a directory to stage binds in.
    host_shm: str = ""
    stage: str = ""
    # Operator-shared directories (--bind) under /tmp or /var/tmp: bound again over the run's own /tmp.
    shared: tuple[str, ...] = ()
    # Files the harness must read that lie under /tmp or /var/tmp (the TLS CA bundle): copied into
    # the run's own /tmp at the same path (`Sandbox.wrap` binds them there read-only; a copy leaves
    # the agent's file out of the trial's reach all the same).
    readable: tuple[str, ...] = ()
    # The run's directory of generated passwd and group files, bound at /etc ("" for none).
    etc: str = ""
    # The run's user and group where the agent is root (-1: the fork server's own).
    uid: int = -1
    gid: int = -1

    @classmethod
    def from_dict(cls, data: dict) -> ChildSandbox:
        return cls(
            trial_dir=str(data["trial_dir"]),
            socket_path=str(data["socket_path"]),
            covered=tuple(str(c) for c in data["covered"]),
            shm=str(data.get("shm", "")),
            host_shm=str(data.get("host_shm", "")),
            stage=str(data["stage"]),
            shared=tuple(str(p) for p in data.get("shared", ())),
            readable=tuple(str(p) for p in data.get("readable", ())),
            etc=str(data.get("etc", "")),
            uid=int(data.get("uid", -1)),
            gid=int(data.get("gid", -1)),
        )


def narrow_mounts(
    box: ChildSandbox, view_lower: str | None = None, show_view: Callable[[str], str] | None = None
) -> str:
    """In a new mount namespace: only this run's trial directory, socket, /tmp and /dev/shm remain,
    with its model directory a copy-on-write view of its experiment's shared tree `view_lower`
    (whose directory is covered with the others: no trial sees another experiment's code), made by
    `show_view(staged tree)` (`_model_view.show`). Returns "" or why the view is a copy rather than
    an overlay.

    In bubblewrap's order (/tmp first, then the covers, then the run's own paths), so a trial or
    socket directory under /tmp ends up where `Sandbox.wrap` would have put it."""
    readable = {path: Path(path).read_bytes() for path in box.readable}  # before /tmp is the run's
    unshare(CLONE_NEWNS)
    mount(None, "/", None, MS_REC | MS_PRIVATE)  # nothing done here reaches the fork server
    # Stage this run's paths on a private tmpfs before the directories holding them are covered.
    mount("tmpfs", box.stage, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0700")
    stage = Path(box.stage)
    (stage / "trial").mkdir()
    (stage / "socket").touch()
    bind(box.trial_dir, str(stage / "trial"))
    bind(box.socket_path, str(stage / "socket"))
    if box.shm:
        (stage / "shm").mkdir()
        bind(box.shm, str(stage / "shm"))
    for index, path in enumerate(box.shared):
        (stage / f"shared{index}").mkdir()
        bind(path, str(stage / f"shared{index}"))
    if view_lower is not None:
        (stage / "model").mkdir()
        bind(view_lower, str(stage / "model"))
    bind(str(stage / "trial" / ".tmp"), "/tmp")
    bind(str(stage / "trial" / ".tmp"), "/var/tmp")
    for index, path in enumerate(box.shared):
        Path(path).mkdir(parents=True, exist_ok=True)
        bind(str(stage / f"shared{index}"), path)
    for path in box.covered:
        Path(path).mkdir(parents=True, exist_ok=True)
        mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755")
    Path(box.trial_dir).mkdir(parents=True, exist_ok=True)
    Path(box.socket_path).parent.mkdir(parents=True, exist_ok=True)
    Path(box.socket_path).touch()
    bind(str(stage / "trial"), box.trial_dir)
    bind(str(stage / "socket"), box.socket_path)
    # The overlay holds its own reference to the staged tree: it outlives the stage's unmounting.
    copied = "" if view_lower is None or show_view is None else show_view(str(stage / "model"))
    if box.shm:
        bind(str(stage / "shm"), "/dev/shm")
    for name in ("passwd", "group") if box.etc else ():
        bind(f"{box.etc}/{name}", f"/etc/{name}")
    for path, data in readable.items():
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_bytes(data)
    for path in reversed(box.covered):
        remount_read_only(path)
    remount_read_only("/")  # the fork server's skeleton (its own tmpfs), as `Sandbox.wrap` leaves it
    if box.host_shm:
        umount(box.host_shm)
    umount(box.stage)
    return copied


def mount_own_proc() -> None:
    """/proc of this PID namespace (called as its first process): no other process shows there."""
    mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
