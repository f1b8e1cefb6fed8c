"""Determined's DeepSpeed Trial API (`determined.pytorch.deepspeed`) on pedl.

DeepSpeed itself is not one of pedl's dependencies: a DeepSpeed trial runs in a Python environment
that has it (`scripts/install-deepspeed-env`), given to the agent with `--python`.
"""

from determined.pytorch.deepspeed._config import get_ds_config_from_hparams, overwrite_deepspeed_config
from determined.pytorch.deepspeed._context import DeepSpeedTrialContext
from determined.pytorch.deepspeed._mpu import ModelParallelUnit, make_data_parallel_mpu
from determined.pytorch.deepspeed._trainer import Trainer, init
from determined.pytorch.deepspeed._trial import DeepSpeedTrial

__all__ = [
    "DeepSpeedTrial",
    "DeepSpeedTrialContext",
    "ModelParallelUnit",
    "Trainer",
    "get_ds_config_from_hparams",
    "init",
    "make_data_parallel_mpu",
    "overwrite_deepspeed_config",
]
