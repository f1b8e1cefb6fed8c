"""`ModelParallelUnit`: how a DeepSpeedTrial's ranks split into data-parallel replicas.

Determined's reference describes it as the data-parallel rank and world size of this rank, and
whether the rank reports metrics and builds data loaders (in model or pipeline parallelism, only
some stages do). pedl runs every slot as one data-parallel replica, so the unit it takes is the one
`make_data_parallel_mpu` makes; `DeepSpeedTrialContext.set_mpu` refuses any other in one line.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ModelParallelUnit:
    data_parallel_rank: int
    data_parallel_world_size: int
    should_report_metrics: bool
    should_build_data_loader: bool


def make_data_parallel_mpu(distributed: Any) -> ModelParallelUnit:
    """The unit of plain data parallelism: every rank its own replica, reporting and reading data."""
    return ModelParallelUnit(int(distributed.get_rank()), int(distributed.get_size()), True, True)


def refusal(mpu: Any, distributed: Any) -> str | None:
    """Why pedl cannot train with `mpu` (one line), or None when it is plain data parallelism."""
    if not isinstance(mpu, ModelParallelUnit):
        return (
            "context.set_mpu() takes a determined.pytorch.deepspeed.ModelParallelUnit, "
            f"got {type(mpu).__name__}"
        )
    if mpu != make_data_parallel_mpu(distributed):
        return (
            f"context.set_mpu({mpu}): pedl does not support DeepSpeed model or pipeline parallelism; "
            f"every slot is one data-parallel replica (data_parallel_world_size={distributed.get_size()}, "
            "data_parallel_rank = the rank, both flags True)"
        )
    return None
