"""`pedl-scheduler init --home DIR`: the secrets and TLS files a deployment starts with."""

from __future__ import annotations

import ssl
import stat

import pytest

from pedl_scheduler import certificates
from pedl_scheduler.main import main


def _mode(path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_init_writes_the_secrets_mode_0600_and_says_what_to_copy(tmp_path, capsys) -> None:
    main(["init", "--home", str(tmp_path / "pedl")])
    out = capsys.readouterr().out
    secret, password = tmp_path / "pedl" / "cluster-secret", tmp_path / "pedl" / "admin-password"
    assert len(secret.read_text().strip()) >= 40 and len(password.read_text().strip()) >= 20
    assert _mode(secret) == 0o600 and _mode(password) == 0o600
    assert f"--cluster-secret-file {secret}" in out and f"--admin-password-file {password}" in out
    assert "pedl-agent --cluster-secret-file" in out and "pedl-checkpoint-store --cluster-secret-file" in out
    assert "--tls" not in out


def test_running_init_again_keeps_what_is_there(tmp_path, capsys) -> None:
    home = tmp_path / "pedl"
    main(["init", "--home", str(home), "--tls-host", "10.0.0.1"])
    before = {p.name: p.read_bytes() for p in home.iterdir()}
    main(["init", "--home", str(home), "--tls-host", "10.0.0.1"])
    assert "kept the files" in capsys.readouterr().out
    assert {p.name: p.read_bytes() for p in home.iterdir()} == before


def test_tls_files_verify_a_server_for_each_requested_name(tmp_path) -> None:
    home = tmp_path / "pedl"
    main(["init", "--home", str(home), "--tls-host", "10.0.0.1", "--tls-host", "scheduler"])
    assert certificates.names_in((home / "server.pem").read_bytes()) == {"10.0.0.1", "scheduler"}
    assert _mode(home / "server.key") == 0o600 and _mode(home / "ca.key") == 0o600
    assert _mode(home / "ca.pem") == 0o644
    # The CA verifies the server certificate (what agents and clients do with --tls-ca).
    context = ssl.create_default_context(cafile=str(home / "ca.pem"))
    context.load_cert_chain(home / "server.pem", home / "server.key")  # the key matches the certificate
    # A name the certificate lacks gets a new certificate (and CA) covering it.
    old_ca = (home / "ca.pem").read_bytes()
    main(["init", "--home", str(home), "--tls-host", "10.0.0.1", "--tls-host", "203.0.113.9"])
    assert certificates.names_in((home / "server.pem").read_bytes()) == {"10.0.0.1", "203.0.113.9"}
    assert (home / "ca.pem").read_bytes() != old_ca


def test_an_empty_tls_host_is_refused_with_one_line(tmp_path) -> None:
    with pytest.raises(SystemExit) as refused:
        main(["init", "--home", str(tmp_path), "--tls-host", " "])
    assert refused.value.code == "pedl-scheduler init: error: --tls-host must not be empty"


def test_init_needs_a_home(capsys) -> None:
    with pytest.raises(SystemExit):
        main(["init"])
    assert "--home" in capsys.readouterr().err
