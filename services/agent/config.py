"""The agent's settings from its command line and environment."""

from __future__ import annotations

import argparse
import os
import shlex
import socket
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pedl import _interfaces, auth
from pedl.harness.process_limits import DEFAULT_PIDS_LIMIT
from pedl.harness.store_retry import DEFAULT_BUDGET_S as DEFAULT_STORE_RETRY_BUDGET_S

from .disk import DEFAULT_KEEP_FAILED, DEFAULT_POLL_SECONDS, parse_duration, parse_size
from .load_limit import DEFAULT_LOAD_TIMEOUT
from .log_relay import FILE_BYTES, MAX_LINE_BYTES
from .sandbox import ISOLATION_MODES, default_isolation
from .trial_view import TrialUser

HARNESS_STARTS = ("fork", "spawn")

DEFAULT_MASTER = "127.0.0.1:8080"
DEFAULT_ENVIRONMENT = "default"
DEFAULT_LOG_LIMIT = "1G"


@dataclass
class AgentConfig:
    master: str
    agent_id: str
    work_dir: Path
    cpu_slots: int | None = None
    resource_pool: str = "default"
    # Only trials with this resources.agent_label run here ("": only trials without one).
    label: str = ""
    python: str = sys.executable
    # The harness's argv; empty means `<python> -m pedl.harness`.
    harness_command: list[str] = field(default_factory=list)
    address: str = ""
    log_level: str = "info"
    kill_grace_seconds: float = 10.0
    # How long a harness waits out an unreachable checkpoint store before it gives up (store_retry).
    store_retry_budget_seconds: float = DEFAULT_STORE_RETRY_BUDGET_S
    max_log_line_bytes: int = MAX_LINE_BYTES
    reconnect_backoff_cap_seconds: float = 5.0
    # Presented to the scheduler; never handed to harnesses.
    cluster_secret: str | None = field(default=None, repr=False)
    tls_ca: str = ""
    # Further Python environments by name (--environment NAME=PYTHON); "default" is `python`.
    environments: dict[str, str] = field(default_factory=dict)
    # How harnesses are confined: "bwrap" (bubblewrap sandbox) or "none" (plain processes).
    isolation: str = "none"
    # Where the cluster secret was read from: hidden from sandboxed harnesses.
    cluster_secret_file: str = ""
    # Further paths no sandboxed harness may see (--hide-path: a database's data, a store's root).
    hide_paths: list[Path] = field(default_factory=list)
    # Directories every sandboxed trial may read and write (--bind).
    bind_paths: list[Path] = field(default_factory=list)
    # Where experiments' bind_mounts may take host paths from (--allowed-bind-root).
    bind_roots: list[Path] = field(default_factory=list)
    # Whom a root agent runs sandboxed trials as (--trial-user); None: nobody (65534).
    trial_user: TrialUser | None = None
    # Disk hygiene (disk.py, log_relay.py); 0 turns a limit off.
    trial_disk_limit_bytes: int = 0
    trial_disk_poll_seconds: float = DEFAULT_POLL_SECONDS
    keep_failed_trial_dirs_seconds: float = parse_duration(DEFAULT_KEEP_FAILED)
    keep_trial_dirs_seconds: float = 0.0
    trial_log_limit_bytes: int = parse_size(DEFAULT_LOG_LIMIT)
    trial_log_file_bytes: int = FILE_BYTES
    trial_load_timeout_seconds: float = parse_duration(DEFAULT_LOAD_TIMEOUT)
    trial_idle_timeout_seconds: float = 0.0
    # Most processes (and threads) of one run (its pids cgroup, or RLIMIT_NPROC: pids_cgroup.py); 0: no limit.
    trial_pids_limit: int = DEFAULT_PIDS_LIMIT
    # How single-process harnesses start: "fork" (from a warm fork server per environment) or "spawn".
    harness_start: str = "fork"
    # Whether fork servers import TensorFlow before forking (--no-preload-tensorflow: torch only).
    preload_tensorflow: bool = True
    # Seconds without a fork before a ready fork server imports TensorFlow (--preload-tensorflow-after).
    preload_tensorflow_after_seconds: float = 5.0
    # Exit once no trial has run here for this long (a Slurm pilot job's agent); 0: never.
    exit_when_idle_seconds: float = 0.0

    def harness_argv(self) -> list[str]:
        return list(self.harness_command) or [self.python, "-m", "pedl.harness"]

    def environment_argvs(self) -> dict[str, list[str]]:
        """The harness command line for each environment this agent offers, "default" first."""
        extra = {name: [python, "-m", "pedl.harness"] for name, python in sorted(self.environments.items())}
        return {DEFAULT_ENVIRONMENT: self.harness_argv(), **extra}


