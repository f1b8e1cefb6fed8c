"""`det.core.init()`: the Core API's entry point, on a cluster or off it (dummy mode)."""

from __future__ import annotations

import enum
import os
import sys
from types import TracebackType
from typing import Any

import determined as det
from determined import _cluster_info
from determined.core._checkpoint import CheckpointContext
from determined.core._distributed import DistributedContext, DummyDistributedContext
from determined.core._link import Link, LocalLink, harness_link, local_storage_path
from determined.core._preempt import PreemptContext, PreemptMode
from determined.core._searcher import SearcherContext
from determined.core._train import EarlyExitReason, TrainContext


class TensorboardMode(enum.Enum):
    AUTO = "AUTO"
    MANUAL = "MANUAL"


class Context:
    """What `det.core.init()` returns; close it (or use it in `with`) when training is over."""

    def __init__(
        self,
        link: Link,
        distributed: DistributedContext,
        preempt_mode: PreemptMode,
        info: _cluster_info.ClusterInfo | None,
        tensorboard_mode: TensorboardMode = TensorboardMode.AUTO,
    ) -> None:
        self._link = link
        self.info = info
        self.distributed = distributed
        manual = tensorboard_mode is TensorboardMode.MANUAL
        if manual:  # the harness then uploads only what upload_tensorboard_files names
            link.call("tensorboard_manual")
        self.train = TrainContext(link, distributed, manual_tensorboard=manual)
        self.checkpoint = CheckpointContext(link, distributed)
        self.preempt = PreemptContext(link, distributed, preempt_mode)
        self.searcher = SearcherContext(link, distributed, dummy=isinstance(link, LocalLink))
        self._closed = False

    def __enter__(self) -> Context:
        return self

    def __exit__(
        self, typ: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None
    ) -> None:
        invalid_hp = isinstance(value, det.InvalidHP) and not self._closed and self.distributed.rank == 0
        if invalid_hp:
            self.train.report_early_exit(EarlyExitReason.INVALID_HP)
        self.close()
        if isinstance(value, det.InvalidHP):  # as Determined: the invalid trial is no failure
            print(f"det.InvalidHP: {value}; the trial exits early (INVALID_HP)", file=sys.stderr, flush=True)
            raise SystemExit(0)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for part in (self.train, self.checkpoint, self.preempt, self.searcher):
            part.close()
        self._link.close()


def init(
    *,
    distributed: DistributedContext | None = None,
    checkpoint_storage: str | os.PathLike[str] | dict[str, Any] | None = None,
    preempt_mode: PreemptMode = PreemptMode.WorkersAskChief,
    tensorboard_mode: TensorboardMode = TensorboardMode.AUTO,
    async_checkpointing: bool = False,
    **unsupported: Any,
) -> Context:
    """On a cluster: the trial's contexts, served by its harness. Off a cluster: dummy mode (metrics
    are logged, checkpoints kept under `checkpoint_storage`, never preempted, one searcher operation)."""
    if unsupported:
        raise TypeError(f"det.core.init() got unexpected arguments: {', '.join(sorted(unsupported))}")
    if not isinstance(tensorboard_mode, TensorboardMode):
        raise TypeError(f"tensorboard_mode must be a TensorboardMode, got {tensorboard_mode!r}")
    if distributed is not None and not isinstance(distributed, DistributedContext):
        raise TypeError(
            f"distributed must be a det.core.DistributedContext, got {type(distributed).__name__}"
        )
    info = _cluster_info.get_cluster_info()
    link = harness_link()
    if link is None:
        if checkpoint_storage is not None and not isinstance(checkpoint_storage, (str, os.PathLike, dict)):
            raise TypeError(f"checkpoint_storage must be a path or a mapping, got {checkpoint_storage!r}")
        return Context(
            LocalLink(local_storage_path(checkpoint_storage)),
            distributed or DummyDistributedContext(),
            preempt_mode,
            info,
            tensorboard_mode,
        )
    if checkpoint_storage is not None:
        link.close()
        raise ValueError(
            "det.core.init(checkpoint_storage=...) is for runs off a cluster; on a cluster the experiment "
            "config's checkpoint_storage is used"
        )
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if distributed is None:
        if world > 1:
            link.close()
            raise RuntimeError(
                f"this trial runs {world} processes; pass "
                "distributed=det.core.DistributedContext.from_torch_distributed() (or, under "
                "determined.launch.tensorflow, from_tf_config()'s) to det.core.init()"
            )
        distributed = DummyDistributedContext()
    elif distributed.size != world:
        link.close()
        raise ValueError(f"distributed.size is {distributed.size}, but this trial runs {world} processes")
    return Context(link, distributed, preempt_mode, info, tensorboard_mode)
