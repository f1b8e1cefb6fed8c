"""A local cluster's credentials: its cluster secret and the bootstrap admin's generated password,
kept in `<home>/cluster/` readable by the owner only, and reused when the cluster comes up again."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from pedl.cluster.paths import ClusterPaths

ADMIN = "admin"


def secret_file(paths: ClusterPaths) -> Path:
    return paths.root / "cluster-secret"


def admin_password_file(paths: ClusterPaths) -> Path:
    return paths.root / "admin-password"


def _ensure(path: Path) -> None:
    if path.exists():
        path.chmod(0o600)
        return
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(secrets.token_urlsafe(32) + "\n")


def ensure(paths: ClusterPaths) -> None:
    paths.root.mkdir(parents=True, exist_ok=True)
    paths.root.chmod(0o700)  # also holds the database (password hashes) and the logs
    _ensure(secret_file(paths))
    _ensure(admin_password_file(paths))


def admin_password(paths: ClusterPaths) -> str:
    return admin_password_file(paths).read_text().strip()
