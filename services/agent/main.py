"""`pedl-agent`: run trials on this machine for a pedl scheduler."""

from __future__ import annotations

import asyncio
import faulthandler
import os
import shutil
import signal
import socket
import tempfile
from pathlib import Path

import structlog

from pedl import auth
from pedl._log import configure_logging
from pedl.cluster.paths import harness_warm_file, pedl_home

from .agent import Agent
from .config import DEFAULT_ENVIRONMENT, AgentConfig, local_address, parse_args
from .credentials import harness_environment
from .devices import detect_gpus, make_slots
from .disk import TrialDirs
from .drain import drain_when_asked
from .fork_server import ForkServers
from .link import SchedulerLink
from .model_definitions import ModelDefinitionCache
from .model_trees import ModelTrees
from .outbox import Outbox
from .pids_cgroup import ProcessLimit
from .ranks import DISTRIBUTED_ENV
from .run_settings import RunSettings
from .sandbox import make_sandbox
from .trial_run import TrialRun
from .version import AGENT_VERSION, IncompatibleScheduler

# Unix socket paths must stay under ~104 bytes; "<trial>-<run>.sock" needs up to 24 more.
MAX_SOCKET_DIR_CHARS = 100 - 24
# After the runs are killed on shutdown, how long to try to send their exits before closing.
SHUTDOWN_FLUSH_SECONDS = 3.0


def _socket_dir(work_dir: Path) -> tuple[Path, bool]:
    """Where the HarnessService sockets go, and whether it is a private temp dir to remove at exit."""
    preferred = work_dir / "sock"
    if len(str(preferred)) <= MAX_SOCKET_DIR_CHARS:
        preferred.mkdir(parents=True, exist_ok=True)
        return preferred, False
    base = "/tmp" if Path("/tmp").is_dir() else None
    return Path(tempfile.mkdtemp(prefix="pedl-", dir=base)), True


def _hidden_paths(cfg: AgentConfig, sock_dir: Path) -> list[Path]:
    """What no sandboxed trial may see: the agent's home, state, sockets and secret, and --hide-path."""
    hidden = [pedl_home(), cfg.work_dir, sock_dir, *cfg.hide_paths]
    if cfg.cluster_secret_file:
        hidden.append(Path(cfg.cluster_secret_file))
    return hidden


def _readable_paths(cfg: AgentConfig) -> list[Path]:
    """Files harnesses need even when they lie under a hidden path or outside the trial's view: the CA
    bundle they verify with, and scripts an operator's --harness-command names (`python /opt/h.py`)."""
    scripts = [
        Path(arg)
        for argv in cfg.environment_argvs().values()
        for arg in argv[1:]
        if os.path.isabs(arg) and os.path.isfile(arg)
    ]
    return ([Path(cfg.tls_ca)] if cfg.tls_ca else []) + scripts


