"""Warm harness processes: one fork server per Python environment (`pedl.harness.zygote`).

A fork server has imported the harness and the frameworks once; each single-process trial run gets
a harness forked from it instead of a new interpreter that imports torch again. Where forking is not
possible or not safe (a distributed run, an experiment that sets variables Python reads at start, an
environment whose pedl has no fork server, a server that found its imports unsafe) the run spawns a
plain process, and the agent log says why.

Under `--isolation bwrap` the server runs in a sandbox that sees every run's directory and socket
(and nothing else of the agent's), with the capabilities, inside its own user namespace, to narrow
that view per child: each forked harness gets a mount namespace with only its own trial directory,
socket, /tmp and /dev/shm, its own PID namespace and /proc, and no capability left, as
`Sandbox.wrap` gives a spawned one (see `pedl.harness._namespaces`).

Each forked harness's model directory is a copy-on-write overlay over its experiment's tree, which
the agent unpacked once (`model_trees`); the child mounts it in its own mount namespace before any
trial code runs. A server whose children cannot mount one (it probes at start) gets copies instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog

from .sandbox import Sandbox
from .trial_view import TrialUser

# How long a trial waits for its environment's server to finish its imports before it spawns.
READY_TIMEOUT_S = 120.0
REPLY_TIMEOUT_S = 30.0
# The request body goes through a pipe written before the child reads it: it must fit the buffer.
MAX_BODY_BYTES = 60_000
# Variables Python, the C libraries or the frameworks read when the process starts: a run whose
# environment sets them differently from the server's must start a process of its own.
STARTUP_PREFIXES = (
    "PYTHON",
    "LD_",
    "MALLOC_",
    "OMP_",
    "MKL_",
    "KMP_",
    "OPENBLAS_",
    "TORCH_",
    "TF_",
    "XLA_",
    "CUDA_",
    "NVIDIA_",
)
# Differ per run and are read only when used (after the fork, from the updated environment);
# OMP_NUM_THREADS is applied after the fork with torch.set_num_threads (pedl.harness.zygote).
PER_RUN = frozenset({"HOME", "CUDA_VISIBLE_DEVICES", "PYTHONUNBUFFERED", "OMP_NUM_THREADS"})

# What the agent log says (once per environment) when forked runs get copies rather than overlays.
COPYING = "copying each forked run's model definition"

log = structlog.get_logger(component="fork_server")


class ForkUnavailable(Exception):
    """Why this run cannot be forked (it is spawned instead)."""


def server_argv(harness_argv: list[str], fd: int) -> list[str] | None:
    """`python -m pedl.harness.zygote FD` for a harness command `python -m pedl.harness`, else None."""
    if len(harness_argv) != 3 or harness_argv[1:] != ["-m", "pedl.harness"]:
        return None
    return [harness_argv[0], "-m", "pedl.harness.zygote", str(fd)]


def startup_difference(server_env: Mapping[str, str], run_env: Mapping[str, str]) -> list[str]:
    """Variables read at interpreter start whose value for the run differs from the server's."""
    names = set(server_env) | set(run_env)
    return sorted(
        n
        for n in names
        if n.startswith(STARTUP_PREFIXES) and n not in PER_RUN and server_env.get(n) != run_env.get(n)
    )


class ForkedProcess:
    """The part of `asyncio.subprocess.Process` a TrialRun uses, for a harness the server forked."""

    def __init__(
        self,
        pid: int,
        stdout: asyncio.StreamReader,
        stderr: asyncio.StreamReader,
        exited: asyncio.Future[int],
    ) -> None:
        self.pid = pid
        self.stdout = stdout
        self.stderr = stderr
        self._exited = exited

    @property
    def returncode(self) -> int | None:
        return self._exited.result() if self._exited.done() else None

    async def wait(self) -> int:
        return await asyncio.shield(self._exited)


