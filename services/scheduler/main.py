"""`pedl-scheduler`: the master process."""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import signal
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import structlog

from pedl import _grpc
from pedl._log import configure_logging
from pedl.config.image_environments import parse_image_rules
from pedl.v1 import agent_pb2, agent_pb2_grpc, scheduler_pb2, scheduler_pb2_grpc
from pedl_checkpoint_store.s3_allow import AWS, S3Allowance
from pedl_checkpoint_store.storage_roots import DEFAULT_ROOT, parse_roots, resolved_roots
from pedl_scheduler import db_health, db_restart, init_home, master_config, metrics, security
from pedl_scheduler.agent_link import AgentLink
from pedl_scheduler.api import SchedulerApi
from pedl_scheduler.checkpoint_reconciler import CheckpointReconciler
from pedl_scheduler.cluster import CLOSE_STREAM, Cluster
from pedl_scheduler.experiments import ExperimentManager
from pedl_scheduler.experiments.restart_policy import RestartBackoff
from pedl_scheduler.request_limits import RequestLimits
from pedl_scheduler.slurm import options as slurm_options
from pedl_scheduler.storage import DatabaseUnavailable, open_storage
from pedl_scheduler.storage.ops import agents as agent_ops

METRICS_PORT = 9464  # the Prometheus exporter port OpenTelemetry uses; 9090 is Prometheus's own


def _env(name: str, default: str) -> str:
    return os.environ.get(f"PEDL_SCHEDULER_{name}", default)


def _bind_roots(args: argparse.Namespace) -> list[Path] | None:
    roots = parse_roots(args.allowed_bind_root, _env("ALLOWED_BIND_ROOT", ""))
    return resolved_roots(roots) if roots else None


