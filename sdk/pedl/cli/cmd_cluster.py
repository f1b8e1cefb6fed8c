"""`pedl cluster up|down|status`: a local cluster as background processes, kept running by a supervisor."""

from __future__ import annotations

import argparse

from pedl.cli.arguments import metrics_port, non_negative_int, port, positive_int
from pedl.cli.errors import CliError
from pedl.cluster.paths import DEFAULT_TRIAL_DISK_LIMIT


def register(cluster: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    """Adds the group's commands to its parser (pedl.cli.main makes the parser, names and help)."""
    commands = cluster.add_subparsers(dest="command", required=True, metavar="COMMAND")

    up = commands.add_parser(
        "up",
        parents=[common],
        help="start a checkpoint store, a scheduler and agents on this machine",
        description="Start a checkpoint store, a scheduler, a web UI and agents on 127.0.0.1 (no TLS). "
        "Experiments whose checkpoint_storage is S3 need the bucket (and a non-AWS endpoint) allowed "
        "with --allowed-s3-bucket/--allowed-s3-endpoint, and S3 credentials in this shell's "
        "environment, which the services inherit: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, "
        "AWS_DEFAULT_REGION (and AWS_ENDPOINT_URL for MinIO and the like), or a profile in ~/.aws.",
    )
    up.add_argument("--agents", type=non_negative_int, default=1, help="number of agents (default 1)")
    up.add_argument("--slots-per-agent", type=positive_int, default=1, help="slots per agent (default 1)")
    up.add_argument("--port", type=port, default=8080, help="scheduler port (default 8080; 0 = any free)")
    up.add_argument("--store-port", type=port, default=8090, help="checkpoint store port (default 8090)")
    up.add_argument("--webui-port", type=port, default=8100, help="web UI port (default 8100; 0 = any free)")
    up.add_argument(
        "--metrics-port",
        type=metrics_port,
        default=-2,
        help="the scheduler's Prometheus /metrics port (default 9464, skipped with a warning when another "
        "cluster holds it; 0 = any free; -1 = none)",
    )
    up.add_argument(
        "--allowed-s3-bucket",
        action="append",
        default=[],
        metavar="BUCKET",
        help="an S3 bucket experiments' checkpoint_storage may name (repeatable; default none)",
    )
    up.add_argument(
        "--allowed-storage-root",
        action="append",
        default=[],
        metavar="DIR",
        help="a directory shared_fs checkpoint_storage (host_path/storage_path) may lie in, besides the "
        "cluster's own checkpoints directory (repeatable; default none): the operator's choice, since "
        "the services write there as this user",
    )
    up.add_argument(
        "--trial-disk-limit",
        default=DEFAULT_TRIAL_DISK_LIMIT,
        metavar="SIZE",
        help="most disk one trial run may fill (its directory and /tmp), passed to each agent "
        f"(pedl-agent --trial-disk-limit; default {DEFAULT_TRIAL_DISK_LIMIT}, 0: no limit)",
    )
    up.add_argument(
        "--allowed-s3-endpoint",
        action="append",
        default=[],
        metavar="URL",
        help="an S3 endpoint_url experiments may name, e.g. http://127.0.0.1:9000 ('aws': AWS's own, "
        "the default); repeatable",
    )
    _home_argument(up)
    up.set_defaults(func=cluster_up)

    down = commands.add_parser(
        "down", parents=[common], help="stop the local cluster started by `cluster up`"
    )
    _home_argument(down)
    down.set_defaults(func=cluster_down)

    status = commands.add_parser(
        "status", parents=[common], help="each service of the local cluster: pid, uptime, restarts"
    )
    _home_argument(status)
    status.set_defaults(func=cluster_status)


def _home_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--home", help="state directory (default: $PEDL_HOME, else ~/.pedl)")


def cluster_up(args: argparse.Namespace) -> int:
    from pedl.cluster import credentials
    from pedl.cluster.launcher import ClusterError, UpOptions, down_command, up
    from pedl.cluster.paths import ClusterPaths, pedl_home

    home = pedl_home(args.home)
    options = UpOptions(
        home=home,
        agents=args.agents,
        slots_per_agent=args.slots_per_agent,
        port=args.port,
        store_port=args.store_port,
        webui_port=args.webui_port,
        metrics_port=args.metrics_port,
        allowed_s3_buckets=tuple(args.allowed_s3_bucket),
        allowed_s3_endpoints=tuple(args.allowed_s3_endpoint),
        allowed_storage_roots=tuple(args.allowed_storage_root),
        trial_disk_limit=args.trial_disk_limit,
    )
    try:
        state = up(options, out=lambda line: print(line, flush=True))
    except ClusterError as e:
        raise CliError(f"cluster up failed: {e}") from e
    home_line = "" if home == pedl_home(None) else f"  export PEDL_HOME={home}  # has the login (auth.json)\n"
    print(
        f"pedl cluster is up: master at {state.master}, checkpoint store at {state.checkpoint_store}, "
        f"{args.agents} agent(s) with {args.slots_per_agent} slot(s) each.\n"
        f"Web UI: {state.webui} (log in as {credentials.ADMIN}, password in "
        f"{credentials.admin_password_file(ClusterPaths(home))})\n"
        f"Use it from this shell with:\n"
        f"  export PEDL_MASTER={state.master}\n"
        f"{home_line}"
        f"Determined's own `det` and SDK (pip install determined) use its REST API, on the web UI's port:\n"
        f"  export DET_MASTER={state.webui.rstrip('/')}\n"
        f"Logs and state are in {home / 'cluster'}; a supervisor restarts a service that dies "
        f"(`{down_command(home).replace(' down', ' status')}`); stop it with `{down_command(home)}`"
    )
    return 0


def cluster_down(args: argparse.Namespace) -> int:
    from pedl.cluster.launcher import ClusterError, down
    from pedl.cluster.paths import pedl_home

    try:
        down(pedl_home(args.home), out=lambda line: print(line, flush=True))
    except ClusterError as e:
        raise CliError(f"cluster down failed: {e}") from e
    return 0


def cluster_status(args: argparse.Namespace) -> int:
    """Exit status 1 when a recorded service is not running (so scripts can check)."""
    from pedl.cli.render import table
    from pedl.cluster.paths import pedl_home
    from pedl.cluster.state import StateError
    from pedl.cluster.status import cluster_status as read_status
    from pedl.cluster.status import human_duration

    home = pedl_home(args.home)
    try:
        rows = read_status(home)
    except StateError as e:
        raise CliError(str(e)) from e
    if rows is None:
        print(f"No pedl cluster is recorded in {home}")
        return 1
    lines = [
        (r.name, r.pid, "running" if r.running else "down",
         human_duration(r.uptime_seconds) if r.running else "-", r.restarts, r.address)
        for r in rows
    ]  # fmt: skip
    print(table(["SERVICE", "PID", "STATE", "UPTIME", "RESTARTS", "ADDRESS"], lines))
    return 0 if all(r.running for r in rows) else 1
