"""`pedl-scheduler init --home DIR`: the secrets (and optionally TLS files) a cluster starts with.

Every shipped deployment runs it before the services: the cluster secret the scheduler, the store and
the agents share, the first admin's password, and with `--tls-host` a CA and the servers' certificate.
Files already there are kept, so running it again (each `docker compose up`, each boot) changes
nothing; a certificate that lacks a requested name is issued anew with a new CA.
"""

from __future__ import annotations

import argparse
import os
import secrets
import sys
from dataclasses import dataclass
from pathlib import Path

from pedl_scheduler import certificates

SECRET, PASSWORD = "cluster-secret", "admin-password"
CA_CERT, CA_KEY, CERT, KEY = "ca.pem", "ca.key", "server.pem", "server.key"


@dataclass(frozen=True)
class Home:
    """Where init put each file (TLS paths None without --tls-host)."""

    secret: Path
    password: Path
    ca: Path | None = None
    cert: Path | None = None
    key: Path | None = None


def _write(path: Path, data: bytes, mode: int) -> None:
    """Writes `path` atomically with `mode` from the start (never briefly world-readable)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    tmp.replace(path)


def _keep_or_make(path: Path, make: bytes) -> bool:
    """True when `path` was written now; a file already there (non-empty) is kept as it is."""
    if path.is_file() and path.read_text().strip():
        return False
    _write(path, make, 0o600)
    return True


def _tls(home: Path, hosts: list[str]) -> bool:
    cert = home / CERT
    if cert.is_file() and (home / KEY).is_file() and (home / CA_CERT).is_file():
        if set(hosts) <= certificates.names_in(cert.read_bytes()):
            return False
    issued = certificates.issue(hosts)
    _write(home / CA_KEY, issued.ca_key, 0o600)
    _write(home / KEY, issued.key, 0o600)
    _write(home / CA_CERT, issued.ca_cert, 0o644)
    _write(cert, issued.cert, 0o644)
    return True


def initialise(home: Path, tls_hosts: list[str]) -> tuple[Home, list[str]]:
    """Makes what is missing under `home`; returns the paths and the names of the files written."""
    home.mkdir(parents=True, exist_ok=True)
    written = [
        name
        for name, value in ((SECRET, secrets.token_urlsafe(32)), (PASSWORD, secrets.token_urlsafe(18)))
        if _keep_or_make(home / name, (value + "\n").encode())
    ]
    if not tls_hosts:
        return Home(home / SECRET, home / PASSWORD), written
    if _tls(home, tls_hosts):
        written += [CA_CERT, CERT, KEY]
    return Home(home / SECRET, home / PASSWORD, home / CA_CERT, home / CERT, home / KEY), written


def instructions(paths: Home) -> str:
    """What the operator copies where, and the flags each service takes."""
    tls_server = f" --tls-cert {paths.cert} --tls-key {paths.key} --tls-ca {paths.ca}" if paths.ca else ""
    tls_client = f" --tls-ca {paths.ca}" if paths.ca else ""
    lines = [
        f"cluster secret: {paths.secret}",
        f"admin password: {paths.password}  (log in: pedl user login admin)",
        *([f"TLS CA certificate: {paths.ca}  (public: copy to every agent and client)"] if paths.ca else []),
        "",
        "scheduler:",
        f"  pedl-scheduler --cluster-secret-file {paths.secret} --admin-password-file {paths.password}"
        f"{tls_server} ...",
        "checkpoint store (copy the cluster secret to its machine, mode 0600):",
        f"  pedl-checkpoint-store --cluster-secret-file {paths.secret}{tls_server} "
        "--master SCHEDULER:8080 ...",
        "each agent (copy the cluster secret to its machine, mode 0600):",
        f"  pedl-agent --cluster-secret-file {paths.secret}{tls_client} --master SCHEDULER:8080 ...",
        *([f"clients: export PEDL_TLS_CA={paths.ca}"] if paths.ca else []),
    ]
    return "\n".join(lines)


def main(argv: list[str]) -> None:
    p = argparse.ArgumentParser(
        prog="pedl-scheduler init",
        description="Write the cluster secret and the first admin's password (mode 0600) under --home, "
        "and with --tls-host a CA and a server certificate; files already there are kept.",
    )
    p.add_argument("--home", required=True, type=Path, help="directory for the files (made if missing)")
    p.add_argument(
        "--tls-host",
        action="append",
        default=[],
        metavar="NAME_OR_IP",
        help="serve TLS: a DNS name or IP address clients and agents dial the scheduler and the store "
        "at; repeatable (one certificate covers both services)",
    )
    args = p.parse_args(argv)
    try:
        paths, written = initialise(args.home, args.tls_host)
    except (OSError, ValueError) as e:
        sys.exit(f"pedl-scheduler init: error: {e}")
    print(f"wrote {', '.join(written)} in {args.home}" if written else f"kept the files in {args.home}")
    print(instructions(paths))