def _allowed_s3(args: argparse.Namespace) -> S3Allowance:
    def listed(values: list[str], name: str) -> list[str]:
        return [v for v in values if v] or [v for v in _env(name, "").split(",") if v.strip()]

    return S3Allowance.of(
        listed(args.allowed_s3_bucket, "ALLOWED_S3_BUCKET"),
        listed(args.allowed_s3_endpoint, "ALLOWED_S3_ENDPOINT") or [AWS],
    )


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="pedl-scheduler",
        description="The pedl scheduler (master).",
        epilog="`pedl-scheduler init --home DIR` writes the cluster secret and the first admin's password "
        "(and TLS files) this command's flags then name.",
    )
    p.add_argument("--host", default=_env("HOST", "127.0.0.1"))
    p.add_argument("--port", type=int, default=int(_env("PORT", "8080")), help="0 picks a free port")
    p.add_argument(
        "--db",
        default=_env("DB", str(Path("~/.pedl/pedl.db").expanduser())),
        help="SQLite file path (or sqlite:///path), or postgresql://user:password@host:port/db",
    )
    p.add_argument(
        "--checkpoint-store",
        default=_env("CHECKPOINT_STORE", "127.0.0.1:8090"),
        help="address of the checkpoint store, handed to harnesses and clients",
    )
    p.add_argument(
        "--port-file", default=_env("PORT_FILE", ""), help="write the bound port here once serving"
    )
    p.add_argument(
        "--allowed-storage-root",
        action="append",
        default=[],
        metavar="DIR",
        help="a directory under which experiments' shared_fs checkpoint_storage.host_path may lie "
        "(symlinks followed), checked at experiment create; repeatable, or env "
        f"PEDL_SCHEDULER_ALLOWED_STORAGE_ROOT joined by '{os.pathsep}' (default: the checkpoint "
        f"store's default root {DEFAULT_ROOT}; list the store's --storage-path and "
        "--allowed-storage-root here too)",
    )
    p.add_argument(
        "--allowed-bind-root",
        action="append",
        default=[],
        metavar="DIR",
        help="a directory under which experiments' bind_mounts may name host paths, checked at "
        "experiment create; repeatable, or env PEDL_SCHEDULER_ALLOWED_BIND_ROOT joined by "
        f"'{os.pathsep}' (default: not checked here; give the agents' --allowed-bind-root list)",
    )
    p.add_argument(
        "--allowed-s3-bucket",
        action="append",
        default=[],
        metavar="BUCKET",
        help="an S3 bucket experiments' checkpoint_storage may name, checked at experiment create; "
        "repeatable, or env PEDL_SCHEDULER_ALLOWED_S3_BUCKET joined by ',' (default none: experiments "
        "use the store's own storage; list the store's --allowed-s3-bucket here too)",
    )
    p.add_argument(
        "--allowed-s3-endpoint",
        action="append",
        default=[],
        metavar="URL",
        help="an S3 endpoint_url experiments may name ('aws': AWS's own); repeatable, or env "
        "PEDL_SCHEDULER_ALLOWED_S3_ENDPOINT joined by ',' (default 'aws')",
    )
    p.add_argument("--heartbeat-interval", type=float, default=float(_env("HEARTBEAT_INTERVAL", "5")))
    p.add_argument("--heartbeat-timeout", type=float, default=float(_env("HEARTBEAT_TIMEOUT", "30")))
    p.add_argument(
        "--agent-reconnect-grace",
        type=float,
        default=float(_env("AGENT_RECONNECT_GRACE", "30")),
        help="seconds a disconnected agent's trials wait for it to reconnect before they restart elsewhere",
    )
    p.add_argument(
        "--image-environment",
        action="append",
        default=[],
        metavar="PATTERN=NAME",
        help="run configs whose environment.image matches PATTERN (shell-style, e.g. '*tf-2.8*'; "
        "first match wins) in the agents' Python environment NAME (pedl-agent --environment "
        "NAME=PYTHON); repeatable. A config naming its environment keeps it",
    )
    p.add_argument(
        "--restart-backoff",
        type=float,
        default=float(_env("RESTART_BACKOFF", "1")),
        metavar="SECONDS",
        help="wait before a failed trial's first restart; each further restart in a row waits twice as "
        "long (times a random 0.5-1), up to --restart-backoff-max (default 1; 0 restarts at once)",
    )
    p.add_argument(
        "--restart-backoff-max",
        type=float,
        default=float(_env("RESTART_BACKOFF_MAX", "60")),
        metavar="SECONDS",
        help="the longest wait before a restart (default 60)",
    )
    p.add_argument(
        "--db-check-interval",
        type=float,
        default=float(_env("DB_CHECK_INTERVAL", "2")),
        metavar="SECONDS",
        help="seconds between pings of the database; while it is unreachable the gRPC health check "
        "answers NOT_SERVING, and SERVING once it is back (default 2)",
    )
    p.add_argument("--tick", type=float, default=float(_env("TICK", "0.5")), help="scheduling tick, seconds")
    p.add_argument("--model-definition-limit-mb", type=float, default=float(_env("MODEL_DEF_LIMIT_MB", "96")))
    p.add_argument("--log-level", default=_env("LOG_LEVEL", "info"))
    p.add_argument(
        "--metrics-host", default=_env("METRICS_HOST", "127.0.0.1"), help="Prometheus endpoint host"
    )
    p.add_argument(
        "--metrics-port",
        type=int,
        default=int(_env("METRICS_PORT", "-2")),
        help=f"Prometheus /metrics port; 0 picks a free port, -1 turns it off (default {METRICS_PORT}, "
        "skipped with a warning when taken)",
    )
    p.add_argument(
        "--metrics-token-file",
        default=_env("METRICS_TOKEN_FILE", ""),
        metavar="FILE",
        help="/metrics then needs `Authorization: Bearer <this file's text>`; without it, the cluster "
        "secret is the token (with --no-auth, /metrics is open: keep --metrics-host on 127.0.0.1)",
    )
    p.add_argument(
        "--metrics-port-file", default=_env("METRICS_PORT_FILE", ""), help="write the metrics port here"
    )
    p.add_argument(
        "--checkpoint-reconcile-interval",
        type=float,
        default=float(_env("CHECKPOINT_RECONCILE_INTERVAL", "300")),
        help="seconds between comparisons of the checkpoint records with the store's listing (the "
        "first runs at start-up: it finishes deletions a crash interrupted)",
    )
    p.add_argument(
        "--orphan-checkpoint-grace",
        type=float,
        default=float(_env("ORPHAN_CHECKPOINT_GRACE", "3600")),
        help="seconds a stored checkpoint without a record may wait to be recorded before it counts as "
        "an orphan (deleted once its experiment is gone or ended)",
    )
    security.add_arguments(p)
    RequestLimits.add_arguments(p)
    slurm_options.add_arguments(p)
    args = p.parse_args(argv)
    try:
        args.slurm = slurm_options.from_args(args)
    except ValueError as e:
        p.error(str(e))
    if args.checkpoint_reconcile_interval <= 0:
        p.error(f"--checkpoint-reconcile-interval must be > 0, got {args.checkpoint_reconcile_interval}")
    if not 0 < args.db_check_interval < float("inf"):
        p.error(f"--db-check-interval must be a number of seconds > 0, got {args.db_check_interval}")
    if args.orphan_checkpoint_grace < 0:
        p.error(f"--orphan-checkpoint-grace must be >= 0, got {args.orphan_checkpoint_grace}")
    try:
        args.request_limits = RequestLimits.from_args(args)
        args.image_rules = parse_image_rules(args.image_environment)
    except ValueError as e:  # LimitExceeded is one
        p.error(str(e))
    for flag in ("restart_backoff", "restart_backoff_max"):
        value = getattr(args, flag)
        if not 0 <= value < float("inf"):
            p.error(f"--{flag.replace('_', '-')} must be a number of seconds >= 0, got {value}")
    return args