@dataclass
class ForkServer:
    """One environment's server: started on first use, restarted on the next use after it died."""

    name: str
    harness_argv: list[str]
    env: dict[str, str]
    sandbox: Sandbox | None
    trials_root: Path
    socket_dir: Path
    # The agent's unpacked model definitions (`model_trees`): read-only in the server's sandbox.
    trees_root: Path | None = None
    unusable: str = ""  # why this environment never forks (logged once)
    # Set once TensorFlow proved to start threads on import: the server then preloads torch only.
    without_tensorflow: bool = False
    # Seconds without a fork request before the ready server imports TensorFlow (it reports ready
    # with torch alone: a PyTorch trial need not wait for TensorFlow's import).
    tensorflow_after: float = 5.0
    _sock: socket.socket | None = None
    _proc: asyncio.subprocess.Process | None = None
    _ready: asyncio.Future[dict[str, Any]] | None = None
    _replies: dict[int, asyncio.Future[dict[str, Any]]] = field(default_factory=dict)
    _exits: dict[int, asyncio.Future[int]] = field(default_factory=dict)
    _ids: itertools.count = field(default_factory=itertools.count)
    _announced: bool = False
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    _starting: asyncio.Future[None] | None = None
    _relays: list[asyncio.Future[None]] = field(default_factory=list)

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.returncode is None and self._sock is not None

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        argv = server_argv(self.harness_argv, theirs.fileno())
        if argv is not None and self.without_tensorflow:
            argv.append("--no-tensorflow")
        elif argv is not None:
            argv += ["--tensorflow-after", f"{self.tensorflow_after:g}"]
        if argv is not None and self.sandbox is not None:
            argv.append("--sandboxed")
        if argv is None:
            ours.close()
            theirs.close()
            self.unusable = f"its harness command {self.harness_argv} is not `PYTHON -m pedl.harness`"
            return
        if self.sandbox is not None:
            argv = self.sandbox.wrap_fork_server(argv, self.trials_root, self.socket_dir, self.trees_root)
        self.trials_root.mkdir(parents=True, exist_ok=True)
        try:
            # From the loop's own thread: the server's PR_SET_PDEATHSIG follows the thread that forked it.
            self._proc = await asyncio.create_subprocess_exec(
                *argv,
                env=self.env,
                pass_fds=[theirs.fileno()],
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,
            )
        except OSError as e:
            ours.close()
            self.unusable = f"its fork server could not start: {e}"
            return
        finally:
            theirs.close()
        ours.setblocking(False)
        self._sock = ours
        self._ready = loop.create_future()
        loop.add_reader(ours.fileno(), self._readable)
        self._relays.append(asyncio.ensure_future(self._relay_stderr(self._proc)))

    async def _relay_stderr(self, proc: asyncio.subprocess.Process) -> None:
        assert proc.stderr is not None
        async for line in proc.stderr:
            log.info("fork server output", environment=self.name, line=line.decode(errors="replace").rstrip())

    def _readable(self) -> None:
        assert self._sock is not None
        try:
            data = self._sock.recv(1 << 16)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            self._closed()
            return
        message = json.loads(data)
        if "later" in message:
            log.info("fork server imported tensorflow", environment=self.name, **message["later"])
        elif "unsafe" in message and self._ready is not None and self._ready.done():
            self._tensorflow_unsafe(message["unsafe"])
        elif "ready" in message or "unsafe" in message:
            if self._ready is not None and not self._ready.done():
                self._ready.set_result(message)
        elif "exit" in message:
            exited = self._exits.pop(message["exit"], None)
            if exited is not None and not exited.done():
                exited.set_result(int(message["code"]))
        elif "id" in message:
            if "pid" in message:  # before its exit can be reported (the server sends them in order)
                self._exits[message["pid"]] = asyncio.get_running_loop().create_future()
            reply = self._replies.pop(message["id"], None)
            if reply is not None and not reply.done():
                reply.set_result(message)

    def _tensorflow_unsafe(self, why: str) -> None:
        """The ready server's later TensorFlow import started threads: it refuses forks and exits
        once its children have; the next server (started by the next run) preloads torch only."""
        log.info(
            "the fork server will not preload TensorFlow; its trials import it themselves",
            environment=self.name,
            reason=why,
        )
        self.without_tensorflow = True

    def _closed(self) -> None:
        """The server is gone; its children died with it (PR_SET_PDEATHSIG)."""
        if self._sock is not None:
            with contextlib.suppress(ValueError, OSError):
                asyncio.get_running_loop().remove_reader(self._sock.fileno())
            self._sock.close()
            self._sock = None
        for pending in (*self._replies.values(), *([self._ready] if self._ready else [])):
            if not pending.done():
                pending.set_result({"error": "the fork server exited"})
        for exited in self._exits.values():
            if not exited.done():
                exited.set_result(-9)
        self._replies.clear()
        self._exits.clear()

    async def ready(self) -> None:
        """Until the server has its imports done (started or restarted as needed), or ForkUnavailable."""
        async with self._lock:
            await self._ready_locked()

    async def _ready_locked(self) -> None:
        if self.unusable:
            raise ForkUnavailable(self.unusable)
        if not self.running:
            await self.start()
            if self.unusable:
                raise ForkUnavailable(self.unusable)
        assert self._ready is not None
        try:
            verdict = await asyncio.wait_for(asyncio.shield(self._ready), READY_TIMEOUT_S)
        except asyncio.TimeoutError:
            raise ForkUnavailable(f"its fork server was not ready within {READY_TIMEOUT_S:.0f} s") from None
        if "unsafe" in verdict and "tensorflow" in verdict["unsafe"] and not self.without_tensorflow:
            # An environment whose pedl imports TensorFlow before it reports ready.
            self._tensorflow_unsafe(verdict["unsafe"])
            self._closed()
            await self._ready_locked()
            return
        if "unsafe" in verdict:
            self.unusable = f"forking is unsafe there: {verdict['unsafe']}"
            raise ForkUnavailable(self.unusable)
        if "ready" not in verdict:  # it died importing (an environment whose pedl has no fork server)
            self.unusable = (
                f"its fork server exited before it was ready ({verdict.get('error', 'no reason given')}; "
                "its output is in this log)"
            )
            raise ForkUnavailable(self.unusable)
        if not self._announced:
            self._announced = True
            log.info("fork server ready", environment=self.name, **verdict["ready"])

    @property
    def model_views(self) -> str:
        """`overlay` when its children mount their model directories as overlays, else why not
        (empty until it is ready)."""
        ready = self._ready
        if not self._serving or ready is None:
            return ""
        return str(ready.result()["ready"].get("model_views", "copies (its pedl mounts no overlays)"))

    @property
    def _serving(self) -> bool:
        """Running with its imports done: a fork needs no lock (runs starting together all fork)."""
        ready = self._ready
        return self.running and ready is not None and ready.done() and "ready" in ready.result()

    async def fork(
        self,
        env: dict[str, str],
        cwd: Path,
        box: dict[str, Any] | None,
        view: dict[str, str] | None = None,
        place: Callable[[int], None] | None = None,
    ) -> ForkedProcess:
        """A harness forked for a run; `place(pid)` runs before the child reads the end of its request
        (the body pipe's EOF), so before anything of the trial runs (its pids cgroup: pids_cgroup.py)."""
        if not self._serving:
            # A server already importing (warmed when the agent started) is waited for: it has a head
            # start on the imports a spawned harness would pay from scratch, on the same cores. One
            # not started yet starts for later runs; this one spawns rather than wait the whole import.
            if self._lock.locked():
                await self.ready()
            elif not self.unusable and (not self.running or self._ready is None or not self._ready.done()):
                self._starting = asyncio.ensure_future(self._start_quietly())
                raise ForkUnavailable("its fork server is starting")
            else:
                await self.ready()
        different = startup_difference(self.env, env)
        if different:
            raise ForkUnavailable(
                f"the run sets {', '.join(different)}, which must be in place when Python starts"
            )
        body = json.dumps({"env": env, "cwd": str(cwd)}).encode()
        if len(body) > MAX_BODY_BYTES:
            raise ForkUnavailable(f"its environment is {len(body)} bytes, over {MAX_BODY_BYTES}")
        loop = asyncio.get_running_loop()
        body_r, body_w = os.pipe()
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        try:
            os.write(body_w, body)
            request_id = next(self._ids)
            reply = self._replies[request_id] = loop.create_future()
            assert self._sock is not None
            message = json.dumps({"id": request_id, "box": box, "view": view}).encode()
            socket.send_fds(self._sock, [message], [body_r, out_w, err_w])
        except OSError as e:
            for fd in (out_r, err_r, body_w):
                os.close(fd)
            raise ForkUnavailable(f"the fork server did not take the request: {e}") from e
        finally:
            for fd in (body_r, out_w, err_w):
                with contextlib.suppress(OSError):
                    os.close(fd)
        try:
            answer = await asyncio.wait_for(reply, REPLY_TIMEOUT_S)
            if "pid" in answer and place is not None:
                place(answer["pid"])
        finally:
            os.close(body_w)  # the child goes on
        if "pid" not in answer:
            for fd in (out_r, err_r):
                os.close(fd)
            raise ForkUnavailable(answer.get("error", "the fork server refused"))
        exited = self._exits.get(answer["pid"]) or loop.create_future()
        return ForkedProcess(answer["pid"], await _reader(out_r), await _reader(err_r), exited)

    async def _start_quietly(self) -> None:
        with contextlib.suppress(ForkUnavailable):
            await self.ready()

    async def close(self) -> None:
        if self._starting is not None:
            self._starting.cancel()
        if self._sock is not None:
            self._closed()
        if self._proc is not None and self._proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self._proc.kill()
            await self._proc.wait()
        if self._relays:  # each server's stderr to its end, so its transport closes with the loop alive
            await asyncio.wait(self._relays, timeout=5.0)