def _non_negative(parser: argparse.ArgumentParser, flag: str, value: float) -> float:
    if not value >= 0:  # NaN too
        parser.error(f"{flag} {value:g}: must be a number of seconds, 0 or more")
    return value


def _label(parser: argparse.ArgumentParser, label: str) -> str:
    if label != label.strip() or "@" in label:
        parser.error(f"--label {label!r}: a label is a name without '@' or surrounding spaces")
    return label


def _build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="pedl-agent", description="Run pedl trials on this machine.")
    p.add_argument("--master", help=f"scheduler HOST:PORT (env PEDL_MASTER; default {DEFAULT_MASTER})")
    p.add_argument("--agent-id", help="this agent's id (default: the hostname)")
    p.add_argument("--slots", type=int, help="CPU slots to offer (default: 1 without GPUs, else 0)")
    p.add_argument("--work-dir", help="where trials run (default: ~/.pedl/agent/<agent-id>)")
    p.add_argument("--resource-pool", default="default", help="resource pool to join (default: default)")
    p.add_argument(
        "--label", default="", help="run only trials whose resources.agent_label is LABEL (default: none)"
    )
    p.add_argument("--python", default=sys.executable, help="interpreter for harness processes")
    p.add_argument(
        "--environment",
        action="append",
        default=[],
        metavar="NAME=PYTHON",
        help="offer another Python environment (e.g. tf215=.cache/envs/tf215/bin/python) that "
        "experiments choose with `environment: NAME`; repeatable ('default' is --python)",
    )
    p.add_argument(
        "--harness-command",
        help="command line that starts a harness "
        "(env PEDL_HARNESS_COMMAND; default: <python> -m pedl.harness)",
    )
    p.add_argument("--address", help="address other machines reach this host on (default: auto)")
    p.add_argument("--kill-grace", type=float, default=10.0, help="seconds between SIGTERM and SIGKILL")
    p.add_argument(
        "--store-retry-budget",
        type=float,
        default=DEFAULT_STORE_RETRY_BUDGET_S,
        metavar="SECONDS",
        help="how long a harness retries a checkpoint restore or upload while the checkpoint store (or "
        "its S3) is unreachable before its run ends as an infrastructure failure, which does not "
        f"spend the trial's max_restarts (default {DEFAULT_STORE_RETRY_BUDGET_S:g})",
    )
    p.add_argument(
        "--max-log-line-bytes",
        type=int,
        default=MAX_LINE_BYTES,
        metavar="N",
        help=f"a longer line of a trial's output is split into lines of N bytes (default {MAX_LINE_BYTES})",
    )
    p.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    p.add_argument("--cluster-secret-file", help="the cluster's shared secret (or env PEDL_CLUSTER_SECRET)")
    p.add_argument("--tls-ca", help="CA bundle to verify the scheduler and store with (or env PEDL_TLS_CA)")
    p.add_argument(
        "--isolation",
        choices=ISOLATION_MODES,
        help="how harness processes are confined: bwrap (a bubblewrap sandbox; the default where "
        "bwrap is installed) or none (plain processes that can read whatever the agent can)",
    )
    p.add_argument(
        "--hide-path",
        action="append",
        default=[],
        metavar="PATH",
        help="a further directory or file sandboxed trials must not see (a database's data, a "
        "checkpoint store's root); repeatable. $PEDL_HOME and the agent's work dir are always hidden",
    )
    p.add_argument(
        "--bind",
        action="append",
        default=[],
        metavar="DIR",
        help="a directory sandboxed trials may read and write (shared datasets, scratch), at the same "
        "path; repeatable. The agent's own paths inside it stay hidden",
    )
    p.add_argument(
        "--allowed-bind-root",
        action="append",
        default=[],
        metavar="DIR",
        help="a directory under which experiments' bind_mounts may name host paths (mounted at their "
        "container_path in the sandbox); repeatable. --bind directories are allowed too",
    )
    p.add_argument(
        "--trial-user",
        metavar="UID[:GID]",
        help="the unprivileged user (and group) a root agent runs sandboxed trials as, by number or "
        "name (default 65534:65534, nobody); a pedl user linked to a Unix user runs as that one",
    )
    p.add_argument(
        "--trial-disk-limit",
        default="0",
        metavar="SIZE",
        help="most disk one trial run may fill in its directory (its /tmp included), e.g. 20G; past it "
        "the run is killed with a clear error and its files removed (default 0: no limit)",
    )
    p.add_argument(
        "--trial-disk-poll",
        type=float,
        default=DEFAULT_POLL_SECONDS,
        metavar="SECONDS",
        help="how often a run's disk use is measured against --trial-disk-limit "
        f"(default {DEFAULT_POLL_SECONDS:g})",
    )
    p.add_argument(
        "--keep-failed-trial-dirs",
        default=DEFAULT_KEEP_FAILED,
        metavar="DURATION",
        help="how long a failed run's directory stays for debugging before it is removed, e.g. 24h, 30m, "
        f"0 (default {DEFAULT_KEEP_FAILED}); other runs' directories go when they end",
    )
    p.add_argument(
        "--keep-trial-dirs",
        default="0",
        metavar="DURATION",
        help="keep every run's directory this long after it ends, for debugging (default 0)",
    )
    p.add_argument(
        "--trial-log-limit",
        default=DEFAULT_LOG_LIMIT,
        metavar="SIZE",
        help="most output one trial run may log; the rest is dropped and one line at the end says how much "
        f"(default {DEFAULT_LOG_LIMIT}; 0: no limit)",
    )
    p.add_argument(
        "--trial-log-file-bytes",
        default=str(FILE_BYTES),
        metavar="SIZE",
        help="the agent's own copy of a run's output (trial.log) moves to trial.log.1 past this size; the "
        f"scheduler holds the whole log (default {FILE_BYTES // 1024 // 1024}M)",
    )
    p.add_argument(
        "--trial-load-timeout",
        default=DEFAULT_LOAD_TIMEOUT,
        metavar="DURATION",
        help="longest a run may take from its harness's start to its first workload (importing the model "
        "definition, restoring its checkpoint, building model and data) before it is killed with a clear "
        f"error, e.g. 10m (default {DEFAULT_LOAD_TIMEOUT}; 0: no limit)",
    )
    p.add_argument(
        "--trial-idle-timeout",
        default="0",
        metavar="DURATION",
        help="longest a run may hold a workload (a step, a validation, a checkpoint) without reporting its "
        "result before it is killed with one clear line, e.g. 30m; make it longer than your slowest step "
        "(default 0: no limit)",
    )
    p.add_argument(
        "--no-preload-tensorflow",
        dest="preload_tensorflow",
        action="store_false",
        help="fork servers import the harness and torch but never TensorFlow (by default they import it "
        "once idle, see --preload-tensorflow-after): for agents whose trials use PyTorch only, ~4 s less "
        "CPU and ~0.5 GB less memory per environment; a trial that uses TensorFlow then imports it itself",
    )
    p.add_argument(
        "--preload-tensorflow-after",
        type=float,
        default=5.0,
        metavar="SECONDS",
        help="fork servers report ready with torch imported and import TensorFlow once no run has been "
        "forked for this long (default 5), or at once after a forked run imported TensorFlow itself (the "
        "Keras runs after it are then forked with it)",
    )
    p.add_argument(
        "--trial-pids-limit",
        type=int,
        default=DEFAULT_PIDS_LIMIT,
        metavar="N",
        help="most processes and threads a trial may run: pids.max of a pids cgroup of its own (cgroup v1 "
        "or v2; removed with what is left in it when the trial ends); past it the trial's fork fails with "
        "EAGAIN. Without a writable pids cgroup: RLIMIT_NPROC of its Unix user on a 1-slot agent, else "
        f"none, which each trial's log says (default {DEFAULT_PIDS_LIMIT}; 0: no limit)",
    )
    p.add_argument(
        "--exit-when-idle",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="exit once no trial has run on this agent for SECONDS (pilot agents in Slurm jobs; "
        "default 0: never)",
    )
    p.add_argument(
        "--harness-start",
        choices=HARNESS_STARTS,
        default="fork",
        help="fork (the default): a single-process trial's harness is forked from a fork server per "
        "environment that has imported the harness and torch once; spawn: a new interpreter per run "
        "(what fork falls back to, with the reason in the log, where forking is not possible)",
    )
    return p


