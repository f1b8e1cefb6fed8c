"""DeepSpeedTrialContext: what a Determined DeepSpeedTrial asks of the platform while it runs.

The trial builds its DeepSpeed engines itself (`deepspeed.initialize`) and hands them to
`wrap_model_engine`; pedl's DeepSpeed controller then feeds them micro-batches, checkpoints them
with DeepSpeed's own `save_checkpoint`/`load_checkpoint`, and reduces metrics across slots.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from determined._trial_context import TrialContext
from determined.pytorch._context import PyTorchTrialContext, _ranks
from determined.pytorch._reducer import Reducers
from determined.pytorch._tensorboard import TensorboardMethods
from determined.pytorch.deepspeed._mpu import ModelParallelUnit, make_data_parallel_mpu, refusal
from pedl.pytorch._data import to_device


class DeepSpeedTrialContext(TensorboardMethods, TrialContext):
    """Handed to `DeepSpeedTrial.__init__`; see Determined's docs for each method."""

    def __init__(
        self, hparams: dict[str, Any], experiment_config: dict[str, Any], distributed: Any = None
    ) -> None:
        super().__init__(hparams, experiment_config, distributed or _ranks())
        self.device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        self.models: list[Any] = []
        self.reducers = Reducers()
        self._auto_grad_accumulation = True
        self._train_micro_batch_size_per_gpu: int | None = None
        self._num_micro_batches_per_slot: int | None = None
        self._batches_trained: Callable[[], int] = lambda: 0
        self._epoch: Callable[[], int] = lambda: 0
        # Set by pedl's DeepSpeed controller: the batch train_batch is working on (None until the
        # first), batches per epoch of this slot's shard, and the batch this run started from.
        self._current_batch_idx: int | None = None
        self._epoch_len: Callable[[], int] | None = None
        self._initial_batch = 0
        self.profiler: Any = None
        self.mpu: ModelParallelUnit = make_data_parallel_mpu(self.distributed)

    def wrap_model_engine(self, model: Any) -> Any:
        """Registers a DeepSpeed engine; the first one fixes the micro-batch size and how many
        micro-batches make one batch (its gradient accumulation steps), as Determined does."""
        import deepspeed

        if not isinstance(model, deepspeed.DeepSpeedEngine):
            raise TypeError(
                "wrap_model_engine() takes the engine deepspeed.initialize() returns, "
                f"got {type(model).__name__}"
            )
        if isinstance(model, deepspeed.PipelineEngine):
            raise RuntimeError(
                "wrap_model_engine(): pedl does not support DeepSpeed pipeline parallelism (a "
                "PipelineEngine, from a PipelineModule); every slot is one data-parallel replica: "
                "wrap a plain engine"
            )
        micro = int(model.train_micro_batch_size_per_gpu())
        steps = int(model.gradient_accumulation_steps())
        if self._train_micro_batch_size_per_gpu is None:
            self._train_micro_batch_size_per_gpu = micro
            self._num_micro_batches_per_slot = steps
        elif (micro, steps) != (self._train_micro_batch_size_per_gpu, self._num_micro_batches_per_slot):
            raise ValueError(
                "wrap_model_engine(): every engine must have the first one's train_micro_batch_size_per_gpu "
                f"({self._train_micro_batch_size_per_gpu}) and gradient_accumulation_steps "
                f"({self._num_micro_batches_per_slot}); this one has {micro} and {steps}"
            )
        self.models.append(model)
        return model

    def set_mpu(self, mpu: Any) -> None:
        """Takes plain data parallelism's unit (`make_data_parallel_mpu(context.distributed)`), what
        pedl runs anyway; refuses any other: pedl shards data over every slot, so model or pipeline
        parallelism across them would feed each model replica the wrong shard."""
        why = refusal(mpu, self.distributed)
        if why is not None:
            raise (TypeError if not isinstance(mpu, ModelParallelUnit) else RuntimeError)(why)
        self.mpu = mpu

    @property
    def use_pipeline_parallel(self) -> bool:
        """Whether a wrapped engine is a PipelineEngine: never in pedl, which refuses one."""
        return False

    def disable_auto_grad_accumulation(self) -> None:
        """train_batch is then called once per batch and draws its micro-batches itself."""
        self._auto_grad_accumulation = False

    def disable_dataset_reproducibility_checks(self) -> None:
        """Accepted: pedl makes no such checks (its data loaders need no special type)."""

    @property
    def train_micro_batch_size_per_gpu(self) -> int:
        if self._train_micro_batch_size_per_gpu is None:
            raise RuntimeError(
                "train_micro_batch_size_per_gpu is known once wrap_model_engine() has been called"
            )
        return self._train_micro_batch_size_per_gpu

    @property
    def num_micro_batches_per_slot(self) -> int:
        if self._num_micro_batches_per_slot is None:
            raise RuntimeError("num_micro_batches_per_slot is known once wrap_model_engine() has been called")
        return self._num_micro_batches_per_slot

    def get_train_micro_batch_size_per_gpu(self) -> int:
        return self.train_micro_batch_size_per_gpu

    def get_num_micro_batches_per_slot(self) -> int:
        return self.num_micro_batches_per_slot

    # Registers a custom metric reported under `name`: PyTorchTrialContext's, on this context's reducers.
    wrap_reducer = PyTorchTrialContext.wrap_reducer

    def to_device(self, data: Any) -> Any:
        return to_device(data, self.device)

    def current_train_batch(self) -> int:
        return self._batches_trained()

    def current_train_epoch(self) -> int:
        return self._epoch()

    def is_epoch_start(self) -> bool:
        """Whether the batch being trained is the first of an epoch, counting epochs in batches of
        this slot's shard as Determined does (not exact where epochs vary in length)."""
        batch, length = self._batch_in_epochs("is_epoch_start()")
        return batch % length == 0

    def is_epoch_end(self) -> bool:
        """Whether the batch being trained is the last of an epoch (counted as is_epoch_start's)."""
        batch, length = self._batch_in_epochs("is_epoch_end()")
        return batch % length == length - 1

    def _batch_in_epochs(self, what: str) -> tuple[int, int]:
        if self._current_batch_idx is None or self._epoch_len is None:
            raise RuntimeError(f"{what} is known once training has started (from the first train_batch on)")
        return self._current_batch_idx, self._epoch_len()

    def get_initial_batch(self) -> int:
        """The batch this run's training starts from: the restored checkpoint's (0 for a new trial or
        a warm start). pedl restores after building the trial and its data loaders, so it is known
        from the first train_batch on."""
        return self._initial_batch

    def set_profiler(self, *args: Any, **kwargs: Any) -> None:
        """torch.profiler.profile(*args, **kwargs) writing its traces to the run's TensorBoard
        directory (which pedl uploads); pedl enters it around each train_batch call and steps it
        after each, as Determined does."""
        self.profiler = torch.profiler.profile(
            *args,
            on_trace_ready=torch.profiler.tensorboard_trace_handler(str(self.get_tensorboard_path())),
            **kwargs,
        )
