"""Data-parallel trials: the harness's side of a torchrun-style launch, one process per slot.

The agent starts one harness per slot with RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE,
MASTER_ADDR and MASTER_PORT set. The chief (rank 0) alone asks the agent for workloads and
broadcasts each to the other ranks, so that all run the same workload in lockstep; only the chief
reports results and stores checkpoints. Without WORLD_SIZE > 1 none of this is used (and torch is
not imported here).

torch.distributed's rendezvous at MASTER_ADDR:MASTER_PORT is the one rendezvous of every trial:
a framework with a multi-worker runtime of its own (TensorFlow's MultiWorkerMirroredStrategy for
Keras) learns its peers through it. Its trial class defines `start_workers(group)`, which the
harness calls after importing the model definition and before any data or model is built; it
gets every rank's worker address from `ProcessGroup.worker_addresses()`.
"""

from __future__ import annotations

import datetime
import os
import random
import shutil
import socket
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from pedl.harness import rank_network
from pedl.harness.workloads import CheckpointStorage, WorkloadSource
from pedl.v1 import common_pb2

T = TypeVar("T")

# Exit code of a rank that failed only because another rank died (the agent reports the other).
PEER_FAILED_EXIT_CODE = 3
# Ranks other than the chief wait on the chief's next workload, which can take as long as the
# scheduler keeps the trial idle; a dead chief still fails them at once (its connections close).
WORKLOAD_WAIT = datetime.timedelta(days=30)
# torch's own for a tcp:// rendezvous: a rank may start long before the chief (a handoff waits for
# the slot's previous run to exit).
RENDEZVOUS_TIMEOUT = datetime.timedelta(minutes=30)
# Tries at a worker address list without two ranks on one port.
ADDRESS_ATTEMPTS = 3
_PEER_FAILURE_TEXT = (
    "Connection closed by peer",
    "Connection reset by peer",
    "remote worker crashing",
    # TensorFlow's collectives when another worker died (its health check aborts them).
    "Collective ops is aborted by",
)


@dataclass(frozen=True)
class Launch:
    """Where this process sits in the trial's processes, as the agent's environment says."""

    rank: int
    local_rank: int
    world_size: int
    local_world_size: int
    master_addr: str
    master_port: int

    @property
    def is_chief(self) -> bool:
        return self.rank == 0

    @property
    def is_local_chief(self) -> bool:
        return self.local_rank == 0


def _int(environ: Mapping[str, str], name: str, default: str | None = None) -> int:
    text = environ.get(name, default)
    if text is None:
        raise ValueError(
            f"environment variable {name} is not set (WORLD_SIZE is, so the harness runs distributed)"
        )
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"environment variable {name} must be an integer, got {text!r}") from None


def launch_from_env(environ: Mapping[str, str] = os.environ) -> Launch | None:
    """The launch described by the environment; None for a single process (no WORLD_SIZE, or 1)."""
    if _int(environ, "WORLD_SIZE", "1") <= 1:
        return None
    launch = Launch(
        rank=_int(environ, "RANK"),
        local_rank=_int(environ, "LOCAL_RANK"),
        world_size=_int(environ, "WORLD_SIZE"),
        local_world_size=_int(environ, "LOCAL_WORLD_SIZE", environ.get("WORLD_SIZE")),
        master_addr=environ.get("MASTER_ADDR", ""),
        master_port=_int(environ, "MASTER_PORT"),
    )
    if not 0 <= launch.rank < launch.world_size:
        raise ValueError(f"RANK {launch.rank} is not in [0, WORLD_SIZE {launch.world_size})")
    if not 0 <= launch.local_rank < launch.local_world_size or launch.local_rank > launch.rank:
        raise ValueError(
            f"LOCAL_RANK {launch.local_rank} does not fit LOCAL_WORLD_SIZE {launch.local_world_size} "
            f"and RANK {launch.rank}"
        )
    if not launch.master_addr:
        raise ValueError(
            "environment variable MASTER_ADDR is not set (WORLD_SIZE is, so the harness runs distributed)"
        )
    return launch


