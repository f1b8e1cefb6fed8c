"""A real gRPC peer standing in for the scheduler, and the real `pedl-agent` process dialing it."""

from __future__ import annotations

import io
import os
import queue
import signal
import subprocess
import sys
import tarfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent import futures
from pathlib import Path

import grpc
import pytest

from pedl.v1 import agent_pb2, agent_pb2_grpc, scheduler_pb2, scheduler_pb2_grpc
from pedl_scheduler.agent_protocol import SCHEDULER_PROTOCOL

HERE = Path(__file__).parent
WAIT_SECONDS = 30.0
HEARTBEAT_SECONDS = 0.3


def make_archive(files: dict[str, str]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


class FakeScheduler(agent_pb2_grpc.AgentLinkServiceServicer, scheduler_pb2_grpc.SchedulerServiceServicer):
    """Records what agents send (with the number of the stream it came on) and sends what tests say."""

    def __init__(self) -> None:
        self.model_definitions: dict[int, bytes] = {}
        self.model_definition_fetches = 0
        self.received: list[tuple[int, agent_pb2.ConnectRequest]] = []
        # The agent-link revision it answers registrations with (0: as schedulers before config_json).
        self.protocol = SCHEDULER_PROTOCOL
        self._lock = threading.Lock()
        self._streams = 0
        self._out: queue.Queue[agent_pb2.ConnectResponse | None] | None = None
        self._server: grpc.Server | None = None
        self.port = 0

    # --- server lifecycle ---
    def start(self) -> int:
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
        agent_pb2_grpc.add_AgentLinkServiceServicer_to_server(self, server)
        scheduler_pb2_grpc.add_SchedulerServiceServicer_to_server(self, server)
        self.port = server.add_insecure_port(f"127.0.0.1:{self.port}")
        assert self.port, "cannot bind the fake scheduler"
        server.start()
        self._server = server
        return self.port

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop(0).wait()
            self._server = None
        if self._out is not None:
            self._out.put(None)

    # --- services ---
    def Connect(self, request_iterator, context):  # noqa: N802
        with self._lock:
            self._streams += 1
            stream = self._streams
        out: queue.Queue[agent_pb2.ConnectResponse | None] = queue.Queue()

        def read() -> None:
            try:
                for req in request_iterator:
                    if req.WhichOneof("message") == "register":
                        out.put(
                            agent_pb2.ConnectResponse(
                                registered=agent_pb2.AgentRegistered(
                                    cluster_id="test-cluster",
                                    heartbeat_interval_seconds=HEARTBEAT_SECONDS,
                                    protocol=self.protocol,
                                )
                            )
                        )
                        self._out = out
                    with self._lock:
                        self.received.append((stream, req))
            except grpc.RpcError:
                pass
            out.put(None)

        threading.Thread(target=read, daemon=True).start()
        while context.is_active():
            try:
                msg = out.get(timeout=0.1)
            except queue.Empty:
                continue
            if msg is None:
                return
            yield msg

    def GetModelDefinition(self, request, context):  # noqa: N802
        self.model_definition_fetches += 1
        data = self.model_definitions.get(request.experiment_id)
        if data is None:
            context.abort(grpc.StatusCode.NOT_FOUND, f"experiment {request.experiment_id} not found")
        return scheduler_pb2.GetModelDefinitionResponse(
            model_definition=data, model_definition_name="my_model"
        )

    # --- test helpers ---
    def send(self, **fields: object) -> None:
        assert self._out is not None, "no agent has registered"
        self._out.put(agent_pb2.ConnectResponse(**fields))

    def messages(self, kind: str) -> list[tuple[int, agent_pb2.ConnectRequest]]:
        with self._lock:
            return [(s, m) for s, m in self.received if m.WhichOneof("message") == kind]

    def wait_for(
        self, kind: str, pred: Callable[[object], bool] = lambda _: True, count: int = 1
    ) -> list[tuple[int, object]]:
        """The first `count` messages of `kind` whose payload satisfies `pred`, as (stream, payload)."""
        deadline = time.monotonic() + WAIT_SECONDS
        while True:
            found = [(s, getattr(m, kind)) for s, m in self.messages(kind) if pred(getattr(m, kind))]
            if len(found) >= count:
                return found[:count]
            if time.monotonic() > deadline:
                raise AssertionError(f"no {count} {kind} message(s) as expected; got: {self.received[-20:]}")
            time.sleep(0.05)

    def log_lines(self, trial_id: int) -> list[tuple[str, str]]:
        return [
            (line.source, line.message)
            for _, m in self.messages("trial_logs")
            if m.trial_logs.trial_id == trial_id
            for line in m.trial_logs.lines
        ]


def pid_alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state not in ("Z", "X")


def wait_until(cond: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_SECONDS
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


class AgentProcess:
    def __init__(self, proc: subprocess.Popen[bytes], work_dir: Path, log_path: Path) -> None:
        self.proc = proc
        self.work_dir = work_dir
        self.log_path = log_path

    def trial_dir(self, trial_id: int, run_id: int) -> Path:
        return self.work_dir / "trials" / f"{trial_id}-{run_id}"

    def harness_pids(self, trial_id: int, run_id: int) -> list[int]:
        """The harness's pids as this machine sees them (a sandboxed harness writes its namespace's)."""
        path = self.trial_dir(trial_id, run_id) / "my_model" / "pids.txt"
        wait_until(lambda: path.exists() and path.read_text().endswith("\n"), f"{path}")
        return [host_pid(int(p), self.proc.pid) for p in path.read_text().split()]


def host_pid(pid: int, agent_pid: int) -> int:
    """The host pid of a descendant of `agent_pid` that is `pid` in its own PID namespace (or `pid`)."""
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            fields = dict(line.split(":", 1) for line in status.read_text().splitlines() if ":" in line)
        except OSError:
            continue
        ns = fields.get("NSpid", "").split()
        if len(ns) > 1 and int(ns[-1]) == pid and _descends_from(int(ns[0]), agent_pid):
            return int(ns[0])
    return pid


def _descends_from(pid: int, ancestor: int) -> bool:
    while pid > 1:
        if pid == ancestor:
            return True
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return False
        pid = int(stat.rsplit(")", 1)[1].split()[1])
    return False


@pytest.fixture
def scheduler() -> Iterator[FakeScheduler]:
    s = FakeScheduler()
    s.start()
    try:
        yield s
    finally:
        s.stop()


@pytest.fixture
def start_agent(scheduler: FakeScheduler, tmp_path: Path) -> Iterator[Callable[..., AgentProcess]]:
    started: list[AgentProcess] = []

    def start(*extra: str) -> AgentProcess:
        work_dir = tmp_path / "work"
        log_path = tmp_path / f"agent-{len(started)}.log"
        harness = f"{sys.executable} {HERE / 'fake_harness.py'}"
        cmd = [
            sys.executable, "-m", "pedl_agent.main",
            "--master", f"127.0.0.1:{scheduler.port}",
            "--agent-id", "agent-under-test",
            "--work-dir", str(work_dir),
            "--harness-command", harness,
            "--kill-grace", "1",
            "--keep-trial-dirs", "1h",  # the tests look into finished runs' directories
            *extra,
        ]  # fmt: skip
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        agent = AgentProcess(proc, work_dir, log_path)
        started.append(agent)
        return agent

    try:
        yield start
    finally:
        for agent in started:
            pids_files = list((agent.work_dir / "trials").glob("*/my_model/pids.txt"))
            if agent.proc.poll() is None:
                agent.proc.send_signal(signal.SIGTERM)
                try:
                    agent.proc.wait(15)
                except subprocess.TimeoutExpired:
                    os.killpg(agent.proc.pid, signal.SIGKILL)
                    agent.proc.wait()
            for f in pids_files:  # never leave a harness behind, whatever the test did
                for pid in f.read_text().split():
                    if pid_alive(int(pid)):
                        os.kill(int(pid), signal.SIGKILL)
