"""`python -m pedl.harness.zygote FD`: the agent's fork server for one Python environment.

It imports the harness and the frameworks once (torch; TensorFlow where installed and quiet on
import), then forks a fresh harness per trial run, so a short trial does not pay for `import torch`.
Each run is still a process of its own: nothing a trial does reaches the next one. Nothing that
cannot survive a fork exists here before it: no CUDA context, no Python threads, no gRPC channel.

Protocol on FD (a SOCK_SEQPACKET socket to the agent; JSON messages):
  server -> agent  {"ready": {...}} once preloaded, or {"unsafe": "why"} (then it exits)
  agent -> server  {"id": N, "box": {...} | null, "view": {...} | null} with three fds: the
                   request body (a pipe: the run's environment and working directory, read by the
                   child only, so no trial's token stays in this process for later children to
                   find), stdout, stderr
  server -> agent  {"id": N, "pid": P} or {"id": N, "error": "why"}; later {"exit": P, "code": C}
                   (C as `Popen.returncode`: negative for a signal)
With a "box" the child narrows its mounts and takes a PID namespace of its own before the harness
starts (`_namespaces`), so a harness forked inside the server's sandbox sees what a harness
sandboxed alone would. With a "view" its model directory is an overlay over the experiment's tree
the agent unpacked once (`_model_view`); "ready" says whether children can mount one here
("model_views": "overlay"), else the agent copies the tree for them.

No process here outlives the agent (see `_tie_to_parent`): the server exits when FD reads EOF (the
kernel closes the agent's end however the agent dies) and is killed with its parent (bwrap or the
agent); every process below it is killed with its parent.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import importlib
import importlib.abc
import json
import os
import select
import selectors
import signal
import socket
import sys
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any

from pedl.harness import _model_view, _namespaces
from pedl.harness._exit import flush_and_exit

# Imported before the server reports ready, in this order; each is skipped where not installed:
# what a PyTorch harness needs. torch._dynamo is what a first optimizer step imports (sympy and more:
# most of a second); importing it starts no thread. Nothing here runs an op: a thread pool started
# before fork would hang children.
PRELOAD = (
    "numpy",
    "grpc",
    "yaml",
    "pedl.harness.main",
    "pedl.harness.controllers",
    "torch",
    "torch.optim",
    "torch._dynamo",
    "pedl.pytorch",
    "pedl.pytorch._controller",
    "pedl.pytorch._optimizations",
)
# Imported later (`preload_tensorflow`), once no run has asked for a fork for a while: about half the
# server's import CPU, which a PyTorch cluster never needs, and a fork waits for an import in progress.
# TensorFlow imports scipy.linalg, whose OpenBLAS pool stops itself at fork (as numpy's does): imported
# first, so that the threads counted across TensorFlow's import are TensorFlow's own.
TENSORFLOW_COMPANIONS = ("scipy.linalg",)
TENSORFLOW = ("tensorflow", "keras", "pedl.keras", "pedl.tensorflow", "pedl.simple._controller")
# Seconds without a fork request before the server imports TensorFlow (`--tensorflow-after S`).
TENSORFLOW_AFTER_S = 5.0
MAX_MESSAGE = 1 << 16


def _thread_count() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return 0


def _import_all(names: tuple[str, ...]) -> list[str]:
    """Imports `names` in order; those installed."""
    loaded = []
    for name in names:
        try:
            importlib.import_module(name)
            loaded.append(name)
        except ImportError:
            pass
    return loaded


def _unsafe_after_imports() -> str:
    """Why forking is no longer safe after the imports so far, or ""."""
    if threading.active_count() > 1:
        return f"{threading.active_count() - 1} Python threads run after the imports"
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        return "CUDA was initialised by the imports"
    return ""


def _freeze() -> None:
    """What the imports left goes to the collector's permanent generation: a child's collections then
    never walk (and so never copy-on-write) the server's heap. Measured: a forked harness whose
    collector walked it took 40,000 page faults and 0.4 s of CPU more."""
    gc.collect()
    gc.freeze()


def _imported(loaded: list[str], started: float, threads_before: int) -> dict[str, Any]:
    """What a stage of imports reports to the agent (its log shows it)."""
    return {
        "preloaded": loaded,
        "seconds": round(time.monotonic() - started, 3),
        "threads_before": threads_before,
        "threads": _thread_count(),
    }


def preload() -> dict[str, Any]:
    """Imports what every PyTorch harness needs; {"unsafe": why} when forking would no longer be safe."""
    started = time.monotonic()
    threads = _thread_count()
    loaded = _import_all(PRELOAD)
    unsafe = _unsafe_after_imports()
    if unsafe:
        return {"unsafe": unsafe}
    _freeze()
    return {"ready": _imported(loaded, started, threads)}


def preload_tensorflow() -> dict[str, Any]:
    """Imports TensorFlow and Keras into a ready server: {"later": {...}}, or {"unsafe": why} when
    their import started threads (a child forked then could hang on a lock one of them held)."""
    started = time.monotonic()
    loaded = _import_all(TENSORFLOW_COMPANIONS)
    before = _thread_count()
    loaded += _import_all(TENSORFLOW)
    started_threads = _thread_count() - before
    if started_threads > 0:
        return {"unsafe": f"importing tensorflow started {started_threads} threads"}
    unsafe = _unsafe_after_imports()
    if unsafe:
        return {"unsafe": unsafe}
    _freeze()
    return {"later": _imported(loaded, started, before)}


def _send(sock: socket.socket, message: dict[str, Any]) -> None:
    sock.sendall(json.dumps(message).encode())


def _read_all(fd: int) -> bytes:
    chunks: list[bytes] = []
    while True:
        chunk = os.read(fd, MAX_MESSAGE)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def _tie_to_parent(parent: int = 0, lifeline: int = -1) -> None:
    """Killed (SIGKILL) when the parent exits, or exits now if it already has.

    PR_SET_PDEATHSIG needs no thread in the process (a harness stuck in C code holding the GIL dies
    too) and reaches into a PID namespace; every process here forks its children from its only,
    lifelong thread (the signal follows the thread that forked, not the process). Its gaps are
    closed here: a parent that exited before the call (the signal never comes) is seen by `parent`
    (its pid before the fork, against getppid()) or, where getppid() says nothing (a PID
    namespace's init sees 0), by EOF on `lifeline` (a pipe whose write end only the parent holds);
    and since a change of user or group clears the setting, it is made again after one."""
    _namespaces.die_with_parent(signal.SIGKILL)
    if parent and os.getppid() != parent:
        os._exit(1)
    if lifeline >= 0 and select.select([lifeline], [], [], 0)[0]:
        os._exit(1)


def _hung_up(control: socket.socket) -> bool:
    """Whether the agent's end of the control socket is closed (the agent is gone)."""
    if not select.select([control], [], [], 0)[0]:
        return False
    try:
        return control.recv(MAX_MESSAGE, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


def _exit_code(status: int) -> int:
    return os.waitstatus_to_exitcode(status)


def _apply_threads(value: str) -> None:
    """The run's OMP_NUM_THREADS, which OpenMP read when this server loaded it: torch takes it now."""
    torch = sys.modules.get("torch")
    if torch is not None and value.strip().isdigit() and int(value) > 0:
        torch.set_num_threads(int(value))


def _run_harness(env: dict[str, str], cwd: str) -> int:
    os.environ.clear()
    os.environ.update(env)
    _apply_threads(env.get("OMP_NUM_THREADS", ""))
    os.chdir(cwd)
    sys.argv = [sys.executable, "-m", "pedl.harness"]
    sys.path[0] = cwd  # as `python -m` in cwd would have it
    from pedl.harness.main import main

    return main()


def _own(path: str, uid: int, gid: int, whole: bool) -> None:
    """Gives the run's user its model directory: an overlay's top (what it writes lands in the run's
    upper directory), or the whole of a copy."""
    os.chown(path, uid, gid)
    for parent, dirs, files in os.walk(path) if whole else ():
        for name in (*dirs, *files):
            os.lchown(os.path.join(parent, name), uid, gid)


def _child(
    control: socket.socket,
    server: int,
    fds: list[int],
    box: dict[str, Any] | None,
    view: dict[str, Any] | None,
    status: int,
    wanted: int,
) -> None:
    """The forked harness (never returns): its own session, its output, its sandbox, then the trial.
    In a sandbox the harness runs two processes further down (the PID namespace's init, and this
    process waiting for it); `status` carries its exit code to the server as soon as the init has
    reaped it, so the run's end does not wait for the other two to exit in turn."""
    code = 1
    try:
        os.setsid()
        _tie_to_parent(parent=server)
        signal.set_wakeup_fd(-1)
        for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        control.close()
        body_fd, out_fd, err_fd = fds
        body = json.loads(_read_all(body_fd))
        null = os.open(os.devnull, os.O_RDONLY)
        for fd, target in ((null, 0), (out_fd, 1), (err_fd, 2)):
            os.dup2(fd, target)
        low, high = sorted((status, wanted))
        os.closerange(3, low)
        os.closerange(low + 1, high)
        os.closerange(high + 1, os.sysconf("SC_OPEN_MAX"))
        model_view = _model_view.ModelView.from_dict(view) if view is not None else None
        copied = ""
        if box is not None:
            sandbox = _namespaces.ChildSandbox.from_dict(box)
            if model_view is None:
                copied = _namespaces.narrow_mounts(sandbox)
            else:
                copied = _namespaces.narrow_mounts(
                    sandbox, model_view.lower, functools.partial(_model_view.show, model_view)
                )
            _namespaces.unshare(_namespaces.CLONE_NEWPID)
            lifeline, held = os.pipe()  # the init's view of this process (its getppid() is 0)
            pid = os.fork()
            if pid:  # waits for the namespace's init and ends as the harness did
                os.close(lifeline)
                os.close(status)
                _release_output()
                for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
                    signal.signal(sig, signal.SIG_IGN)
                _, status = os.waitpid(pid, 0)
                _exit_as(_exit_code(status))
            os.close(held)
            _tie_to_parent(lifeline=lifeline)
            _namespaces.mount_own_proc()
            if sandbox.uid >= 0 and model_view is not None:  # its model directory, as spawned
                _own(model_view.target, sandbox.uid, sandbox.gid, whole=bool(copied))
            _namespaces.drop_all_capabilities(sandbox.uid, sandbox.gid)
            _tie_to_parent(lifeline=lifeline)  # the parent may have gone meanwhile: getppid() is 0 here
            os.close(lifeline)
            harness = os.fork()
            if harness:  # PID 1, as bubblewrap's: the harness is PID 2 and dies of signals as usual
                os.close(wanted)
                _release_output()
                _init(harness, status)
            os.close(status)
            # The init's death kills every process in the namespace: no gap to close here.
            _namespaces.die_with_parent(signal.SIGKILL)
        else:
            os.close(status)  # this process is the harness: its own exit is the news
            if model_view is not None:
                copied = _model_view.show_alone(model_view)
        if copied:
            print(
                f"pedl: the model directory is a copy (no overlay could be mounted: {copied})",
                file=sys.stderr,
            )
        sys.meta_path.insert(0, _TensorflowWanted(wanted))
        code = _run_harness(body["env"], body["cwd"])
        from pedl.harness.main import exit_now

        exit_now(code)  # the user's and the frameworks' exit hooks, not module teardown
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    except BaseException:
        traceback.print_exc()
    finally:
        flush_and_exit(code)


class _TensorflowWanted(importlib.abc.MetaPathFinder):
    """Tells the server, once, that this run imports TensorFlow (its `wanted` pipe): a server that has
    not imported it yet does so at its next turn, so that the Keras runs after this one are forked with
    it loaded instead of each importing it (seconds of CPU). Finds nothing itself."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def find_spec(self, name: str, path: object = None, target: object = None) -> None:
        if name == "tensorflow" and self.fd >= 0:
            with contextlib.suppress(OSError):
                os.write(self.fd, b"t")
                os.close(self.fd)
            self.fd = -1
            with contextlib.suppress(ValueError):
                sys.meta_path.remove(self)
        return None


def _exit_as(code: int) -> None:
    """Exits with `code`, or dies of the signal a code above 128 stands for (as the harness did)."""
    if code < 0:
        code = 128 - code
    if code > 128:
        signal.signal(code - 128, signal.SIG_DFL)
        os.kill(os.getpid(), code - 128)
    os._exit(code)


def _release_output() -> None:
    """Lets go of the run's stdout and stderr: a process that only waits holds no copy, so the
    agent sees their end when the harness exits, not when the processes above it have exited too."""
    null = os.open(os.devnull, os.O_RDWR)
    for target in (1, 2):
        os.dup2(null, target)
    os.close(null)


def _init(harness: int, status: int) -> None:
    """The PID namespace's first process: passes termination signals on, reaps orphans, and exits
    as the harness did (the namespace, and whatever the harness left in it, ends with it)."""
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda number, _frame: os.kill(harness, number))
    while True:
        try:
            pid, exited = os.waitpid(-1, 0)
        except ChildProcessError:
            os._exit(1)
        if pid == harness:
            code = _exit_code(exited)
            with contextlib.suppress(OSError):  # the server is gone: nobody to tell
                os.write(status, f"{code}\n".encode())
            os._exit(code if code >= 0 else 128 - code)


def serve(
    control: socket.socket,
    later: Callable[[], dict[str, Any]] | None = None,
    after: float = TENSORFLOW_AFTER_S,
) -> None:
    """Forks a harness per request. `later` (the imports left for later) runs from this loop, never
    during a fork, once no request has come for `after` seconds or as soon as a run has imported
    TensorFlow itself; when it finds forking unsafe the server refuses further requests and exits
    once its children have."""
    children: set[int] = set()
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    selector = selectors.DefaultSelector()
    selector.register(control, selectors.EVENT_READ, "control")
    selector.register(wake_r, selectors.EVENT_READ, "wake")
    reported: set[int] = set()  # children whose exit code their init already sent
    # Runs write here when they import TensorFlow (_TensorflowWanted): `later` then runs at once.
    wanted_r, wanted_w = os.pipe()
    os.set_blocking(wanted_w, False)
    selector.register(wanted_r, selectors.EVENT_READ, "wanted")
    tensorflow_wanted = False
    last_request = time.monotonic()
    refusing = ""  # why this server forks no more (what `later` imported started threads)
    while True:
        if later is None:
            timeout = None
        elif tensorflow_wanted:
            timeout = 0.0
        else:
            timeout = max(0.0, last_request + after - time.monotonic())
        ready = selector.select(timeout)
        for key, _ in ready:
            if isinstance(key.data, int):
                continue  # below, once the control messages are handled
            if key.data == "wake":
                os.read(wake_r, 4096)
            elif key.data == "wanted":
                os.read(wanted_r, 4096)
                tensorflow_wanted = True
            else:
                message, fds, _, _ = socket.recv_fds(control, MAX_MESSAGE, 3)
                if not message:
                    return  # the agent is gone
                last_request = time.monotonic()
                request = json.loads(message)
                if refusing:
                    _send(control, {"id": request.get("id"), "error": f"forking is unsafe there: {refusing}"})
                elif len(fds) != 3:
                    _send(control, {"id": request.get("id"), "error": f"expected 3 fds, got {len(fds)}"})
                else:
                    server = os.getpid()
                    status_r, status_w = os.pipe()
                    pid = os.fork()
                    if pid == 0:
                        os.close(status_r)
                        _child(
                            control, server, fds, request.get("box"), request.get("view"), status_w, wanted_w
                        )
                    os.close(status_w)
                    selector.register(status_r, selectors.EVENT_READ, pid)
                    children.add(pid)
                    _send(control, {"id": request["id"], "pid": pid})
                for fd in fds:
                    os.close(fd)
        for key, _ in ready:
            if isinstance(key.data, int):  # a harness's exit code, ahead of its process chain's exit
                code = os.read(key.fd, 64).strip()
                selector.unregister(key.fd)
                os.close(key.fd)
                if code and key.data in children:
                    reported.add(key.data)
                    _send(control, {"exit": key.data, "code": int(code)})
        for pid in list(children):
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                children.discard(pid)
                if pid not in reported:
                    _send(control, {"exit": pid, "code": _exit_code(status)})
                reported.discard(pid)
        if later is not None and (tensorflow_wanted or time.monotonic() - last_request >= after):
            verdict = later()
            later = None
            _send(control, verdict)
            refusing = verdict.get("unsafe", "")
        if refusing and not children:
            return


def _seconds_after(options: list[str]) -> float:
    """`--tensorflow-after S` (the agent's --preload-tensorflow-after), else the default."""
    if "--tensorflow-after" in options[:-1]:
        return float(options[options.index("--tensorflow-after") + 1])
    return TENSORFLOW_AFTER_S


def main() -> int:
    _namespaces.die_with_parent(signal.SIGKILL)  # with the agent, or bwrap (--die-with-parent)
    control = socket.socket(fileno=int(sys.argv[1]))
    if _hung_up(control):
        return 1  # the agent died before PR_SET_PDEATHSIG was in place (later, `serve` reads EOF)
    # Before the imports: the probe forks, which is safe only while no thread runs. HOME is the agent's
    # trials directory, where the runs' overlays keep their changes.
    overlay = _model_view.probe(sandboxed="--sandboxed" in sys.argv[2:], near=os.environ.get("HOME"))
    options = sys.argv[2:]
    verdict = preload()
    if "ready" in verdict:
        verdict["ready"]["model_views"] = "overlay" if not overlay else f"copies ({overlay})"
    _send(control, verdict)
    if "unsafe" in verdict:
        return 3
    try:
        later = None if "--no-tensorflow" in options else preload_tensorflow
        serve(control, later, _seconds_after(options))
    except (BrokenPipeError, ConnectionResetError):
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
