"""One trial run on this machine: model definition, HarnessService socket, harness process(es), exit report.

A trial on N slots runs N harness processes here, launched as torchrun does (RANK, LOCAL_RANK,
WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT; one GPU each), all in one process group:
they are killed together, their output is relayed with a "[rank r] " prefix, and the run ends
when all have exited; the first rank to fail kills the others and its stderr is the error.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections import deque
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import grpc.aio
import structlog

from pedl._exit_codes import AGENT_STOPPED_EXIT_CODE
from pedl._parent_death import Lifeline
from pedl.config import ConfigError, ExperimentConfig, carried
from pedl.v1 import agent_pb2, common_pb2

from . import process_exits
from .bind_mounts import BindMountRefused, run_mounts
from .devices import cuda_visible_devices
from .fork_server import ForkedProcess
from .harness_service import HarnessServicer, serve_on_socket
from .log_relay import STDERR_TAIL_LINES, LogRelay, iter_lines
from .model_definitions import check_name
from .pids_cgroup import RunPids
from .ranks import Ranks, plan_ranks
from .run_environment import run_environment
from .run_limits import RunLimits
from .run_model_dir import RunModelDir
from .run_settings import RunSettings
from .trial_view import Mount, linked_user

T = TypeVar("T")
# A harness the agent spawned, or one its environment's fork server forked.
HarnessProcess = asyncio.subprocess.Process | ForkedProcess

# How long to wait for the harness's output pipes to close after it exited (a detached grandchild
# could hold them open; the group is SIGKILLed first, so this is only a safety net).
PIPE_DRAIN_SECONDS = 5.0
DEFAULT_MODEL_DEFINITION_NAME = "model_def"
# When the agent started the harness (the start of its "imports" phase); as pedl.harness.timeline.T0_ENV.
TIMELINE_T0_ENV = "PEDL_TIMELINE_T0"


class _Killed(Exception):
    pass


@dataclass
class _Outcome:
    exit_code: int
    error: str = ""


def _decoded(start: agent_pb2.StartTrial) -> ExperimentConfig | None:
    """The run's config, decoded once here; None when it does not decode: the harness then refuses it
    with the line naming what is wrong, which reaches the user as the run's failure."""
    try:
        return carried.from_json(start.config_json, source=f"StartTrial.{carried.FIELD}")
    except ConfigError:
        return None


