"""A real fork server (`pedl.harness.zygote`): forked harnesses get their output pipes, their own
environment and working directory, report their exit code, and die with SIGTERM to their group,
with and without the bubblewrap sandbox."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import sys
from pathlib import Path

import pytest

from pedl_agent.credentials import harness_environment
from pedl_agent.fork_server import ForkServers, ForkUnavailable
from pedl_agent.sandbox import make_sandbox

pytestmark = pytest.mark.integration

MODES = ["none", *(["bwrap"] if shutil.which("bwrap") else [])]


async def _ready(servers: ForkServers) -> None:
    await servers.warm("default")
    await asyncio.wait_for(servers.ready("default"), 300)


def _servers(
    tmp_path: Path, isolation: str, tensorflow_after: float = 5.0
) -> tuple[ForkServers, dict[str, str], Path, Path]:
    work, sock = tmp_path / "work", tmp_path / "sock"
    (work / "trials").mkdir(parents=True)
    sock.mkdir()
    sandbox = make_sandbox(isolation, [work, sock], False, harness_programs=[sys.executable])
    env = harness_environment(os.environ, work / "trials", ())
    env["PYTHONUNBUFFERED"] = "1"
    servers = ForkServers(
        {"default": [sys.executable, "-m", "pedl.harness"]},
        env,
        sandbox,
        work / "trials",
        sock,
        tensorflow_after=tensorflow_after,
    )
    return servers, env, work / "trials", sock


async def _forks_a_harness(servers: ForkServers, env: dict[str, str], trials: Path, sock: Path) -> None:
    """One run forked: without PEDL_HARNESS_SOCKET its harness says so on stderr and exits 2."""
    trial = trials / "1-1"
    (trial / "model").mkdir(parents=True)
    (sock / "1-1.sock").touch()
    proc = await servers.fork("", {**env, "HOME": str(trial)}, trial / "model", trial, sock / "1-1.sock")
    assert proc is not None
    err = await proc.stderr.read()
    assert await proc.wait() == 2
    assert b"PEDL_HARNESS_SOCKET is not set" in err


@pytest.mark.parametrize("isolation", MODES)
def test_a_forked_harness_has_its_own_environment_output_and_exit_code(
    tmp_path: Path, isolation: str
) -> None:
    async def scenario() -> None:
        servers, env, trials, sock = _servers(tmp_path, isolation)
        try:
            await _ready(servers)
            await _forks_a_harness(servers, env, trials, sock)
        finally:
            await servers.close()

    asyncio.run(scenario())


def test_runs_starting_together_are_all_forked(tmp_path: Path) -> None:
    """Trials placed in one scheduling pass start at once: none of them spawns a new interpreter
    (importing torch again) because another one is talking to the ready server."""

    async def scenario() -> None:
        servers, env, trials, sock = _servers(tmp_path, "none")
        try:
            await _ready(servers)

            async def fork(name: str):  # type: ignore[no-untyped-def]
                trial = trials / name
                (trial / "model").mkdir(parents=True)
                return await servers.fork(
                    "", {**env, "HOME": str(trial)}, trial / "model", trial, sock / f"{name}.sock"
                )

            procs = await asyncio.gather(*(fork(f"{i}-1") for i in range(1, 5)))
            assert all(p is not None for p in procs)
            for proc in procs:
                assert proc is not None
                await proc.stderr.read()
                assert await proc.wait() == 2  # no PEDL_HARNESS_SOCKET: it says so and exits 2
        finally:
            await servers.close()

    asyncio.run(scenario())


def test_the_first_runs_on_a_new_agent_wait_for_its_fork_server_instead_of_spawning(tmp_path: Path) -> None:
    """On a cluster just started the fork server is still importing torch when the first trials
    come: they are forked once it is ready, not spawned to import torch all over again beside it."""

    async def scenario() -> None:
        servers, env, trials, sock = _servers(tmp_path, "none")
        try:
            await servers.warm("default")  # as the agent does when it starts
            await asyncio.sleep(0.05)  # the warm-up has begun importing; far from done
            trial = trials / "1-1"
            (trial / "model").mkdir(parents=True)
            proc = await asyncio.wait_for(
                servers.fork("", {**env, "HOME": str(trial)}, trial / "model", trial, sock / "1-1.sock"), 300
            )
            assert proc is not None, "the run was spawned instead of waiting for the fork server"
            await proc.stderr.read()
            assert await proc.wait() == 2  # no PEDL_HARNESS_SOCKET: it says so and exits 2
        finally:
            await servers.close()

    asyncio.run(scenario())


@pytest.mark.parametrize("isolation", MODES)
def test_sigterm_to_a_forked_harness_group_ends_it(tmp_path: Path, isolation: str) -> None:
    async def scenario() -> None:
        servers, env, trials, sock = _servers(tmp_path, isolation)
        try:
            await _ready(servers)
            trial = trials / "2-1"
            (trial / "model").mkdir(parents=True)
            (sock / "2-1.sock").touch()  # nobody serves it: the harness waits to connect
            run_env = {**env, "HOME": str(trial), "PEDL_HARNESS_SOCKET": str(sock / "2-1.sock")}
            proc = await servers.fork("", run_env, trial / "model", trial, sock / "2-1.sock")
            assert proc is not None
            await asyncio.sleep(1.0)
            assert proc.returncode is None
            os.killpg(proc.pid, signal.SIGTERM)
            code = await asyncio.wait_for(proc.wait(), 60)
            assert code == -signal.SIGTERM  # as a spawned harness: it died of the signal
        finally:
            await servers.close()

    asyncio.run(scenario())


def test_a_run_that_changes_startup_variables_is_not_forked(tmp_path: Path) -> None:
    async def scenario() -> None:
        servers, env, trials, sock = _servers(tmp_path, "none")
        try:
            await _ready(servers)
            trial = trials / "3-1"
            (trial / "model").mkdir(parents=True)
            run_env = {**env, "PYTHONPATH": "/somewhere/else"}
            assert await servers.fork("", run_env, trial / "model", trial, sock / "3-1.sock") is None
        finally:
            await servers.close()

    asyncio.run(scenario())


def test_an_environment_whose_server_cannot_start_spawns_from_then_on(tmp_path: Path) -> None:
    async def scenario() -> None:
        work, sock = tmp_path / "work", tmp_path / "sock"
        (work / "trials").mkdir(parents=True)
        sock.mkdir()
        python = tmp_path / "python"  # a "Python" whose pedl has no fork server: it exits at once
        python.write_text("#!/bin/sh\nexit 1\n")
        python.chmod(0o755)
        servers = ForkServers(
            {"default": [str(python), "-m", "pedl.harness"]}, {}, None, work / "trials", sock
        )
        try:
            warmed = await servers.warm("default")
            await asyncio.wait_for(warmed, 30)  # done: the agent's trials start as warm as they will
            with pytest.raises(ForkUnavailable, match="exited before it was ready"):
                await servers.ready("default")
            trial = work / "trials" / "1-1"
            assert await servers.fork("", {}, trial, trial, sock / "1-1.sock") is None
            assert not servers._servers["default"].running  # not started again
        finally:
            await servers.close()

    asyncio.run(scenario())


def test_forked_runs_get_overlays_where_the_server_can_mount_them(tmp_path: Path) -> None:
    from pedl.harness._model_view import probe

    if probe(sandboxed=False):
        pytest.skip("no overlay can be mounted here")

    async def scenario() -> None:
        servers, _, _, _ = _servers(tmp_path, "none")
        try:
            await _ready(servers)
            assert servers.overlays("default")
        finally:
            await servers.close()

    asyncio.run(scenario())


OLD_ZYGOTE = """#!{python}
import json, socket, sys, time
control = socket.socket(fileno=int(sys.argv[3]))
control.sendall(json.dumps({{"ready": {{"preloaded": []}}}}).encode())  # a pedl without model views
time.sleep(600)
"""


def test_a_server_that_mounts_no_overlays_gets_copies_said_once_in_the_agent_log(tmp_path: Path) -> None:
    import structlog

    async def scenario() -> list[dict]:
        work, sock = tmp_path / "work", tmp_path / "sock"
        (work / "trials").mkdir(parents=True)
        sock.mkdir()
        python = tmp_path / "python"  # an environment whose pedl predates model views
        python.write_text(OLD_ZYGOTE.format(python=sys.executable))
        python.chmod(0o755)
        environments = {"default": [str(python), "-m", "pedl.harness"]}
        servers = ForkServers(environments, {}, None, work / "trials", sock)
        try:
            await _ready(servers)
            with structlog.testing.capture_logs() as logs:
                assert not servers.overlays("default") and not servers.overlays("")
            return logs
        finally:
            await servers.close()

    logs = asyncio.run(scenario())
    assert [entry["event"] for entry in logs] == ["copying each forked run's model definition"]
    assert "cannot mount them as overlays" in logs[0]["reason"]


def test_a_ready_server_imports_tensorflow_while_no_run_asks_and_still_forks(tmp_path: Path) -> None:
    """Ready with torch alone; TensorFlow comes once no fork was asked for (at once here), counted
    thread for thread across its import, and the runs after it are forked as before."""
    import structlog

    async def scenario() -> list[dict]:
        servers, env, trials, sock = _servers(tmp_path, "none", tensorflow_after=0.0)
        try:
            with structlog.testing.capture_logs() as logs:
                await _ready(servers)
                for _ in range(600):
                    if any(entry["event"] == "fork server imported tensorflow" for entry in logs):
                        break
                    await asyncio.sleep(0.5)
                await _forks_a_harness(servers, env, trials, sock)
            return logs
        finally:
            await servers.close()

    logs = asyncio.run(scenario())
    (ready,) = [entry for entry in logs if entry["event"] == "fork server ready"]
    assert "torch" in ready["preloaded"] and "tensorflow" not in ready["preloaded"]
    (later,) = [entry for entry in logs if entry["event"] == "fork server imported tensorflow"]
    assert {"tensorflow", "keras", "pedl.keras"} <= set(later["preloaded"])
    assert later["threads"] == later["threads_before"]
    assert not [entry for entry in logs if "new processes" in entry["event"]]
