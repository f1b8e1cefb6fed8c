"""The CLI starts fast because it imports only what a command needs (issue #42): checked by the
modules a fresh `python -m pedl.cli ...` process holds after answering, never by timing."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest

HEAVY_FOR_ALL = ("google.protobuf.json_format", "yaml", "jsonschema", "numpy", "torch", "tensorflow")
HEAVY_FOR_HELP = (*HEAVY_FOR_ALL, "grpc", "google.protobuf", "pedl.v1")

# Runs the `pedl` command as `python -m pedl.cli` does, then prints the modules it loaded (not the
# stand-ins of pedl.cli.deferred_imports that were never used).
PROBE = """
import json, runpy, sys
sys.argv = ["pedl", *sys.argv[1:]]
try:
    runpy.run_module("pedl.cli", run_name="__main__", alter_sys=True)
except SystemExit as e:
    code = e.code
from pedl.cli.deferred_imports import loaded
modules = sorted(m for m in list(sys.modules) if loaded(m))
print(json.dumps({"code": code, "modules": modules}), file=sys.stderr)
"""


def _loaded(*argv: str, code: int = 0, env: dict[str, str] | None = None) -> tuple[str, set[str]]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, timeout=120, env=env
    )
    report = json.loads(done.stderr.strip().splitlines()[-1])
    assert report["code"] == code, done.stderr
    return done.stdout + done.stderr, set(report["modules"])


def _heavy(modules: set[str], heavy: tuple[str, ...]) -> list[str]:
    return sorted(m for m in modules if any(m == h or m.startswith(h + ".") for h in heavy))


def test_pedl_help_imports_no_grpc_protobuf_yaml_or_numpy() -> None:
    out, modules = _loaded("--help")
    assert out.startswith("usage: pedl"), out
    assert "experiment" in out and "checkpoint" in out
    assert _heavy(modules, HEAVY_FOR_HELP) == []


@pytest.mark.parametrize(
    "argv",
    [("experiment", "create", "--help"), ("experiment", "list", "--help"), ("trial", "--help")],
)
def test_commands_that_talk_to_the_scheduler_leave_out_json_format_yaml_and_the_schema(
    argv: tuple[str, ...],
) -> None:
    """gRPC is theirs to load; the config schema, YAML and metrics' JSON conversion only when used."""
    out, modules = _loaded(*argv)
    assert out.startswith("usage: pedl"), out
    assert _heavy(modules, HEAVY_FOR_ALL) == []
    assert "pedl.config.experiment" not in modules


def _closed_port() -> int:
    with socket.socket() as s:  # bound, never listening: connections are refused at once
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize("argv", [("experiment", "list"), ("trial", "logs", "1")])
def test_a_scheduler_command_runs_its_call_without_asyncio_or_grpc_aio(argv: tuple[str, ...]) -> None:
    """The whole command up to its call (here refused: nothing listens), with the stubs it needs;
    grpc.aio and asyncio stay unimported, as do YAML, the schema and metrics' JSON conversion."""
    env = dict(os.environ, PEDL_MASTER=f"127.0.0.1:{_closed_port()}")
    out, modules = _loaded(*argv, code=1, env=env)
    assert "cannot reach the pedl scheduler" in out, out
    assert "grpc" in modules and "pedl.v1.scheduler_pb2_grpc" in modules
    assert _heavy(modules, (*HEAVY_FOR_ALL, "asyncio", "grpc.aio", "ssl")) == []
    # Nor protobuf's pure-Python messages (and text_format with them), nor grpc's compatibility aliases.
    unused = ("google.protobuf.internal.python_message", "google.protobuf.text_format", "grpc_reflection")
    assert _heavy(modules, unused) == []
