"""What every trial run on this agent shares: the harness command lines, directories, limits and
the sandbox, set once from the agent's flags."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from pedl.harness.store_retry import DEFAULT_BUDGET_S
from pedl.v1 import agent_pb2

from .devices import Gpu
from .disk import DEFAULT_POLL_SECONDS, TrialDirs
from .fork_server import ForkServers
from .log_relay import FILE_BYTES, MAX_LINE_BYTES
from .model_trees import ModelTrees
from .pids_cgroup import NONE, PidsPlan, ProcessLimit
from .sandbox import Sandbox

Send = Callable[[agent_pb2.ConnectRequest], None]


@dataclass
class RunSettings:
    """What every trial run on this agent shares."""

    harness_argv: list[str]
    work_dir: Path
    socket_dir: Path
    # Each experiment's model definition, unpacked once on this agent (model_trees.py).
    model_definitions: ModelTrees
    send: Send
    kill_grace_seconds: float = 10.0
    # How long harnesses wait out an unreachable checkpoint store (pedl.harness.store_retry).
    store_retry_budget_seconds: float = DEFAULT_BUDGET_S
    # A longer line of a harness's output is split into lines of this many bytes.
    max_log_line_bytes: int = MAX_LINE_BYTES
    gpus: list[Gpu] = field(default_factory=list)
    # The agent's CPU slots: a run on some of them gets that share of the cores as torch/OpenMP threads.
    cpu_slots: int = 0
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
    # Seconds a workload the harness holds may go without a result (0: no limit).
    idle_timeout_seconds: float = 0.0
    # Each run's process limit (pids_cgroup.py): its own pids cgroup, RLIMIT_NPROC or none.
    process_limit: ProcessLimit = field(default_factory=lambda: ProcessLimit(PidsPlan(NONE, 0)))
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