def _start_metrics(
    args: argparse.Namespace, manager: ExperimentManager, secret: str | None, log: Any
) -> Callable[[], None]:
    """Serves /metrics; a taken DEFAULT port only warns, so several local schedulers can coexist."""
    if args.metrics_port == -1:
        return lambda: None
    token = metrics_token(args, secret)
    port = METRICS_PORT if args.metrics_port == -2 else args.metrics_port
    if not 0 <= port < 65536:
        raise SystemExit(f"--metrics-port must be 0..65535 or -1, got {args.metrics_port}")
    try:
        bound, stop = metrics.serve_metrics(manager, args.metrics_host, port, token)
    except OSError as e:
        if args.metrics_port != -2:
            raise SystemExit(f"cannot serve metrics on {args.metrics_host}:{port}: {e}") from None
        log.warning("metrics endpoint not started", port=port, error=str(e))
        return lambda: None
    if args.metrics_port_file:
        tmp = Path(args.metrics_port_file + ".tmp")
        tmp.write_text(str(bound))
        tmp.replace(args.metrics_port_file)
    log.info("metrics serving", address=f"http://{args.metrics_host}:{bound}/metrics")
    return stop


def metrics_token(args: argparse.Namespace, secret: str | None) -> str | None:
    """What a scrape must present: the token file's text, else the cluster secret (None: open)."""
    if not args.metrics_token_file:
        return secret
    try:
        token = Path(args.metrics_token_file).read_text().strip()
    except OSError as e:
        raise SystemExit(f"pedl-scheduler: error: cannot read --metrics-token-file: {e}") from None
    if not token:
        raise SystemExit(f"pedl-scheduler: error: --metrics-token-file {args.metrics_token_file} is empty")
    return token


def receive_limit(args: argparse.Namespace) -> int:
    """The largest message the scheduler takes: a create at its model definition and config limits,
    with headroom for the request's other fields (and for agents' batches of results and logs)."""
    return max(
        int(args.model_definition_limit_mb * 2**20) + args.request_limits.max_config_bytes + 2**20,
        64 * 2**20,
    )


async def _scheduling_loop(manager: ExperimentManager, cluster: Cluster, tick: float, timeout: float) -> None:
    """Acts on scheduling decisions in ticks: woken early by events, at least once per `tick`.

    Agent messages schedule right away themselves (Dispatcher.on_agent_messages) and clear
    `wake`; a wake-up they already handled is skipped until the tick is due.
    """
    log = structlog.get_logger(component="scheduler")
    loop = asyncio.get_running_loop()
    due = loop.time() + tick
    while True:
        try:
            await asyncio.wait_for(manager.wake.wait(), timeout=max(0.0, due - loop.time()))
        except asyncio.TimeoutError:
            pass
        if not manager.wake.is_set() and loop.time() < due:
            continue
        manager.wake.clear()
        due = loop.time() + tick
        now = time.monotonic()
        for agent in list(cluster.agents.values()):
            if now - agent.last_seen > timeout:
                log.warning("agent missed heartbeats", agent_id=agent.id)
                agent.send(CLOSE_STREAM)
        try:
            manager.rooms.tick(now)
        except DatabaseUnavailable:
            pass  # the database health watcher says so, once; the next tick tries again
        except Exception:
            log.exception("scheduling tick failed")


def _start_slurm_pools(
    args: argparse.Namespace, manager: ExperimentManager, master: str
) -> asyncio.Task | None:
    """Submits pilot jobs for the Slurm pools (--resource-pool NAME=slurm:PARTITION), if any."""
    if not args.slurm.pools:
        return None
    from pedl_scheduler.slurm.service import SlurmPools

    pools = SlurmPools(manager, args.slurm, master)
    return asyncio.create_task(pools.run_forever())


