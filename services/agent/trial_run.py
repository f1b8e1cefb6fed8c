"""One trial run on this machine: model definition, HarnessService socket, harness process, exit report."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import grpc.aio
import structlog

import pedl._grpc
from pedl.v1 import agent_pb2, common_pb2, harness_pb2, harness_pb2_grpc

from .devices import Gpu, cuda_visible_devices
from .harness_service import HarnessServicer
from .log_relay import LogRelay
from .model_definitions import ModelDefinitionCache, check_name, unpack_fresh

T = TypeVar("T")
Send = Callable[[agent_pb2.ConnectRequest], None]

# How long to wait for the harness's output pipes to close after it exited (a detached grandchild
# could hold them open; the group is SIGKILLed first, so this is only a safety net).
PIPE_DRAIN_SECONDS = 5.0
DEFAULT_MODEL_DEFINITION_NAME = "model_def"


@dataclass
class RunSettings:
    """What every trial run on this agent shares."""

    harness_argv: list[str]
    work_dir: Path
    socket_dir: Path
    model_definitions: ModelDefinitionCache
    send: Send
    kill_grace_seconds: float = 10.0
    gpus: list[Gpu] = field(default_factory=list)


class _Killed(Exception):
    pass


@dataclass
class _Outcome:
    exit_code: int
    error: str = ""


class TrialRun:
    """Runs one (trial, run) to its end and reports `trial_exited` exactly once."""

    def __init__(self, start: agent_pb2.StartTrial, settings: RunSettings) -> None:
        self.start = start
        self.trial_id = start.trial_id
        self.run_id = start.run_id
        self._s = settings
        self.trial_dir = settings.work_dir / "trials" / f"{self.trial_id}-{self.run_id}"
        self.socket_path = settings.socket_dir / f"{self.trial_id}-{self.run_id}.sock"
        self.servicer = HarnessServicer(start, on_result=self._on_result)
        self._log = structlog.get_logger(trial_id=self.trial_id, run_id=self.run_id)
        self._kill_requested = asyncio.Event()
        self._killed_by_scheduler = False
        self._kill_reason = ""
        self._proc: asyncio.subprocess.Process | None = None
        self._escalation: asyncio.Task[None] | None = None
        self.exited = False

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def add_workload(self, workload: common_pb2.Workload) -> bool:
        return self.servicer.add_workload(workload)

    @property
    def busy(self) -> bool:
        return self.servicer.busy

    def _on_result(self, result: common_pb2.WorkloadResult) -> None:
        self._s.send(agent_pb2.ConnectRequest(workload_completed=agent_pb2.WorkloadCompleted(result=result)))

    # --- killing -------------------------------------------------------------------------------

    def kill(self, by_scheduler: bool = True, reason: str = "") -> None:
        """SIGTERM to the harness's process group now, SIGKILL after the grace period."""
        if self.exited or self._kill_requested.is_set():
            return
        self._killed_by_scheduler = by_scheduler
        self._kill_reason = reason
        self._kill_requested.set()
        if self._proc is not None and self._proc.returncode is None:
            self._terminate()

    def _terminate(self) -> None:
        self._log.info("terminating harness", pid=self.pid, grace_seconds=self._s.kill_grace_seconds)
        self._signal_group(signal.SIGTERM)
        self._escalation = asyncio.get_running_loop().create_task(self._kill_after_grace())

    async def _kill_after_grace(self) -> None:
        await asyncio.sleep(self._s.kill_grace_seconds)
        # The whole group, even when the leader is gone: its children may ignore SIGTERM.
        self._log.warning("harness group still running after SIGTERM; sending SIGKILL", pid=self.pid)
        self._signal_group(signal.SIGKILL)

    def _signal_group(self, sig: signal.Signals) -> None:
        # start_new_session=True made the harness the leader of a group with its own pid.
        if self._proc is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self._proc.pid, sig)

    async def _unless_killed(self, step: Awaitable[T]) -> T:
        task = asyncio.ensure_future(step)
        killed = asyncio.ensure_future(self._kill_requested.wait())
        try:
            await asyncio.wait({task, killed}, return_when=asyncio.FIRST_COMPLETED)
            if task.done():
                return task.result()
            raise _Killed()
        finally:
            for t in (task, killed):
                t.cancel()

    # --- the run -------------------------------------------------------------------------------

    async def run(self) -> None:
        try:
            outcome = await self._run_to_exit()
        except Exception as e:  # the agent's own failure (disk full, ...): still tell the scheduler
            self._log.exception("trial run failed in the agent")
            outcome = _Outcome(1, f"the agent failed to run the trial: {type(e).__name__}: {e}")
            if self._proc is not None and self._proc.returncode is None:
                self._signal_group(signal.SIGKILL)
        self.exited = True
        killed = self._kill_requested.is_set() and self._killed_by_scheduler
        self._log.info("trial exited", exit_code=outcome.exit_code, killed=killed)
        self._s.send(
            agent_pb2.ConnectRequest(
                trial_exited=agent_pb2.TrialExited(
                    trial_id=self.trial_id,
                    run_id=self.run_id,
                    exit_code=outcome.exit_code,
                    error=outcome.error,
                    killed=killed,
                )
            )
        )

    async def _run_to_exit(self) -> _Outcome:
        self.trial_dir.mkdir(parents=True, exist_ok=True)
        relay = LogRelay(self.trial_id, self.run_id, self._s.send, self.trial_dir / "trial.log")
        server: grpc.aio.Server | None = None
        try:
            try:
                model_dir = await self._unless_killed(self._prepare())
                server = await self._serve()
                if self._kill_requested.is_set():
                    raise _Killed()
                self._proc = await self._spawn(model_dir)
            except _Killed:
                outcome = _Outcome(1, self._kill_reason or "killed before the harness started")
            except Exception as e:
                self._log.warning("trial failed before the harness started", error=str(e))
                relay.add("pedl", str(e))
                outcome = _Outcome(1, str(e))
            else:
                outcome = await self._supervise(relay)
        finally:
            if self._escalation is not None:
                self._escalation.cancel()
            relay.close()
            if server is not None:
                await server.stop(0.5)
            with contextlib.suppress(FileNotFoundError):
                self.socket_path.unlink()
        return outcome

    async def _prepare(self) -> Path:
        if self.start.environment not in ("", "default"):
            raise ValueError(
                f"StartTrial.environment {self.start.environment!r} is not one this agent offers ('default')"
            )
        name = check_name(self.start.model_definition_name or DEFAULT_MODEL_DEFINITION_NAME)
        data = await self._s.model_definitions.get(self.start.experiment_id)
        dest = self.trial_dir / name
        try:
            await asyncio.to_thread(unpack_fresh, data, dest)
        except ValueError as e:
            raise ValueError(f"experiment {self.start.experiment_id}: {e}") from e
        self.servicer.model_definition_dir = str(dest)
        return dest

    async def _serve(self) -> grpc.aio.Server:
        self.socket_path.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            self.socket_path.unlink()
        server, _ = pedl._grpc.aio_server(
            [lambda s: harness_pb2_grpc.add_HarnessServiceServicer_to_server(self.servicer, s)],
            [pedl._grpc.service_name(harness_pb2, "HarnessService")],
            f"unix:{self.socket_path}",
        )
        await server.start()
        await pedl._grpc.mark_serving(server)
        return server

    def _environment(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            PEDL_HARNESS_SOCKET=str(self.socket_path),
            PEDL_TRIAL_ID=str(self.trial_id),
            PEDL_RUN_ID=str(self.run_id),
            PYTHONUNBUFFERED="1",
        )
        visible = cuda_visible_devices(list(self.start.slot_ids), self._s.gpus)
        if visible is not None:
            env["CUDA_VISIBLE_DEVICES"] = visible
        return env

    async def _spawn(self, model_dir: Path) -> asyncio.subprocess.Process:
        argv = self._s.harness_argv
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv,
                cwd=model_dir,
                env=self._environment(),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,
            )
        except OSError as e:
            raise RuntimeError(f"cannot start the harness {' '.join(argv)!r}: {e}") from e
        self._log.info("harness started", pid=proc.pid, cwd=str(model_dir))
        return proc

    async def _supervise(self, relay: LogRelay) -> _Outcome:
        proc = self._proc
        assert proc is not None and proc.stdout is not None and proc.stderr is not None
        if self._kill_requested.is_set():  # the kill came while the process was being started
            self._terminate()
        pumps = [
            asyncio.ensure_future(relay.pump(proc.stdout, "stdout")),
            asyncio.ensure_future(relay.pump(proc.stderr, "stderr")),
        ]
        code = await _leader_exit(proc)
        self._signal_group(signal.SIGKILL)  # whatever the harness left behind dies with it
        _, late = await asyncio.wait(pumps, timeout=PIPE_DRAIN_SECONDS)
        for p in late:
            p.cancel()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(proc.wait(), PIPE_DRAIN_SECONDS)
        if self._kill_requested.is_set():
            return _Outcome(code, self._kill_reason)
        if code == 0:
            return _Outcome(0)
        tail = "\n".join(relay.stderr_tail)
        return _Outcome(code, tail or f"the harness exited with code {code} and wrote nothing to stderr")


async def _leader_exit(proc: asyncio.subprocess.Process) -> int:
    """The harness's exit code as soon as it is reaped.

    `Process.wait()` also waits for its pipes to close, which a surviving child of the harness
    can delay forever; the group is only killed after the leader's exit is known.
    """
    while proc.returncode is None:
        await asyncio.sleep(0.1)
    return proc.returncode