def is_peer_failure(exc: BaseException) -> bool:
    """Whether `exc` only reflects another rank's death (a collective lost its peer)."""
    if isinstance(exc, rank_network.RanksUnreachable):  # every rank fails so, each for itself
        return False
    lost: tuple[type[BaseException], ...] = ()
    torch_distributed = sys.modules.get("torch.distributed")  # not there: no group was started
    if torch_distributed is not None:
        lost += (torch_distributed.DistNetworkError,)
    tensorflow = sys.modules.get("tensorflow")
    if tensorflow is not None:
        # A TensorFlow collective whose peer is gone fails UNAVAILABLE (no rank's own error does).
        lost += (tensorflow.errors.UnavailableError,)
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, lost) or any(t in str(seen) for t in _PEER_FAILURE_TEXT):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def reachable_host(launch: Launch) -> str:
    """The address the other ranks reach this rank's machine on.

    The chief's machine is reached at MASTER_ADDR (the scheduler gives the chief agent's address,
    or 127.0.0.1 when one agent runs every rank). Another machine answers with its agent's
    `--address` when one was given, else the interface that routes to the chief, as an agent finds
    its own address (a UDP connect sends no packet).
    """
    if launch.rank == launch.local_rank:  # this machine runs ranks 0..: the chief's
        return launch.master_addr
    if os.environ.get("PEDL_AGENT_ADDRESS"):
        return os.environ["PEDL_AGENT_ADDRESS"]
    try:
        family, _, _, _, address = socket.getaddrinfo(
            launch.master_addr, launch.master_port, type=socket.SOCK_DGRAM
        )[0]
        with socket.socket(family, socket.SOCK_DGRAM) as s:
            s.connect(address)
            return str(s.getsockname()[0])
    except OSError:
        return socket.gethostbyname(socket.gethostname())


def free_ports(host: str, count: int) -> list[int]:
    """`count` different ports nobody listens on now, on every interface of this machine.

    Each is held bound until all are picked, so no two are the same however the draws fall. The
    ports are bound again only later (TensorFlow's server starts seconds afterwards), so they are
    drawn below the kernel's ephemeral range where they can: an ephemeral port can meanwhile be taken
    by any outgoing connection on the machine (EADDRINUSE at the server's start)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    low = _ephemeral_low()
    rng = random.Random()
    held: list[socket.socket] = []
    try:
        while len(held) < count:
            s = socket.socket(family)
            held.append(s)
            for _ in range(64) if low > 10000 else ():
                try:
                    s.bind(("", rng.randrange(10000, low)))
                    break
                except OSError:
                    continue
            else:
                s.bind(("", 0))
        return [int(s.getsockname()[1]) for s in held]
    finally:
        for s in held:
            s.close()


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 0


def host_port(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def start_framework(trial_class: type, group: ProcessGroup) -> None:
    """Lets the trial's framework join its own multi-worker runtime (see the module docstring)."""
    if not getattr(trial_class, "several_slots", True):
        interface = getattr(trial_class, "framework_interface", trial_class.__name__)
        raise ValueError(
            f"{trial_class.__name__} is a {interface}, which trains in one process: set "
            f"resources.slots_per_trial to 1 (it is {group.launch.world_size}), or use "
            "pedl.keras.KerasTrial to train TensorFlow data-parallel on several slots"
        )
    start_workers: Callable[[ProcessGroup], None] | None = getattr(trial_class, "start_workers", None)
    if start_workers is not None:
        start_workers(group)


class WorkerAddressClash(RuntimeError):
    """Machines reached at one address kept picking the same ports for their ranks' workers."""


class MixedDevices(RuntimeError):
    """Some of a trial's ranks have a GPU and some have none: they cannot form one process group."""


