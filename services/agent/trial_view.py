"""What a sandboxed trial's file system holds: an allow-list, not the host minus a deny-list.

A trial sees the system directories programs run from (/usr, /bin, /sbin, /lib*), from /etc only
what programs read (certificates, name resolution, the dynamic linker's cache, the time zone) and a
generated passwd/group naming its own user, the Python environment its harness runs in (its prefix,
the base interpreter's library and whatever its sys.path and editable installs name, wherever they
live: /root/.pyenv or a checkout under /tmp alike) and, bound by `Sandbox.wrap`, its own directories.
Where a Python environment lives inside a checkout, only the prefix is visible, not the checkout.
"""

from __future__ import annotations

import grp
import json
import os
import pwd
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from pedl.v1 import agent_pb2

# Bound read-only where they exist (a symlink, as on merged-/usr systems, is recreated as one).
SYSTEM_PATHS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/opt/conda")
# What programs read from /etc: TLS certificates, name resolution, the dynamic linker, the time zone,
# alternatives (/usr/bin links point into it). Never shadow, sudoers, ssh keys or the host's passwd.
ETC_NAMES = (
    "ssl",
    "ca-certificates",
    "ca-certificates.conf",
    "pki",
    "crypto-policies",
    "hosts",
    "host.conf",
    "resolv.conf",
    "nsswitch.conf",
    "gai.conf",
    "protocols",
    "services",
    "networks",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "localtime",
    "timezone",
    "alternatives",
    "mime.types",
    "os-release",
    "fonts",
    "nvidia",
)
# The trial's user when a root agent is given no other (--trial-user): nobody, as NFS squashes root.
DEFAULT_TRIAL_UID = 65534
DEFAULT_TRIAL_GID = 65534
# In each run's trial directory: the passwd and group files its view has at /etc.
ETC_DIR = ".pedl-etc"
NOBODY = "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin"

# Run in the harness's interpreter: every path its imports can come from.
_PROBE = """
import json, os, sys
paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
paths.update(p for p in sys.path if p and os.path.isabs(p))
for name, module in list(sys.modules.items()):
    if name.startswith("__editable__"):
        paths.update(v for v in (getattr(module, "MAPPING", None) or {}).values() if isinstance(v, str))
        for vs in (getattr(module, "NAMESPACES", None) or {}).values():
            paths.update(v for v in vs if isinstance(v, str))
print(json.dumps(sorted(paths)))
"""


@dataclass(frozen=True)
class Mount:
    """One of an experiment's bind_mounts. A relative container path is relative to the model directory
    (inside it, or `../NAME` beside it in the trial directory)."""

    host: Path
    container: Path
    read_only: bool = False


@dataclass(frozen=True)
class TrialUser:
    """The Unix user a trial runs as (a root agent's --trial-user, or the pedl user's linked one)."""

    uid: int
    gid: int
    name: str = "pedl-trial"
    group: str = "pedl-trial"

    @classmethod
    def parse(cls, text: str) -> TrialUser:
        """`UID[:GID]` or `NAME[:GROUP]` (looked up here); a ValueError naming what is wrong."""
        user, _, group = text.partition(":")
        uid, name = _lookup_user(user)
        if group:
            gid, group_name = _lookup_group(group)
        else:
            gid, group_name = _primary_group(uid, name)
        if uid == 0 or gid == 0:
            raise ValueError(f"--trial-user {text}: trials never run as root (uid or gid 0)")
        return cls(uid, gid, name, group_name)

    @classmethod
    def default(cls) -> TrialUser:
        return cls(DEFAULT_TRIAL_UID, DEFAULT_TRIAL_GID, "nobody", "nogroup")

    @classmethod
    def current(cls) -> TrialUser:
        uid, gid = os.getuid(), os.getgid()
        return cls(uid, gid, _user_name(uid, "pedl-trial"), _group_name(gid, "pedl-trial"))


def linked_user(start: agent_pb2.StartTrial) -> TrialUser | None:
    """The Unix user the experiment's owner is linked to (`pedl user link-with-agent-user`), where
    this agent can run a trial as another user (it is root); else None (its --trial-user, or itself)."""
    if not start.HasField("agent_user") or os.geteuid() != 0:
        return None
    a = start.agent_user
    if a.uid <= 0 or a.gid <= 0:
        return None
    return TrialUser(a.uid, a.gid, a.user or f"pedl-{a.uid}", a.group or f"pedl-{a.gid}")