async def serve(args: argparse.Namespace) -> None:
    log = configure_logging("scheduler", args.log_level)
    db = open_storage(args.db)
    try:
        sec = security.setup(args, db)
    except security.auth.AuthConfigError as e:
        db.close()
        raise SystemExit(f"pedl-scheduler: error: {e}") from None
    cluster = Cluster()
    cluster.restore_disabled(agent_ops.disabled(db))
    manager = ExperimentManager(
        db,
        cluster,
        args.checkpoint_store,
        int(args.model_definition_limit_mb * 1024 * 1024),
        reconnect_grace=args.agent_reconnect_grace,
        restart_backoff=RestartBackoff(args.restart_backoff, args.restart_backoff_max),
        request_limits=args.request_limits,
        image_rules=args.image_rules,
    )
    manager.cluster_secret = sec.secret
    manager.state.trial_token_ttl_seconds = sec.trial_token_ttl_seconds
    manager.rooms.recover()
    cluster_id = str(uuid.uuid5(uuid.NAMESPACE_URL, db.url))
    roots = parse_roots(args.allowed_storage_root, _env("ALLOWED_STORAGE_ROOT", "")) or [str(DEFAULT_ROOT)]
    api = SchedulerApi(
        manager,
        cluster,
        cluster_id,
        storage_roots=resolved_roots(roots),
        private=sec.private_experiments,
        allowed_s3=_allowed_s3(args),
        master_config=master_config.settings(args),
        bind_roots=_bind_roots(args),
    )
    link = AgentLink(manager, cluster, cluster_id, args.heartbeat_interval)
    server, port = _grpc.aio_server(
        [
            lambda s: scheduler_pb2_grpc.add_SchedulerServiceServicer_to_server(api, s),
            lambda s: agent_pb2_grpc.add_AgentLinkServiceServicer_to_server(link, s),
            *sec.register,
        ],
        [
            _grpc.service_name(scheduler_pb2, "SchedulerService"),
            _grpc.service_name(agent_pb2, "AgentLinkService"),
            *sec.service_names,
        ],
        f"{args.host}:{args.port}",
        interceptors=[
            metrics.RpcMetricsInterceptor(),
            *sec.interceptors,
            db_health.DatabaseErrorInterceptor(),
        ],
        tls=sec.tls,
        max_receive_bytes=receive_limit(args),
    )
    stop_metrics = _start_metrics(args, manager, sec.secret, log)
    # What is loaded by now (modules, SQLAlchemy's compiled statements and tables, recovered state)
    # lives as long as the process: frozen, full collections no longer walk it. They did on every
    # burst of new objects: creating 10,000 trials (benchmarks/trial_creation.py, SQLite) took
    # 0.37-0.38 s CPU with SQLAlchemy's objects in the heap against 0.31-0.33 before the storage
    # layer, 0.27-0.30 frozen (same run). The cost: recovered objects that later become cyclic
    # garbage stay until exit.
    gc.collect()
    gc.freeze()
    await server.start()
    await _grpc.mark_serving(server)
    db.on_lost_writes = lambda reason: db_restart.wait_then_restart(
        args.db, port, reason, args.db_check_interval
    )
    if args.port_file:
        tmp = Path(args.port_file + ".tmp")
        tmp.write_text(str(port))
        tmp.replace(args.port_file)
    log.info(
        "scheduler serving",
        address=f"{args.host}:{port}",
        db=db.url,
        auth=not args.no_auth,
        tls=bool(sec.tls),
    )
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    ticker = asyncio.create_task(_scheduling_loop(manager, cluster, args.tick, args.heartbeat_timeout))
    reconciler = CheckpointReconciler(
        db, manager.deleter, manager.checkpoints.mark, args.orphan_checkpoint_grace
    )
    reconciling = asyncio.create_task(reconciler.run_forever(args.checkpoint_reconcile_interval))
    watching = asyncio.create_task(db_health.watch_database(server, db, args.db_check_interval))
    slurm_pools = _start_slurm_pools(args, manager, f"{args.host}:{port}")
    await stop.wait()
    log.info("scheduler stopping")
    ticker.cancel()
    reconciling.cancel()
    watching.cancel()
    if slurm_pools is not None:
        slurm_pools.cancel()
    for agent in list(cluster.agents.values()):
        agent.send(CLOSE_STREAM)
    await server.stop(grace=2)
    link.inbox.drain()
    link.inbox.close()
    stop_metrics()
    db.close()


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["init"]:
        init_home.main(argv[1:])
        return
    asyncio.run(serve(parse_args(argv)))


if __name__ == "__main__":
    main()
