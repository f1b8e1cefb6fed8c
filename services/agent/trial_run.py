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
import socket
import time
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import grpc.aio
import structlog

import pedl._grpc
from pedl._parent_death import Lifeline
from pedl.config.env_vars import trial_variables_from_text
from pedl.harness.distributed import PEER_FAILED_EXIT_CODE
from pedl.harness.store_retry import BUDGET_ENV, DEFAULT_BUDGET_S
from pedl.v1 import agent_pb2, common_pb2, harness_pb2, harness_pb2_grpc

from .credentials import harness_credentials, harness_environment
from .devices import Gpu, cuda_visible_devices
from .disk import DEFAULT_POLL_SECONDS, TrialDirs
from .fork_server import ForkedProcess, ForkServers
from .harness_service import HarnessServicer
from .log_relay import FILE_BYTES, MAX_LINE_BYTES, STDERR_TAIL_LINES, LogRelay, iter_lines
from .model_definitions import ModelDefinitionCache, check_name, unpack_fresh
from .run_limits import RunLimits
from .sandbox import Sandbox

T = TypeVar("T")
# A harness the agent spawned, or one its environment's fork server forked.
HarnessProcess = asyncio.subprocess.Process | ForkedProcess
Send = Callable[[agent_pb2.ConnectRequest], None]

# How long to wait for the harness's output pipes to close after it exited (a detached grandchild
# could hold them open; the group is SIGKILLed first, so this is only a safety net).
PIPE_DRAIN_SECONDS = 5.0
# How often exit codes are polled while a run's processes live: each poll may add this to a slot's idle time.
EXIT_POLL_SECONDS = 0.02
DEFAULT_MODEL_DEFINITION_NAME = "model_def"
# When the agent started the harness (the start of its "imports" phase); as pedl.harness.timeline.T0_ENV.
TIMELINE_T0_ENV = "PEDL_TIMELINE_T0"
# Never inherited from the agent's environment: the agent sets the first six per rank; a Keras
# trial's harness sets TF_CONFIG itself, from ports its ranks pick and share at the rendezvous.
DISTRIBUTED_ENV = (
    "RANK",
    "LOCAL_RANK",
    "WORLD_SIZE",
    "LOCAL_WORLD_SIZE",
    "MASTER_ADDR",
    "MASTER_PORT",
    "TF_CONFIG",
    "PEDL_AGENT_ADDRESS",
)


@dataclass(frozen=True)
class Ranks:
    """The ranks this agent runs of a trial: first_rank .. first_rank + local - 1 of world_size."""

    first_rank: int
    local: int
    world_size: int
    master_addr: str = ""
    master_port: int = 0

    @property
    def distributed(self) -> bool:
        return self.world_size > 1


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("", 0))
        return int(s.getsockname()[1])


def plan_ranks(start: agent_pb2.StartTrial, free_port: Callable[[], int] = _free_port) -> Ranks:
    """One process per slot (one for a slot-less trial); the rendezvous the scheduler gave, or a free
    local port when this agent runs the whole trial from rank 0."""
    local = max(len(start.slot_ids), 1)
    world_size = start.world_size or local
    if world_size <= 1:
        return Ranks(0, 1, 1)
    if start.rank < 0 or start.rank + local > world_size:
        raise ValueError(
            f"StartTrial gives this agent ranks {start.rank}..{start.rank + local - 1} "
            f"(one per slot of {list(start.slot_ids)}), which do not fit world_size {world_size}"
        )
    if start.rendezvous_address:
        host, _, port = start.rendezvous_address.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"StartTrial.rendezvous_address {start.rendezvous_address!r} is not host:port")
        return Ranks(start.rank, local, world_size, host.strip("[]"), int(port))
    if start.rank != 0 or local != world_size:
        raise ValueError(
            f"StartTrial for ranks {start.rank}..{start.rank + local - 1} of {world_size} spans several "
            "agents, so it needs the chief's rendezvous_address (host:port)"
        )
    return Ranks(0, local, world_size, "127.0.0.1", free_port())