def _user_name(uid: int, fallback: str) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return fallback


def _group_name(gid: int, fallback: str) -> str:
    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return fallback


def _lookup_user(text: str) -> tuple[int, str]:
    if text.isdigit():
        return int(text), _user_name(int(text), f"pedl-{text}")
    try:
        return pwd.getpwnam(text).pw_uid, text
    except KeyError:
        raise ValueError(f"--trial-user {text}: no such user on this machine (give a uid)") from None


def _lookup_group(text: str) -> tuple[int, str]:
    if text.isdigit():
        return int(text), _group_name(int(text), f"pedl-{text}")
    try:
        return grp.getgrnam(text).gr_gid, text
    except KeyError:
        raise ValueError(f"--trial-user ...:{text}: no such group on this machine (give a gid)") from None


def _primary_group(uid: int, name: str) -> tuple[int, str]:
    try:
        gid = pwd.getpwuid(uid).pw_gid
    except KeyError:
        gid = uid
    return gid, _group_name(gid, name)


def write_identity(trial_dir: Path, user: TrialUser) -> tuple[Path, Path]:
    """The run's /etc/passwd and /etc/group: root, nobody and its own user (whose home is `trial_dir`:
    tools that look a user's home up find the run's own directory)."""
    etc = trial_dir / ETC_DIR
    etc.mkdir(parents=True, exist_ok=True)
    users = {0: "root:x:0:0:root:/root:/usr/sbin/nologin", 65534: NOBODY}
    users[user.uid] = f"{user.name}:x:{user.uid}:{user.gid}:pedl trial:{trial_dir}:/bin/sh"
    groups = {0: "root:x:0:", 65534: "nogroup:x:65534:"}
    groups[user.gid] = f"{user.group}:x:{user.gid}:"
    passwd, group = etc / "passwd", etc / "group"
    passwd.write_text("".join(line + "\n" for line in users.values()))
    group.write_text("".join(line + "\n" for line in groups.values()))
    return passwd, group


def python_paths(program: str, env: dict[str, str] | None = None) -> list[Path]:
    """What the interpreter `program` imports from (asked once, at the agent's start): its prefix,
    its base interpreter's prefix, its sys.path and editable installs. Where it cannot be asked, its
    prefix (the directory above its bin/) and the interpreter it links to."""
    try:
        done = subprocess.run(
            [program, "-c", _PROBE], capture_output=True, text=True, timeout=60, env=env, check=True
        )
        found = [Path(p) for p in json.loads(done.stdout)]
    except (OSError, subprocess.SubprocessError, ValueError):
        exe = Path(program)
        found = [exe.absolute().parent.parent, Path(os.path.realpath(exe)).parent.parent]
    return minimal([p for p in found if p.exists() and p != Path("/")])


def minimal(paths: Iterable[Path]) -> list[Path]:
    """`paths` without those inside another of them or inside a system directory bound anyway."""
    out: list[Path] = []
    for path in sorted({Path(os.path.normpath(p)) for p in paths}, key=lambda p: len(p.parts)):
        if any(path.is_relative_to(p) for p in out) or any(path.is_relative_to(s) for s in SYSTEM_PATHS):
            continue
        out.append(path)
    return out


def system_args() -> list[str]:
    """The bwrap arguments for the system part of the view (root is bubblewrap's empty tmpfs)."""
    out: list[str] = []
    for name in SYSTEM_PATHS:
        path = Path(name)
        if path.is_symlink():
            out += ["--symlink", os.readlink(path), name]
        elif path.is_dir():
            out += ["--ro-bind", name, name]
    out += ["--dir", "/etc"]
    for name in ETC_NAMES:
        path = Path("/etc", name)
        if path.exists():
            out += ["--ro-bind", str(path), str(path)]
    return out


def covering(container: Path, needed: Sequence[Path]) -> Path | None:
    """The first of `needed` a mount at `container` would cover (hide or replace), else None."""
    return next((n for n in needed if n.is_relative_to(container) or n == container), None)
