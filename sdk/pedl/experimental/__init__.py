"""Submitting experiments from Python: `pedl.experimental.create` (seed 004).

`local=False` submits to the cluster that `PEDL_MASTER` names; `local=True` runs the whole
experiment in this process; `test=True` runs the minimal loop (a few batches, a validation,
a checkpoint written and restored). Every mode drives the same searcher, workload
sequencer and harness code as the cluster.
"""

from pedl.experimental._create import create
from pedl.experimental._local import LocalExperimentResult, LocalTrialResult, run_local
from pedl.experimental.client import (
    Checkpoint,
    ClientError,
    ExperimentClient,
    Trial,
    get_checkpoint,
    get_experiment,
    get_trial,
    list_experiments,
)

__all__ = [
    "create",
    "run_local",
    "get_checkpoint",
    "get_experiment",
    "get_trial",
    "list_experiments",
    "Checkpoint",
    "ClientError",
    "ExperimentClient",
    "LocalExperimentResult",
    "LocalTrialResult",
    "Trial",
]