def choose_backend(cuda_by_rank: list[bool]) -> str:
    """NCCL when every rank has a GPU, gloo when none has. A gang mixing both is refused: NCCL needs a
    GPU on every rank, and ranks choosing different backends would wait for each other forever."""
    if all(cuda_by_rank):
        return "nccl"
    if not any(cuda_by_rank):
        return "gloo"
    gpu = ", ".join(str(r) for r, cuda in enumerate(cuda_by_rank) if cuda)
    cpu = ", ".join(str(r) for r, cuda in enumerate(cuda_by_rank) if not cuda)
    raise MixedDevices(
        f"ranks {gpu} of this trial run on GPU slots and ranks {cpu} on CPU slots: a trial on several "
        "slots needs all of them GPUs or all CPU slots. An agent with GPUs and --slots N offers both "
        "kinds; run such trials on agents offering one kind (a GPU machine's agent without --slots)"
    )


def agree_backend(store: Any, rank: int, world_size: int, has_cuda: bool) -> str:
    """Every rank tells the others through the rendezvous `store` whether it sees a GPU; all choose
    the same backend, or all raise MixedDevices together."""
    store.set(f"pedl/cuda/{rank}", "1" if has_cuda else "0")
    cuda_by_rank = [store.get(f"pedl/cuda/{r}") == b"1" for r in range(world_size)]
    return choose_backend(cuda_by_rank)


class ProcessGroup:
    """The trial's torch.distributed group: NCCL on GPUs, gloo on CPUs, plus a gloo group for control."""

    def __init__(self, launch: Launch) -> None:
        self.launch = launch
        self._control: Any = None

    def start(self) -> None:
        try:
            import torch
            import torch.distributed as dist
        except ImportError as exc:
            raise RuntimeError(
                f"a trial on {self.launch.world_size} slots needs torch in the harness's Python "
                "environment: its ranks meet and share workloads through torch.distributed "
                f"(Keras trials too); {exc}"
            ) from exc

        launch = self.launch
        spans = rank_network.spans_machines(launch.world_size, launch.local_world_size)
        if spans:  # other machines must reach this rank: listen where they can, and prove they do
            rank_network.choose_interfaces(os.environ)
        store = dist.TCPStore(
            launch.master_addr,
            launch.master_port,
            launch.world_size,
            is_master=launch.is_chief,
            timeout=RENDEZVOUS_TIMEOUT,
        )
        if spans:
            rank_network.check_reachable(store, launch.rank, launch.world_size)
        backend = agree_backend(store, launch.rank, launch.world_size, torch.cuda.is_available())
        if backend == "nccl":
            torch.cuda.set_device(launch.local_rank % torch.cuda.device_count())
        dist.init_process_group(backend, store=store, rank=launch.rank, world_size=launch.world_size)
        self._control = dist.new_group(backend="gloo", timeout=WORKLOAD_WAIT)

    def finish(self) -> None:
        """Leaves the group together: a rank destroying it while another still uses it can abort."""
        import torch.distributed as dist

        dist.barrier(group=self._control)
        dist.destroy_process_group()

    def broadcast(self, obj: Any) -> Any:
        """The chief's `obj` on every rank."""
        import torch.distributed as dist

        box = [obj]
        dist.broadcast_object_list(box, src=0, group=self._control)
        return box[0]

    def barrier(self) -> None:
        import torch.distributed as dist

        dist.barrier(group=self._control)

    def all_gather(self, obj: Any) -> list[Any]:
        """Every rank's `obj`, indexed by rank, on every rank."""
        import torch.distributed as dist

        results: list[Any] = [None] * self.launch.world_size
        dist.all_gather_object(results, obj, group=self._control)
        return results

    def once_per_machine(self, fn: Callable[[], T]) -> T:
        """Runs `fn` on this machine's first rank only; every rank of the machine gets its result."""
        results = self.all_gather(fn() if self.launch.is_local_chief else None)
        # The agent numbers a machine's ranks consecutively from its first.
        return results[self.launch.rank - self.launch.local_rank]

    def worker_addresses(self) -> list[str]:
        """A free host:port per rank, each on its rank's machine, indexed by rank: the same list on
        every rank, never with one address twice. Each machine's first rank picks its ranks' ports
        together (so they differ), so ranks on other agents need no port plan; the framework must
        bind them soon (a port is only known free when picked)."""
        launch = self.launch
        host = reachable_host(launch)
        addresses: list[str] = []
        for _ in range(ADDRESS_ATTEMPTS):
            mine = None
            if launch.is_local_chief:
                mine = [host_port(host, port) for port in free_ports(host, launch.local_world_size)]
            # The agent numbers a machine's ranks consecutively from its first: in rank order.
            addresses = [a for picked in self.all_gather(mine) if picked for a in picked]
            # Two machines reached at one address (agents sharing a host) can still pick one port;
            # every rank sees the same list, so all pick again together, or all fail together.
            if len(set(addresses)) == len(addresses) == launch.world_size:
                return addresses
        raise WorkerAddressClash(
            f"the trial's ranks could not get {launch.world_size} different worker addresses in "
            f"{ADDRESS_ATTEMPTS} tries (last: {', '.join(addresses)}); its machines' agents share an "
            "address: give each agent its own --address"
        )

    def fetch_shared(self, checkpoints: CheckpointStorage, uuid: str, base: Path) -> Path:
        """The checkpoint `uuid`, downloaded once per machine into `base` and read by all its ranks."""
        directory = base / f"restore-{uuid}"
        if self.launch.is_local_chief:
            shutil.rmtree(directory, ignore_errors=True)
            directory.mkdir(parents=True)
            checkpoints.fetch(uuid, directory)
        self.barrier()
        return directory

    def release_shared(self, directory: Path) -> None:
        """Removes a `fetch_shared` directory once every rank has loaded it."""
        self.barrier()
        if self.launch.is_local_chief:
            shutil.rmtree(directory, ignore_errors=True)

    def workloads(self, source: WorkloadSource) -> WorkloadSource:
        return BroadcastWorkloads(self, source)

    def checkpoints(self, storage: CheckpointStorage) -> CheckpointStorage:
        return ChiefCheckpoints(self.launch.is_chief, storage)