async def _reader(fd: int) -> asyncio.StreamReader:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(fd, "rb", 0))
    return reader


class ForkServers:
    """The agent's fork servers, one per Python environment, started as first needed (`warm` at start)."""

    def __init__(
        self,
        environments: Mapping[str, list[str]],
        env: dict[str, str],
        sandbox: Sandbox | None,
        trials_root: Path,
        socket_dir: Path,
        trees_root: Path | None = None,
        preload_tensorflow: bool = True,
        tensorflow_after: float = 5.0,
    ) -> None:
        self._servers = {
            name: ForkServer(
                name,
                list(argv),
                dict(env),
                sandbox,
                trials_root,
                socket_dir,
                trees_root,
                without_tensorflow=not preload_tensorflow,
                tensorflow_after=tensorflow_after,
            )
            for name, argv in environments.items()
        }
        self._sandbox = sandbox
        self._trials_root = trials_root
        self._trees_root = trees_root
        self._told: set[tuple[str, str]] = set()
        self._warming: list[asyncio.Future[None]] = []

    async def warm(self, name: str) -> asyncio.Future[None]:
        """Starts `name`'s server now, so its imports are done before the first trial needs them;
        the future is done once they are (or once the server proved it cannot fork)."""
        server = self._servers.get(name)
        if server is None:
            done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            done.set_result(None)
            return done
        warming = asyncio.ensure_future(self._warm(server))
        self._warming.append(warming)
        return warming

    async def ready(self, name: str) -> None:
        """Until `name`'s server has its imports done; ForkUnavailable when it cannot fork."""
        await self._servers[name].ready()

    async def _warm(self, server: ForkServer) -> None:
        try:
            await server.ready()
        except ForkUnavailable as e:
            self._tell(server.name, str(e))

    def overlays(self, environment: str) -> bool:
        """Whether a run forked now in `environment` gets its model directory as an overlay (`view`
        in `fork`); when its server says it cannot mount one, the agent log says so once."""
        name = environment or "default"
        server = self._servers.get(name)
        if server is None:
            return False
        views = server.model_views
        if views and views != "overlay":
            self._tell(name, f"its fork server cannot mount them as overlays: {views}", COPYING)
        return views == "overlay"

    async def fork(
        self,
        environment: str,
        env: dict[str, str],
        cwd: Path,
        trial_dir: Path,
        socket_path: Path,
        view: dict[str, str] | None = None,
        user: TrialUser | None = None,
        place: Callable[[int], None] | None = None,
    ) -> ForkedProcess | None:
        """A harness forked for this run, or None (logged once per environment and reason): spawn it.
        With a `view` (see `overlays`) the harness mounts its model directory `cwd` as an overlay."""
        name = environment or "default"
        server = self._servers.get(name)
        if server is None:
            return None
        box = None
        if self._sandbox is not None:
            tree = Path(view["lower"]) if view is not None else None
            plan = self._sandbox.child_plan
            box = plan(trial_dir, socket_path, self._trials_root, self._trees_root, user, tree)
        try:
            return await server.fork(env, cwd, box, view, place)
        except (ForkUnavailable, asyncio.TimeoutError) as e:
            self._tell(name, str(e) or "the fork server did not answer")
            return None

    def _tell(self, name: str, reason: str, what: str = "starting harnesses as new processes") -> None:
        if (name, reason) not in self._told:
            self._told.add((name, reason))
            log.warning(what, environment=name, reason=reason)

    async def close(self) -> None:
        for task in self._warming:
            task.cancel()
        for server in self._servers.values():
            await server.close()