def _sizes_and_durations(parser: argparse.ArgumentParser, ns: argparse.Namespace) -> dict[str, Any]:
    """Sizes in bytes (int) and durations in seconds (float), by AgentConfig field."""
    out: dict[str, Any] = {}
    for flag, name, parse in [
        ("--trial-disk-limit", "trial_disk_limit_bytes", parse_size),
        ("--trial-log-limit", "trial_log_limit_bytes", parse_size),
        ("--trial-log-file-bytes", "trial_log_file_bytes", parse_size),
        ("--keep-failed-trial-dirs", "keep_failed_trial_dirs_seconds", parse_duration),
        ("--keep-trial-dirs", "keep_trial_dirs_seconds", parse_duration),
        ("--trial-load-timeout", "trial_load_timeout_seconds", parse_duration),
        ("--trial-idle-timeout", "trial_idle_timeout_seconds", parse_duration),
    ]:
        try:
            out[name] = parse(getattr(ns, flag[2:].replace("-", "_")))
        except ValueError as e:
            parser.error(f"{flag}: {e}")
    if ns.trial_pids_limit < 0:
        parser.error(f"--trial-pids-limit must be 0 (no limit) or more, got {ns.trial_pids_limit}")
    if not ns.trial_disk_poll > 0:
        parser.error(f"--trial-disk-poll must be a number of seconds > 0, got {ns.trial_disk_poll}")
    return out