class TrialRun:
    """Runs one (trial, run) to its end and reports `trial_exited` exactly once."""

    def __init__(self, start: agent_pb2.StartTrial, settings: RunSettings) -> None:
        self.start = start
        self.config = _decoded(start)
        self.trial_id = start.trial_id
        self.run_id = start.run_id
        self._s = settings
        self.trial_dir = settings.work_dir / "trials" / f"{self.trial_id}-{self.run_id}"
        self.socket_path = settings.socket_dir / f"{self.trial_id}-{self.run_id}.sock"
        self.servicer = HarnessServicer(
            start, on_result=self._on_result, on_epoch_length=self._on_epoch_length
        )
        self._log = structlog.get_logger(trial_id=self.trial_id, run_id=self.run_id)
        self._kill_requested = asyncio.Event()
        self._killed_by_scheduler = False
        self._kill_reason = ""
        self.stopped_by_infrastructure = False
        self._proc: HarnessProcess | None = None  # the group leader (the first rank)
        self._procs: list[HarnessProcess] = []
        # One per spawned harness process: its read end tells the harness when this agent is gone.
        self._lifelines: list[Lifeline] = []
        self._ranks = Ranks(0, 1, 1)
        self._escalation: asyncio.Task[None] | None = None
        self._harness_argv = settings.harness_argv
        self._exit_started: float | None = None  # TERMINATE handed to the harness, or it died
        self.exited = False
        self._limits = RunLimits(
            settings.disk_limit_bytes,
            settings.disk_poll_seconds,
            settings.load_timeout_seconds,
            lambda reason: self.kill(by_scheduler=False, reason=reason),
            settings.idle_timeout_seconds,
            lambda: self.servicer.busy_since,
        )
        self.waiting = False  # for the runs whose slots it takes over (StartTrial.after)
        self._timeline: list[common_pb2.TimelinePhase] = []
        self._released: asyncio.Future[None] | None = None
        self._handed_over = False
        self._model_dir: RunModelDir | None = None  # the run's view of its experiment's shared tree
        self._mounts: list[Mount] = []  # the experiment's bind_mounts (bind_mounts.py)
        self._pids = RunPids(settings.process_limit)  # its pids cgroup, while it has one
        self.servicer.on_last_work = self._last_work_taken
        self._phase("start received", time.time())

    @property
    def slot_released(self) -> asyncio.Future[None]:
        """Done when a run taking over this run's slots may start its harness: at this run's exit, or
        for a single process on CPU slots as soon as it has taken its last work (a checkpoint then
        TERMINATE): its save, upload and exit then overlap the next harness's start. A checkpoint is
        still reported only once stored; a GPU is never shared by two harnesses."""
        if self._released is None:
            self._released = asyncio.get_running_loop().create_future()
            if self.exited or self._handed_over:
                self._released.set_result(None)
        return self._released

    def _last_work_taken(self) -> None:
        on_cpu = cuda_visible_devices(list(self.start.slot_ids), self._s.gpus) is None
        if not on_cpu or self._ranks.distributed or self._handed_over:
            return
        self._handed_over = True
        self._phase("slot handed over", time.time())
        if self._released is not None and not self._released.done():
            self._released.set_result(None)

    def _phase(self, name: str, start: float, end: float | None = None) -> None:
        self._timeline.append(
            common_pb2.TimelinePhase(
                name=name,
                start=start,
                end=time.time() if end is None else end,
                source="agent",
                run_id=self.run_id,
            )
        )

    def timeline(self) -> list[common_pb2.TimelinePhase]:
        """The agent's and the harness's phases of this run, in the order they started."""
        return sorted([*self._timeline, *self.servicer.timeline], key=lambda p: p.start)

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

    def _on_epoch_length(self, batches: int) -> None:
        length = agent_pb2.EpochLength(trial_id=self.trial_id, run_id=self.run_id, batches=batches)
        self._s.send(agent_pb2.ConnectRequest(epoch_length=length))

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

    async def run(self, after: Sequence[asyncio.Future[None]] = ()) -> None:
        try:
            outcome = await self._run_to_exit(after)
        except Exception as e:  # the agent's own failure (disk full, ...): still tell the scheduler
            self._log.exception("trial run failed in the agent")
            outcome = _Outcome(1, f"the agent failed to run the trial: {type(e).__name__}: {e}")
            if self._proc is not None and self._proc.returncode is None:
                self._signal_group(signal.SIGKILL)
        if self._exit_started is not None:
            self._phase("exit", self._exit_started)
        if self._released is not None and not self._released.done():
            self._released.set_result(None)
        self.exited = True
        if self._limits.reason:
            outcome = _Outcome(outcome.exit_code or 1, self._limits.reason)
        elif self._pids.hit and outcome.exit_code != 0:  # the likely cause first
            outcome = _Outcome(outcome.exit_code, f"{self._pids.hit}\n{outcome.error}")
        if self.stopped_by_infrastructure and outcome.exit_code != 0:
            outcome = _Outcome(AGENT_STOPPED_EXIT_CODE, outcome.error or self._kill_reason)
        killed = self._kill_requested.is_set() and self._killed_by_scheduler
        self._log.info("trial exited", exit_code=outcome.exit_code, killed=killed)
        exited = agent_pb2.TrialExited(
            trial_id=self.trial_id,
            run_id=self.run_id,
            exit_code=outcome.exit_code,
            error=outcome.error,
            killed=killed,
            timeline=self.timeline(),
        )
        failure = self.servicer.failure_report()
        if failure is not None and outcome.exit_code != 0 and not self._kill_requested.is_set():
            exited.failure.CopyFrom(failure)
        self._s.send(agent_pb2.ConnectRequest(trial_exited=exited))
        if self._s.trial_dirs is not None:
            failed = outcome.exit_code != 0 and not killed and not self._limits.over_disk
            await asyncio.to_thread(self._s.trial_dirs.finish, self.trial_dir, failed)

    async def _run_to_exit(self, after: Sequence[asyncio.Future[None]]) -> _Outcome:
        self.trial_dir.mkdir(parents=True, exist_ok=True)
        relay = LogRelay(
            self.trial_id,
            self.run_id,
            self._s.send,
            self.trial_dir / "trial.log",
            limit_bytes=self._s.log_limit_bytes,
            file_bytes=self._s.log_file_bytes,
        )
        server: grpc.aio.Server | None = None
        try:
            try:
                started = time.time()
                model_dir = await self._unless_killed(self._prepare())
                server = await serve_on_socket(self.servicer, self.socket_path)
                self._phase("model definition fetched and unpacked", started)
                if self._kill_requested.is_set():
                    raise _Killed()
                started = time.time()
                pending = [f for f in after if not f.done()]
                if pending and self._starts_early():
                    self._hold_workloads_until(pending)
                elif await self._wait_for_slots(after):
                    self._phase("waiting for the slots' previous runs", started)
                started = time.time()
                note = await asyncio.to_thread(self._pids.make, self.trial_dir.name)
                if note:  # no pids cgroup bounds it: which limit does
                    relay.add("pedl", note)
                await self._spawn_all(model_dir, started)
                self._phase("process spawned", started)
                shm = self._s.sandbox.shm_dir(self.trial_dir) if self._s.sandbox is not None else None
                self._limits.start(self.trial_dir, self.servicer.loaded, shm)
            except _Killed:
                outcome = _Outcome(1, self._kill_reason or "killed before the harness started")
            except Exception as e:
                self._log.warning("trial failed before the harness started", error=str(e))
                relay.add("pedl", str(e))
                outcome = _Outcome(1, str(e))
            else:
                outcome = await self._supervise(relay)
        finally:
            if self.servicer.gate is not None:
                self.servicer.gate.cancel()
            self._limits.stop()
            if self._limits.reason:
                relay.add("pedl", self._limits.reason)
            if await asyncio.to_thread(self._pids.remove):  # whatever of the run is left dies with it
                relay.add("pedl", self._pids.hit)
            if self._escalation is not None:
                self._escalation.cancel()
            relay.close()
            if server is not None:
                await server.stop(0.5)
            with contextlib.suppress(FileNotFoundError):
                self.socket_path.unlink()
            if self._s.sandbox is not None:
                self._s.sandbox.release(self.trial_dir)
            for lifeline in self._lifelines:
                lifeline.close()
            if self._model_dir is not None and self._model_dir.tree is not None:  # every process exited
                self._s.model_definitions.release(self.start.experiment_id)
        return outcome

    async def _wait_for_slots(self, after: Sequence[asyncio.Future[None]]) -> bool:
        """Until the runs this one takes its slots from have ended (prepared and serving meanwhile);
        False when there was nothing to wait for."""
        pending = [f for f in after if not f.done()]
        if not pending:
            return False
        self.waiting = True
        self._log.info("waiting for the slots' current runs to exit", runs=len(pending))
        try:
            await self._unless_killed(asyncio.wait(pending))
        finally:
            self.waiting = False
        return True

    def _starts_early(self) -> bool:
        """Whether the harness may start while its slots' previous runs still finish: a single process
        on CPU slots (a GPU is never shared by two harnesses, nor are a distributed run's ports)."""
        single = len(self.start.slot_ids) <= 1 and self.start.world_size <= 1
        return single and cuda_visible_devices(list(self.start.slot_ids), self._s.gpus) is None

    def _hold_workloads_until(self, pending: list[asyncio.Future[None]]) -> None:
        """The harness starts now and builds its trial; its first workload waits until `pending` (the
        slots' previous runs letting go of them) are done, so that setup is off the slots' critical path."""
        self.waiting = True
        self._log.info("starting the harness while the slots' current runs finish", runs=len(pending))
        self.servicer.gate = asyncio.ensure_future(self._slots_freed(pending))

    async def _slots_freed(self, pending: list[asyncio.Future[None]]) -> None:
        try:
            await asyncio.wait(pending)
        finally:
            self.waiting = False
        asked = self.servicer.first_asked_at
        if asked is not None:  # the harness was ready before the slots were
            self._phase("waiting for the slots' previous runs", asked)

    async def _prepare(self) -> Path:
        self._harness_argv = self._s.harness_for(self.start.environment)
        try:  # a refusal is the same on every run here: signed, so it is not retried for ever
            self._mounts = run_mounts(
                self.start, self.config, self._s.sandbox, self.trial_dir, self.socket_path
            )
        except BindMountRefused as e:
            self.servicer.failure = e.signature()
            raise ValueError(e.args[0]) from e
        name = check_name(self.start.model_definition_name or DEFAULT_MODEL_DEFINITION_NAME)
        # Unpacked once per experiment on this agent; this run gets a copy-on-write view of it.
        self._model_dir = RunModelDir(self.trial_dir, name)
        start = self.start
        tree, _ = await self._s.model_definitions.acquire(start.experiment_id, start.model_definition_sha256)
        self._model_dir.tree = tree  # held from here on, released at exit
        fork_servers = self._s.fork_servers
        single = len(self.start.slot_ids) <= 1  # one local rank (plan_ranks)
        overlay = fork_servers is not None and single and fork_servers.overlays(self.start.environment)
        await self._model_dir.prepare(tree, overlay)
        self.servicer.model_definition_dir = str(self._model_dir.path)
        return self._model_dir.path

    def environment(self, index: int = 0) -> dict[str, str]:
        """The environment of the run's harness process `index` (see run_environment)."""
        return run_environment(
            self.start, self.config, self._s, self._ranks, self.trial_dir, self.socket_path, index
        )

    async def _spawn_all(self, model_dir: Path, started: float) -> None:
        """Starts one harness per local rank; the first leads the process group the others join."""
        self._ranks = plan_ranks(self.start)
        try:
            for index in range(self._ranks.local):
                proc = await self._spawn(model_dir, index, started)
                if index == 0:
                    self._proc = proc
                self._procs.append(proc)
        except Exception:
            self._signal_group(signal.SIGKILL)
            raise

    async def _spawn(self, model_dir: Path, index: int, started: float) -> HarnessProcess:
        argv = self._harness_argv
        env = self.environment(index)
        env[TIMELINE_T0_ENV] = repr(started)
        user = linked_user(self.start)  # on a root agent, the Unix user the owner is linked to
        if self._s.fork_servers is not None and self._ranks.local == 1 and not self._mounts:  # mounts spawn
            view = self._model_dir.view() if self._model_dir is not None else None
            place = self._pids.place  # into its pids cgroup before it runs anything
            forked = await self._s.fork_servers.fork(
                self.start.environment, env, model_dir, self.trial_dir, self.socket_path, view, user, place
            )
            if forked is not None:
                self._log.info("harness forked", pid=forked.pid, cwd=str(model_dir), overlay=view is not None)
                return forked
        if self._model_dir is not None:  # not forked after all: a copy of its own
            await self._model_dir.not_forked()
        if self._s.sandbox is not None:
            argv = self._s.sandbox.wrap(argv, self.trial_dir, model_dir, self.socket_path, self._mounts, user)
        argv = self._pids.enter_argv(argv)
        # A process group cannot span sessions: one harness gets a session of its own, several share
        # a new group (outside the agent's, so a terminal's signals to the agent do not reach them).
        group: dict[str, Any] = {"start_new_session": True}
        if self._ranks.local > 1:
            group = {"process_group": self._proc.pid if self._proc is not None else 0}
        lifeline = Lifeline()  # no harness outlives this agent (pedl._parent_death)
        self._lifelines.append(lifeline)
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv,
                cwd=model_dir,
                env={**env, **lifeline.env()},
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                pass_fds=(lifeline.read_fd,),
                **group,
            )
        except OSError as e:
            raise RuntimeError(f"cannot start the harness {' '.join(argv)!r}: {e}") from e
        finally:
            lifeline.spawned()
        rank = self._ranks.first_rank + index
        self._log.info("harness started", pid=proc.pid, cwd=str(model_dir), rank=rank)
        return proc

    def _kill_all_ranks(self, exits: list[tuple[int, int]]) -> None:
        self._log.info("a rank failed; killing the others", exits=exits)
        self._signal_group(signal.SIGKILL)

    async def _supervise(self, relay: LogRelay) -> _Outcome:
        procs = self._procs
        if self._kill_requested.is_set():  # the kill came while the processes were being started
            self._terminate()
        many = len(procs) > 1
        tails: list[deque[str]] = [deque(maxlen=STDERR_TAIL_LINES) for _ in procs]
        pumps = []
        for index, proc in enumerate(procs):
            assert proc.stdout is not None and proc.stderr is not None
            prefix = f"[rank {self._ranks.first_rank + index}] " if many else ""
            limit, tail = self._s.max_log_line_bytes, tails[index]
            pumps.append(asyncio.ensure_future(_pump(relay, proc.stdout, "stdout", prefix, limit)))
            pumps.append(asyncio.ensure_future(_pump(relay, proc.stderr, "stderr", prefix, limit, tail)))
        exits = await process_exits.all_exited(procs, self._s.kill_grace_seconds, self._kill_all_ranks)
        self._exit_started = self.servicer.terminate_sent_at or time.time()
        self._signal_group(signal.SIGKILL)  # whatever the harnesses left behind dies with them
        _, late = await asyncio.wait(pumps, timeout=PIPE_DRAIN_SECONDS)
        for p in late:
            p.cancel()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(asyncio.gather(*(p.wait() for p in procs)), PIPE_DRAIN_SECONDS)
        if self._kill_requested.is_set():
            return _Outcome(exits[0][1], self._kill_reason)
        return _Outcome(*process_exits.outcome(exits, tails, self._ranks.first_rank if many else None))


async def _pump(
    relay: LogRelay,
    stream: asyncio.StreamReader,
    source: str,
    prefix: str,
    max_line_bytes: int,
    tail: deque[str] | None = None,
) -> None:
    async for line in iter_lines(stream, max_line_bytes):
        relay.add(source, prefix + line)
        if tail is not None:
            tail.append(line)
