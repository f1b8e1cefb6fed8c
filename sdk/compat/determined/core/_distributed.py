"""`core_context.distributed`: where this process sits among the trial's, and collectives over them.

The collectives run over torch.distributed (gloo): the agent starts one process per slot with
torchrun's environment, so a script already has a rendezvous; if the script has not created a
process group itself, the first collective creates one from that environment.
"""

from __future__ import annotations

import json
import os
from typing import Any


def _env_int(name: str, default: int | None = None) -> int:
    value = os.environ.get(name)
    if value is None:
        if default is None:
            raise RuntimeError(
                f"environment variable {name} is not set: DistributedContext.from_torch_distributed() "
                "needs torchrun's environment (the agent sets it for every slot of a trial)"
            )
        return default
    return int(value)


class DistributedContext:
    def __init__(
        self,
        *,
        rank: int,
        size: int,
        local_rank: int,
        local_size: int,
        cross_rank: int,
        cross_size: int,
        chief_ip: str | None = None,
        pub_port: int = 12360,
        pull_port: int = 12376,
        port_offset: int = 0,
        force_tcp: bool = False,
    ) -> None:
        for name, value, bound in (
            ("rank", rank, size),
            ("local_rank", local_rank, local_size),
            ("cross_rank", cross_rank, cross_size),
        ):
            if not 0 <= value < bound:
                raise ValueError(f"DistributedContext: {name}={value} is outside [0, {bound})")
        if size != local_size * cross_size:
            raise ValueError(
                f"DistributedContext: size {size} is not local_size {local_size} x cross_size {cross_size}"
            )
        self.rank, self.size = rank, size
        self.local_rank, self.local_size = local_rank, local_size
        self.cross_rank, self.cross_size = cross_rank, cross_size
        self._chief_ip = chief_ip
        self._closed = False

    @classmethod
    def from_torch_distributed(cls, chief_ip: str | None = None) -> DistributedContext:
        size = _env_int("WORLD_SIZE")
        local_size = _env_int("LOCAL_WORLD_SIZE", size)
        rank = _env_int("RANK")
        return cls(
            rank=rank,
            size=size,
            local_rank=_env_int("LOCAL_RANK"),
            local_size=local_size,
            cross_rank=_env_int("GROUP_RANK", rank // local_size),
            cross_size=size // local_size,
            chief_ip=chief_ip or os.environ.get("MASTER_ADDR"),
        )

    @classmethod
    def from_tf_config(cls) -> tuple[DistributedContext | None, Any]:
        """(None, TensorFlow's default strategy) without TF_CONFIG; with it (each rank's, under
        `determined.launch.tensorflow` on several slots), (this worker's place, a
        tf.distribute.MultiWorkerMirroredStrategy over every worker). Call it before TensorFlow
        runs any operation: the strategy must start first."""
        import tensorflow as tf

        raw = os.environ.get("TF_CONFIG")
        if not raw:
            return None, tf.distribute.get_strategy()
        rank, workers = _tf_worker(raw)
        size = len(workers)
        local_size = _env_int("LOCAL_WORLD_SIZE", size) if "WORLD_SIZE" in os.environ else 1
        if size % local_size:
            local_size = 1
        context = cls(
            rank=rank,
            size=size,
            local_rank=rank % local_size,
            local_size=local_size,
            cross_rank=rank // local_size,
            cross_size=size // local_size,
            chief_ip=workers[0].rpartition(":")[0],
        )
        return context, tf.distribute.MultiWorkerMirroredStrategy()

    @classmethod
    def from_horovod(cls, *args: Any, **kwargs: Any) -> DistributedContext:
        raise RuntimeError(
            "DistributedContext.from_horovod: pedl runs distributed trials with torch.distributed "
            "(one process per slot, torchrun's environment); use from_torch_distributed()"
        )

    @classmethod
    def from_deepspeed(cls, *args: Any, **kwargs: Any) -> DistributedContext:
        raise RuntimeError(
            "DistributedContext.from_deepspeed: pedl's launcher is torch.distributed's; DeepSpeed reads "
            "the same environment, so use DistributedContext.from_torch_distributed()"
        )

    def get_rank(self) -> int:
        return self.rank

    def get_size(self) -> int:
        return self.size

    def get_local_rank(self) -> int:
        return self.local_rank

    def get_local_size(self) -> int:
        return self.local_size

    def get_cross_rank(self) -> int:
        return self.cross_rank

    def get_cross_size(self) -> int:
        return self.cross_size

    def _group(self) -> Any:
        if self._closed:
            raise RuntimeError("DistributedContext used after close()")
        import torch.distributed as dist

        if not dist.is_initialized():
            dist.init_process_group("gloo", rank=self.rank, world_size=self.size)
        return dist

    def allgather(self, stuff: Any) -> list[Any]:
        """Every rank's `stuff`, in rank order, on every rank."""
        if self.size == 1:
            return [stuff]
        dist = self._group()
        out: list[Any] = [None] * self.size
        dist.all_gather_object(out, stuff)
        return out

    def gather(self, stuff: Any) -> list[Any] | None:
        """Every rank's `stuff` on the chief; None elsewhere."""
        everything = self.allgather(stuff)
        return everything if self.rank == 0 else None

    def broadcast(self, stuff: Any) -> Any:
        """The chief's `stuff`, on every rank."""
        if self.size == 1:
            return stuff
        dist = self._group()
        box = [stuff if self.rank == 0 else None]
        dist.broadcast_object_list(box, src=0)
        return box[0]

    def _local(self, stuff: Any) -> list[Any]:
        pairs = self.allgather((self.cross_rank, stuff))
        return [s for cross, s in pairs if cross == self.cross_rank]

    def allgather_local(self, stuff: Any) -> list[Any]:
        return self._local(stuff)

    def gather_local(self, stuff: Any) -> list[Any] | None:
        everything = self._local(stuff)
        return everything if self.local_rank == 0 else None

    def broadcast_local(self, stuff: Any = None) -> Any:
        return self._local(stuff)[0]

    def close(self) -> None:
        self._closed = True


def _tf_worker(raw: str) -> tuple[int, list[str]]:
    """(this task's index, the worker addresses) of TF_CONFIG; one ValueError naming what is wrong."""
    try:
        config = json.loads(raw)
        workers = config["cluster"]["worker"]
        task = config["task"]
        kind, index = task["type"], task["index"]
    except (ValueError, KeyError, TypeError):
        raise ValueError(
            "TF_CONFIG is not JSON with cluster.worker (a list of host:port) and task.type/index: "
            f"{raw[:200]!r}"
        ) from None
    extra = sorted(set(config["cluster"]) - {"worker"})
    if kind != "worker" or extra:
        raise ValueError(
            f"TF_CONFIG names task type {kind!r} and cluster jobs {['worker', *extra]}: from_tf_config() "
            "takes MultiWorkerMirroredStrategy's, workers only"
        )
    if not isinstance(workers, list) or not isinstance(index, int) or not 0 <= index < len(workers):
        raise ValueError(f"TF_CONFIG's task.index {index!r} is not an index of cluster.worker {workers!r}")
    return index, [str(w) for w in workers]


class DummyDistributedContext(DistributedContext):
    """One process: rank 0 of 1."""

    def __init__(self) -> None:
        super().__init__(rank=0, size=1, local_rank=0, local_size=1, cross_rank=0, cross_size=1)
