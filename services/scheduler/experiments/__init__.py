"""The experiment manager, in rooms (one module each; none holds another: `dispatcher.py` builds
them and carries out what they emit, `effects.py` and the state machine's effects; `manager.py` is
the facade the API, the agent link and the scheduling loop call):

- `lifecycle`: an experiment's life as its user drives it (create, kill, pause, activate, end)
- `scheduling_pass`: one scheduling pass (what the policy sees, starts and preemptions)
- `trial_runs`: a trial's runs (start, workloads, stop, kill, exit, restart, failure)
- `adoption`: runs across broken agent streams (adopt what an agent reports, expire the rest)
- `result_intake`: what agents report (steps, validations, checkpoints, logs), a batch per commit
- `search_driver`: searcher operations, PBT children waiting for or copying a checkpoint
- `checkpoint_lifecycle`: the save_* policy (garbage collection) and checkpoint deletion
- `recovery`: rebuilding active experiments after a scheduler restart
- `revival`: activate of an experiment the infrastructure ended
- `machine`: the experiment's decisions as a pure state machine
- `unit_of_work`: one transaction per event or batch; messages to agents leave only after commit
- `state`: the live experiments and trials every room shares
"""

from pedl_scheduler.experiments.errors import NotFound, UserError
from pedl_scheduler.experiments.manager import ExperimentManager
from pedl_scheduler.experiments.wire import KIND_NAMES, WORKLOAD_KINDS, metrics_json, metrics_plain

__all__ = [
    "KIND_NAMES",
    "WORKLOAD_KINDS",
    "ExperimentManager",
    "NotFound",
    "UserError",
    "metrics_json",
    "metrics_plain",
]