def _check_master(master: str) -> str:
    host, sep, port = master.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ValueError(f"--master must be HOST:PORT, got {master!r}")
    return master


def check_address(address: str, interfaces: dict[str, list[str]] | None = None) -> str:
    """`--address` as given, if it is this machine's: a trial's ranks here listen on the interface
    carrying it, so an address of another machine (or a typo) would only fail later, in a gang."""
    if not _interfaces.resolve(address):
        raise ValueError(f"--address {address!r} does not resolve to an IP address")
    if _interfaces.interface_for(address, interfaces) is None:
        raise ValueError(
            f"--address {address} is not an address of this machine (its interfaces: "
            f"{_interfaces.describe(interfaces)}); give the address other machines reach this one on"
        )
    return address


def parse_args(argv: list[str] | None = None, environ: dict[str, str] | None = None) -> AgentConfig:
    """Parses flags; bad values exit with a usage error naming the flag."""
    env = os.environ if environ is None else environ
    parser = _build_parser()
    ns = parser.parse_args(argv)
    try:
        master = _check_master(ns.master or env.get("PEDL_MASTER") or DEFAULT_MASTER)
    except ValueError as e:
        parser.error(str(e))
    if ns.address:
        try:
            check_address(ns.address)
        except ValueError as e:
            parser.error(str(e))
    if ns.slots is not None and ns.slots < 0:
        parser.error(f"--slots must be >= 0, got {ns.slots}")
    if ns.kill_grace < 0:
        parser.error(f"--kill-grace must be >= 0, got {ns.kill_grace}")
    if ns.max_log_line_bytes < 1:
        parser.error(f"--max-log-line-bytes must be at least 1, got {ns.max_log_line_bytes}")
    if not 0 <= ns.store_retry_budget < float("inf"):
        parser.error(f"--store-retry-budget must be a number of seconds >= 0, got {ns.store_retry_budget}")
    agent_id = ns.agent_id or socket.gethostname()
    if not agent_id or "/" in agent_id:
        parser.error(f"--agent-id must be a non-empty name without '/', got {agent_id!r}")
    harness = ns.harness_command or env.get("PEDL_HARNESS_COMMAND") or ""
    try:
        harness_argv = shlex.split(harness)
    except ValueError as e:
        parser.error(f"--harness-command cannot be parsed: {e}")
    work_dir = Path(ns.work_dir).expanduser() if ns.work_dir else Path.home() / ".pedl" / "agent" / agent_id
    try:
        secret = auth.cluster_secret(ns.cluster_secret_file, dict(env))
    except auth.AuthConfigError as e:
        parser.error(str(e))
    try:
        environments = parse_environments(ns.environment)
    except ValueError as e:
        parser.error(str(e))
    tls_ca = ns.tls_ca or env.get(auth.ENV_TLS_CA) or ""
    if tls_ca and not Path(tls_ca).is_file():
        parser.error(f"--tls-ca {tls_ca} is not a file")
    isolation = ns.isolation or default_isolation()
    binds = [Path(p).expanduser().absolute() for p in ns.bind]
    for path in binds:
        if not path.is_dir():
            parser.error(f"--bind {path} is not a directory")
    roots = [Path(p).expanduser().absolute() for p in ns.allowed_bind_root]
    for path in roots:
        if not path.is_dir():
            parser.error(f"--allowed-bind-root {path} is not a directory")
    trial_user = None
    if ns.trial_user:
        try:
            trial_user = TrialUser.parse(ns.trial_user)
        except ValueError as e:
            parser.error(str(e))
    hygiene = _sizes_and_durations(parser, ns)
    return AgentConfig(
        master=master,
        agent_id=agent_id,
        work_dir=work_dir.resolve(),
        cpu_slots=ns.slots,
        resource_pool=ns.resource_pool,
        exit_when_idle_seconds=ns.exit_when_idle,
        label=_label(parser, ns.label),
        python=ns.python,
        harness_command=harness_argv,
        address=ns.address or "",
        log_level=ns.log_level,
        kill_grace_seconds=ns.kill_grace,
        store_retry_budget_seconds=ns.store_retry_budget,
        max_log_line_bytes=ns.max_log_line_bytes,
        cluster_secret=secret,
        tls_ca=str(Path(tls_ca).resolve()) if tls_ca else "",
        environments=environments,
        isolation=isolation,
        cluster_secret_file=ns.cluster_secret_file or "",
        hide_paths=[Path(p).expanduser().absolute() for p in ns.hide_path],
        bind_paths=binds,
        bind_roots=roots,
        trial_user=trial_user,
        trial_disk_poll_seconds=ns.trial_disk_poll,
        trial_pids_limit=ns.trial_pids_limit,
        **hygiene,
        harness_start=ns.harness_start,
        preload_tensorflow=ns.preload_tensorflow,
        preload_tensorflow_after_seconds=_non_negative(
            parser, "--preload-tensorflow-after", ns.preload_tensorflow_after
        ),
    )


