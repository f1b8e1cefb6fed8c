"""`det master config`: the scheduler's settings as it started with them, secrets never shown."""

from __future__ import annotations

from pedl_scheduler.main import parse_args
from pedl_scheduler.master_config import settings


def test_settings_name_flags_as_the_command_line_writes_them_and_keep_types() -> None:
    args = parse_args(["--port", "9123", "--db", "postgresql://pedl:hunter2-secret@db:5432/pedl"])
    shown = settings(args)
    assert shown["port"] == 9123 and isinstance(shown["port"], int)
    assert "hunter2-secret" not in str(shown) and "db:5432" in shown["db"]


def test_secret_files_are_shown_as_set_or_not_never_read() -> None:
    args = parse_args(["--cluster-secret-file", "/etc/pedl/secret", "--tls-key", "/etc/pedl/key.pem"])
    shown = settings(args)
    assert shown["cluster-secret-file"] == "(set)" and shown["tls-key"] == "(set)"
    assert "/etc/pedl/secret" not in str(shown)