class BroadcastWorkloads:
    """A WorkloadSource that the chief reads from the agent and shares with every rank."""

    def __init__(self, group: ProcessGroup, source: WorkloadSource) -> None:
        self._group = group
        self._source = source
        self._chief = group.launch.is_chief

    def next_workload(self) -> common_pb2.Workload:
        data = self._source.next_workload().SerializeToString() if self._chief else None
        return common_pb2.Workload.FromString(self._group.broadcast(data))

    def complete(self, result: common_pb2.WorkloadResult) -> None:
        if self._chief:
            self._source.complete(result)


class ChiefCheckpoints:
    """Stores checkpoints from the chief only (the others' results are never reported)."""

    def __init__(self, is_chief: bool, storage: CheckpointStorage) -> None:
        self._chief = is_chief
        self._storage = storage

    def store(self, directory: Path, total_batches: int) -> common_pb2.Checkpoint:
        if not self._chief:
            return common_pb2.Checkpoint()
        return self._storage.store(directory, total_batches)

    def fetch(self, uuid: str, directory: Path) -> None:
        self._storage.fetch(uuid, directory)


def tf_config(addresses: Sequence[str], index: int) -> dict[str, Any]:
    """TF_CONFIG for worker `index` of the cluster `addresses` (host:port, indexed by rank)."""
    if len(addresses) < 2:
        raise ValueError(f"a multi-worker TF_CONFIG needs at least 2 worker addresses, got {list(addresses)}")
    for address in addresses:
        host, _, port = str(address).rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"worker address {address!r} is not host:port")
    if len(set(addresses)) != len(addresses):
        raise ValueError(f"worker addresses must be distinct, got {list(addresses)}")
    if not 0 <= index < len(addresses):
        raise ValueError(f"worker index {index} is not in [0, {len(addresses)})")
    return {"cluster": {"worker": list(addresses)}, "task": {"type": "worker", "index": index}}


def multi_worker_tf_config(launch: Launch) -> dict[str, Any]:
    """TF_CONFIG for this rank of a script under `determined.launch.tensorflow`: the ranks meet once
    through the trial's rendezvous (as Keras trials do, `ProcessGroup.worker_addresses`), then
    leave it, so that the script may start its own torch.distributed group at MASTER_PORT."""
    group = ProcessGroup(launch)
    group.start()
    try:
        addresses = group.worker_addresses()
    finally:
        group.finish()
    return tf_config(addresses, launch.rank)