@dataclass
class RunSettings:
    """What every trial run on this agent shares."""

    harness_argv: list[str]
    work_dir: Path
    socket_dir: Path
    model_definitions: ModelDefinitionCache
    send: Send
    kill_grace_seconds: float = 10.0
    # How long harnesses wait out an unreachable checkpoint store (pedl.harness.store_retry).
    store_retry_budget_seconds: float = DEFAULT_BUDGET_S
    # A longer line of a harness's output is split into lines of this many bytes.
    max_log_line_bytes: int = MAX_LINE_BYTES
    gpus: list[Gpu] = field(default_factory=list)
    # Harness command lines of the other Python environments offered, by name (`harness_argv` is
    # "default").
    environments: dict[str, list[str]] = field(default_factory=dict)
    # The address other machines reach this agent on (--address or the detected one), handed to
    # ranks: those of a trial spanning machines listen on the interface carrying it.
    address: str = ""
    # The bubblewrap sandbox every harness runs in; None runs them as plain processes.
    sandbox: Sandbox | None = None
    # Disk hygiene (disk.py): a run's disk limit (0: none), how its directory goes when it ends, and
    # how much output one run may log (0: no limit) and the agent keeps locally.
    disk_limit_bytes: int = 0
    disk_poll_seconds: float = DEFAULT_POLL_SECONDS
    trial_dirs: TrialDirs | None = None
    log_limit_bytes: int = 0
    log_file_bytes: int = FILE_BYTES
    # Seconds a run may take from its harness's start to its first workload request (0: no limit).
    load_timeout_seconds: float = 0.0
    # Warm harness processes (one fork server per environment); None spawns every harness.
    fork_servers: ForkServers | None = None

    def environment_names(self) -> list[str]:
        return ["default", *sorted(n for n in self.environments if n != "default")]

    def harness_for(self, environment: str) -> list[str]:
        """The harness command line for StartTrial.environment ("" is "default")."""
        name = environment or "default"
        argv = self.harness_argv if name == "default" else self.environments.get(name)
        if argv is None:
            raise ValueError(
                f"the experiment's environment {name!r} is not offered by this agent; it offers: "
                f"{', '.join(self.environment_names())} (pedl-agent --environment NAME=PYTHON)"
            )
        return argv


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
        self.servicer = HarnessServicer(
            start, on_result=self._on_result, on_epoch_length=self._on_epoch_length
        )
        self._log = structlog.get_logger(trial_id=self.trial_id, run_id=self.run_id)
        self._kill_requested = asyncio.Event()
        self._killed_by_scheduler = False
        self._kill_reason = ""
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
        )
        self.waiting = False  # for the runs whose slots it takes over (StartTrial.after)
        self._timeline: list[common_pb2.TimelinePhase] = []
        self._released: asyncio.Future[None] | None = None
        self._handed_over = False
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
                server = await self._serve()
                self._phase("model definition fetched and unpacked", started)
                if self._kill_requested.is_set():
                    raise _Killed()
                started = time.time()
                if await self._wait_for_slots(after):
                    self._phase("waiting for the slots' previous runs", started)
                started = time.time()
                await self._spawn_all(model_dir, started)
                self._phase("process spawned", started)
                self._limits.start(self.trial_dir, self.servicer.loaded)
            except _Killed:
                outcome = _Outcome(1, self._kill_reason or "killed before the harness started")
            except Exception as e:
                self._log.warning("trial failed before the harness started", error=str(e))
                relay.add("pedl", str(e))
                outcome = _Outcome(1, str(e))
            else:
                outcome = await self._supervise(relay)
        finally:
            self._limits.stop()
            if self._limits.reason:
                relay.add("pedl", self._limits.reason)
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

    async def _prepare(self) -> Path:
        self._harness_argv = self._s.harness_for(self.start.environment)
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

    def _environment(self, index: int = 0) -> dict[str, str]:
        env = harness_environment(os.environ, self.trial_dir, DISTRIBUTED_ENV)
        slots = list(self.start.slot_ids)
        r = self._ranks
        on_gpu = cuda_visible_devices(slots, self._s.gpus) is not None
        # The experiment's environment.environment_variables; pedl's own names (below) cannot be among them.
        env.update(trial_variables_from_text(self.start.config_yaml, gpu=on_gpu))
        env.update(
            PEDL_HARNESS_SOCKET=str(self.socket_path),
            PEDL_TRIAL_ID=str(self.trial_id),
            PEDL_RUN_ID=str(self.run_id),
            PYTHONUNBUFFERED="1",
        )
        env[BUDGET_ENV] = f"{self._s.store_retry_budget_seconds:g}"
        harness_credentials(env, self.start.checkpoint_token)
        if r.distributed:
            slots = slots[index : index + 1]
            env.update(
                RANK=str(r.first_rank + index),
                LOCAL_RANK=str(index),
                WORLD_SIZE=str(r.world_size),
                LOCAL_WORLD_SIZE=str(r.local),
                MASTER_ADDR=r.master_addr,
                MASTER_PORT=str(r.master_port),
            )
            if self._s.address:
                env["PEDL_AGENT_ADDRESS"] = self._s.address
            # As torchrun: ranks sharing the machine's cores should not each take all of them.
            env.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // r.local)))
        visible = cuda_visible_devices(slots, self._s.gpus)
        if visible is not None:
            env["CUDA_VISIBLE_DEVICES"] = visible
        return env

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
        env = self._environment(index)
        env[TIMELINE_T0_ENV] = repr(started)
        if self._s.fork_servers is not None and self._ranks.local == 1:
            forked = await self._s.fork_servers.fork(
                self.start.environment, env, model_dir, self.trial_dir, self.socket_path
            )
            if forked is not None:
                self._log.info("harness forked", pid=forked.pid, cwd=str(model_dir))
                return forked
        if self._s.sandbox is not None:
            argv = self._s.sandbox.wrap(argv, self.trial_dir, model_dir, self.socket_path)
        # A process group cannot span sessions: one harness gets a session of its own, several share
        # a new group (outside the agent's, so a terminal's signals to the agent do not reach them).
        group: dict[str, object] = {"start_new_session": True}
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
                **group,  # type: ignore[arg-type]
            )
        except OSError as e:
            raise RuntimeError(f"cannot start the harness {' '.join(argv)!r}: {e}") from e
        finally:
            lifeline.spawned()
        rank = self._ranks.first_rank + index
        self._log.info("harness started", pid=proc.pid, cwd=str(model_dir), rank=rank)
        return proc

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
        exits = await self._all_exited(procs)
        self._exit_started = self.servicer.terminate_sent_at or time.time()
        self._signal_group(signal.SIGKILL)  # whatever the harnesses left behind dies with them
        _, late = await asyncio.wait(pumps, timeout=PIPE_DRAIN_SECONDS)
        for p in late:
            p.cancel()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(asyncio.gather(*(p.wait() for p in procs)), PIPE_DRAIN_SECONDS)
        if self._kill_requested.is_set():
            return _Outcome(exits[0][1], self._kill_reason)
        culprit = _culprit(exits)
        if culprit is None:
            return _Outcome(0)
        index, code = culprit
        tail = "\n".join(tails[index])
        if not many:
            return _Outcome(code, tail or f"the harness exited with code {code} and wrote nothing to stderr")
        rank = self._ranks.first_rank + index
        return _Outcome(
            code,
            f"rank {rank} failed with exit code {code}:\n{tail}"
            if tail
            else (f"rank {rank} exited with code {code} and wrote nothing to stderr"),
        )

    async def _all_exited(self, procs: list[HarnessProcess]) -> list[tuple[int, int]]:
        """(index, exit code) of every process in the order they exited.

        A rank failing kills the others at once. A rank that only lost a peer (PEER_FAILED_EXIT_CODE)
        waits up to the kill grace period for the peer at fault to exit on its own and be reported.
        Exit codes are polled: `Process.wait()` also waits for the pipes to close, which a surviving
        child of a harness can delay forever.
        """
        exits: list[tuple[int, int]] = []
        loop = asyncio.get_running_loop()
        peer_failed_at: float | None = None
        killed = False
        while True:
            for index, proc in enumerate(procs):
                if proc.returncode is not None and all(i != index for i, _ in exits):
                    exits.append((index, proc.returncode))
            if len(exits) == len(procs):
                return exits
            codes = [code for _, code in exits if code != 0]
            if codes and not killed:
                if any(code != PEER_FAILED_EXIT_CODE for code in codes):
                    killed = True
                elif peer_failed_at is None:
                    peer_failed_at = loop.time()
                elif loop.time() - peer_failed_at > self._s.kill_grace_seconds:
                    killed = True
                if killed:
                    self._log.info("a rank failed; killing the others", exits=exits)
                    self._signal_group(signal.SIGKILL)
            await asyncio.sleep(EXIT_POLL_SECONDS)


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


def _culprit(exits: list[tuple[int, int]]) -> tuple[int, int] | None:
    """The failed process whose error to report: a real failure before a lost peer before a signal."""
    failed = [(i, code) for i, code in exits if code != 0]
    for wanted in (
        lambda c: c > 0 and c != PEER_FAILED_EXIT_CODE,
        lambda c: c == PEER_FAILED_EXIT_CODE,
        lambda c: True,
    ):
        for index, code in failed:
            if wanted(code):
                return index, code
    return None