async def run_agent(cfg: AgentConfig) -> None:
    log = configure_logging("agent", cfg.log_level).bind(agent_id=cfg.agent_id)
    auth.configure_process(credential=cfg.cluster_secret, tls_ca=cfg.tls_ca or None)
    if cfg.tls_ca:
        os.environ[auth.ENV_TLS_CA] = cfg.tls_ca  # harnesses inherit it for the checkpoint store
    if cfg.cluster_secret is None:
        log.warning("no cluster secret configured: only a scheduler with --no-auth accepts this agent")
    cfg.work_dir.mkdir(parents=True, exist_ok=True)
    harness_warm_file(cfg.work_dir).unlink(missing_ok=True)  # an earlier agent's, until warm again
    gpus = detect_gpus()
    slots = make_slots(gpus, cfg.cpu_slots)
    sock_dir, remove_sock_dir = _socket_dir(cfg.work_dir)
    sandbox = make_sandbox(
        cfg.isolation,
        _hidden_paths(cfg, sock_dir),
        bool(gpus),
        _readable_paths(cfg),
        cfg.bind_paths,
        [argv[0] for argv in cfg.environment_argvs().values()],
        cfg.trial_user,
        cfg.bind_roots,
    )
    if sandbox is None:
        log.warning(
            "--isolation none: harnesses run unsandboxed and can read and write whatever this agent "
            "can (its work dir, other trials, $PEDL_HOME, the cluster secret file)"
        )
    # Before the agent starts any process: on cgroup v2 it may have to move itself (pids_cgroup.py).
    trials_as_root = sandbox is None and os.geteuid() == 0
    process_limit = ProcessLimit.for_agent(cfg.trial_pids_limit, len(slots), trials_as_root)
    model_trees = ModelTrees(
        ModelDefinitionCache(cfg.master, cfg.work_dir / "model_definitions"),
        cfg.work_dir / "model_definitions" / "trees",
    )
    fork_servers = None
    if cfg.harness_start == "fork":
        env = harness_environment(os.environ, cfg.work_dir / "trials", DISTRIBUTED_ENV)
        env["PYTHONUNBUFFERED"] = "1"
        fork_servers = ForkServers(
            cfg.environment_argvs(),
            env,
            sandbox,
            cfg.work_dir / "trials",
            sock_dir,
            model_trees.root,
            preload_tensorflow=cfg.preload_tensorflow,
            tensorflow_after=cfg.preload_tensorflow_after_seconds,
        )
        warmed = await fork_servers.warm(DEFAULT_ENVIRONMENT)
        warmed.add_done_callback(lambda f: None if f.cancelled() else _mark_warm(cfg.work_dir))
    else:
        _mark_warm(cfg.work_dir)
    outbox = Outbox()
    address = cfg.address or local_address(cfg.master)
    settings = RunSettings(
        harness_argv=cfg.harness_argv(),
        work_dir=cfg.work_dir,
        socket_dir=sock_dir,
        model_definitions=model_trees,
        send=outbox.put,
        kill_grace_seconds=cfg.kill_grace_seconds,
        store_retry_budget_seconds=cfg.store_retry_budget_seconds,
        max_log_line_bytes=cfg.max_log_line_bytes,
        gpus=gpus,
        cpu_slots=0 if gpus else len(slots),
        environments=cfg.environment_argvs(),
        address=address,
        sandbox=sandbox,
        disk_limit_bytes=cfg.trial_disk_limit_bytes,
        disk_poll_seconds=cfg.trial_disk_poll_seconds,
        trial_dirs=TrialDirs(
            cfg.work_dir / "trials", cfg.keep_failed_trial_dirs_seconds, cfg.keep_trial_dirs_seconds
        ),
        log_limit_bytes=cfg.trial_log_limit_bytes,
        log_file_bytes=cfg.trial_log_file_bytes,
        load_timeout_seconds=cfg.trial_load_timeout_seconds,
        idle_timeout_seconds=cfg.trial_idle_timeout_seconds,
        process_limit=process_limit,
        fork_servers=fork_servers,
    )
    agent = Agent(
        agent_id=cfg.agent_id,
        slots=slots,
        hostname=socket.gethostname(),
        address=address,
        resource_pool=cfg.resource_pool,
        label=cfg.label,
        run_factory=lambda start: TrialRun(start, settings),
        result_pending=outbox.has_result,
        environments=settings.environment_names(),
        isolation=cfg.isolation,
    )
    link = SchedulerLink(cfg.master, agent, outbox, cfg.reconnect_backoff_cap_seconds)
    log.info(
        "agent starting",
        master=cfg.master,
        slots=[s.id for s in slots],
        work_dir=str(cfg.work_dir),
        harness=cfg.harness_argv(),
        environments=cfg.environments,
        isolation=cfg.isolation,
        address=address,
        harness_start=cfg.harness_start,
        version=AGENT_VERSION,
        process_limit=process_limit.plan.mechanism,
    )

    stop_requested = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop_requested.set)
    drain_requested = asyncio.Event()  # SIGUSR2: checkpoint and stop the trials, then exit
    loop.add_signal_handler(signal.SIGUSR2, drain_requested.set)
    link_stop = asyncio.Event()
    link_task = asyncio.ensure_future(link.run(link_stop))
    trial_dirs = settings.trial_dirs
    assert trial_dirs is not None
    sweeper = asyncio.ensure_future(
        trial_dirs.sweep_forever(lambda: [trial_dirs.root / f"{t}-{r}" for t, r in list(agent.runs)])
    )
    tree_sweeper = asyncio.ensure_future(model_trees.sweep_forever())
    idle_watch = asyncio.ensure_future(
        _exit_when_idle(agent, link, cfg.exit_when_idle_seconds, stop_requested)
    )
    drain_watch = asyncio.ensure_future(
        drain_when_asked(agent.runs, outbox, drain_requested, stop_requested, _drain_reason(cfg.agent_id))
    )
    try:
        stopping = asyncio.ensure_future(stop_requested.wait())
        await asyncio.wait([stopping, link_task], return_when=asyncio.FIRST_COMPLETED)
        stopping.cancel()
        log.info("agent stopping", running_trials=len(agent.runs))
        await agent.shutdown(f"the agent {cfg.agent_id} shut down while the trial ran")
        if link.connected.is_set():
            await outbox.drained(SHUTDOWN_FLUSH_SECONDS)
    finally:
        sweeper.cancel()
        tree_sweeper.cancel()
        idle_watch.cancel()
        drain_watch.cancel()
        link_stop.set()
        try:
            await asyncio.wait_for(link_task, 5.0)
        except (asyncio.TimeoutError, asyncio.CancelledError):
            link_task.cancel()
        except IncompatibleScheduler:
            pass  # raised again below, after the clean-up
        if fork_servers is not None:
            await fork_servers.close()
        if remove_sock_dir:
            shutil.rmtree(sock_dir, ignore_errors=True)
        await asyncio.to_thread(process_limit.close)
        log.info("agent stopped")
    refused = link_task.exception() if link_task.done() and not link_task.cancelled() else None
    if refused is not None:
        raise refused  # IncompatibleScheduler, which main() prints


def _mark_warm(work_dir: Path) -> None:
    """Trials now start warm here (`harness_warm_file`): what `pedl cluster up` waits for."""
    harness_warm_file(work_dir).write_text("")


def _drain_reason(agent_id: str) -> str:
    if agent_id.startswith("slurm-"):
        return f"agent {agent_id} leaves: its Slurm job nears its walltime"
    return f"agent {agent_id} leaves (SIGUSR2)"


async def _exit_when_idle(agent: Agent, link: SchedulerLink, seconds: float, stop: asyncio.Event) -> None:
    """Sets `stop` once the agent, registered, has run no trial for `seconds` (a pilot job ends)."""
    if seconds <= 0:
        return
    log = structlog.get_logger(component="agent")
    loop = asyncio.get_running_loop()
    idle_since = loop.time()
    while not stop.is_set():
        await asyncio.sleep(min(1.0, seconds))
        if agent.runs or not link.connected.is_set():
            idle_since = loop.time()
        elif loop.time() - idle_since >= seconds:
            log.info("agent idle; exiting", idle_seconds=seconds)
            stop.set()


def main(argv: list[str] | None = None) -> int:
    cfg = parse_args(argv)
    faulthandler.register(signal.SIGUSR1, all_threads=True)  # `kill -USR1` shows where a stuck agent is
    try:
        asyncio.run(run_agent(cfg))
    except (ValueError, IncompatibleScheduler) as e:  # bad settings, or a scheduler it cannot work with
        print(f"pedl-agent: error: {e}", flush=True)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