def parse_environments(values: list[str]) -> dict[str, str]:
    """`NAME=PYTHON` flags as {name: absolute interpreter path}; a ValueError names a bad one."""
    out: dict[str, str] = {}
    for value in values:
        name, sep, python = value.partition("=")
        name = name.strip()
        if not sep or not name or not python:
            raise ValueError(f"--environment must be NAME=PYTHON, got {value!r}")
        if not all(c.isalnum() or c in "._-" for c in name):
            raise ValueError(f"--environment name {name!r} may hold only letters, digits, '.', '_' and '-'")
        if name == DEFAULT_ENVIRONMENT:
            raise ValueError("--environment default=...: the default environment is --python")
        if name in out:
            raise ValueError(f"--environment {name!r} is given twice")
        path = Path(python).expanduser()
        if not path.is_file() or not os.access(path, os.X_OK):
            raise ValueError(f"--environment {name}={python}: {python} is not an executable file")
        # Not resolved: a venv's bin/python is a symlink whose target would lose the venv.
        out[name] = str(path.absolute())
    return out


def local_address(master: str) -> str:
    """The address of the interface that routes to the master, as other machines would reach us."""
    host, _, port = master.rpartition(":")
    host = host.strip("[]")
    try:
        with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect((host, int(port)))  # UDP: no packet is sent
            return str(s.getsockname()[0])
    except OSError:
        pass
    try:
        return socket.gethostbyname(socket.gethostname())
    except OSError:
        return "127.0.0.1"
