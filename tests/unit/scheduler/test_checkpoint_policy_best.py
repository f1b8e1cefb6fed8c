"""checkpoint_policy: best on the scheduler: a checkpoint follows a validation only when it beats every
earlier validation of the experiment, other trials' included (Determined's definition)."""

from __future__ import annotations

import asyncio
import uuid

from sqlalchemy import select

from pedl._metrics import to_struct
from pedl.sequencer import Kind
from pedl.v1 import agent_pb2, common_pb2
from pedl_scheduler.cluster import Cluster
from pedl_scheduler.experiments import KIND_NAMES, ExperimentManager
from pedl_scheduler.storage import open_storage
from pedl_scheduler.storage.ops import trials as trial_ops
from pedl_scheduler.storage.tables import checkpoints

CONFIG = """
entrypoint: model_def:TinyTrial
hyperparameters:
  learning_rate: {type: categorical, vals: [0.1, 0.2]}
batches_per_step: 10
min_validation_period: {batches: 10}
checkpoint_policy: best
searcher: {name: grid, metric: error, max_length: {batches: 30}}
"""
# Validation errors in the order the trials (one at a time, on one slot) report them.
ERRORS = {1: [0.5, 0.6, 0.4], 2: [0.45, 0.3, 0.35]}


def test_only_validations_better_than_the_experiments_best_are_checkpointed(tmp_path) -> None:
    async def scenario() -> None:
        cluster = Cluster()
        agent = cluster.connect(agent_pb2.RegisterAgent(agent_id="a0", slots=[common_pb2.Slot(id="0")]))
        manager = ExperimentManager(open_storage(str(tmp_path / "scheduler.db")), cluster, "127.0.0.1:1")
        exp_id = manager.create_experiment(CONFIG, b"model", "model")
        errors = {trial: iter(values) for trial, values in ERRORS.items()}
        for _ in range(500):
            manager.schedule()
            await asyncio.sleep(0)
            if agent.outbox.empty():
                if exp_id not in manager.experiments:
                    break
                continue
            message = agent.outbox.get_nowait()
            if message.WhichOneof("message") != "run_workload":
                continue
            w = message.run_workload.workload
            kind = KIND_NAMES[w.kind]
            if kind is Kind.TERMINATE:
                manager.on_trial_exited(agent, agent_pb2.TrialExited(trial_id=w.trial_id, run_id=w.run_id))
                continue
            result = common_pb2.WorkloadResult(workload=w, num_batches=10)
            if kind is Kind.RUN_STEP:
                result.metrics.CopyFrom(to_struct({"loss": 0.5}))
            elif kind is Kind.COMPUTE_VALIDATION_METRICS:
                result.metrics.CopyFrom(to_struct({"error": next(errors[w.trial_id])}))
            else:
                result.checkpoint.CopyFrom(common_pb2.Checkpoint(uuid=str(uuid.uuid4()), trial_id=w.trial_id))
            manager.on_workload_completed(agent, result)
        # Every checkpoint recorded, whatever its state: garbage collection marks the ones it releases
        # DELETING (the store is unreachable here, so they stay so).
        rows = manager.db.rows(select(checkpoints).order_by(checkpoints.c.total_batches))
        checkpointed = {
            t["id"]: [c["total_batches"] for c in rows if c["trial_id"] == t["id"]]
            for t in trial_ops.trials_of(manager.db, exp_id)
        }
        # Trial 1: 0.5 is the first (best); 0.6 is not; 0.4 is, and also the trial's end.
        # Trial 2: 0.45 is worse than trial 1's 0.4; 0.3 beats it; 0.35 does not (its end is saved anyway).
        assert checkpointed == {1: [10, 30], 2: [20, 30]}
        manager.db.close()

    asyncio.run(scenario())
