"""Test certificates made with the openssl CLI: a CA, and a server certificate for 127.0.0.1/localhost."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from support.processes import TlsFiles

_EC = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]


def _openssl(*args: str, cwd: Path) -> None:
    openssl = shutil.which("openssl")
    if openssl is None:
        raise RuntimeError("these tests need the openssl command")
    subprocess.run([openssl, *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def make_ca(directory: Path, name: str = "ca") -> tuple[Path, Path]:
    """(certificate, key) of a new self-signed CA."""
    directory.mkdir(parents=True, exist_ok=True)
    _openssl(
        "req", "-x509", *_EC, "-keyout", f"{name}.key", "-out", f"{name}.pem", "-days", "2",
        "-subj", f"/CN=pedl test {name}", "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign",
        cwd=directory,
    )  # fmt: skip
    return directory / f"{name}.pem", directory / f"{name}.key"


def make_tls(directory: Path, ips: list[str] | None = None) -> TlsFiles:
    """A CA and a server certificate it signed, valid for 127.0.0.1, localhost and `ips`."""
    ca, ca_key = make_ca(directory)
    names = ",".join(["IP:127.0.0.1", "DNS:localhost", *(f"IP:{ip}" for ip in ips or [])])
    (directory / "server.ext").write_text(
        f"subjectAltName={names}\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n"
    )
    csr = ["-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=localhost"]
    _openssl("req", *_EC, *csr, cwd=directory)
    _openssl(
        "x509", "-req", "-in", "server.csr", "-CA", str(ca), "-CAkey", str(ca_key), "-CAcreateserial",
        "-out", "server.pem", "-days", "2", "-extfile", "server.ext",
        cwd=directory,
    )  # fmt: skip
    return TlsFiles(ca=ca, cert=directory / "server.pem", key=directory / "server.key")
