"""A PBT child created while its parent has not yet saved the state it copies keeps waiting for
that checkpoint across a scheduler restart, and then continues from it (not from scratch)."""

from __future__ import annotations

import asyncio
import itertools
import uuid

from pedl._metrics import to_struct
from pedl.sequencer import Kind
from pedl.v1 import agent_pb2, common_pb2
from pedl_scheduler.cluster import AgentHandle, Cluster
from pedl_scheduler.db import open_database
from pedl_scheduler.experiments import KIND_NAMES, ExperimentManager
from pedl_scheduler.storage.ops import experiments as experiment_ops
from pedl_scheduler.storage.ops import results as result_ops

CONFIG = """
entrypoint: model_def:TinyTrial
hyperparameters:
  learning_rate: {type: log, minval: -2, maxval: -0.3}
reproducibility: {experiment_seed: 3}
batches_per_step: 10
searcher:
  name: pbt
  metric: error
  population_size: 2
  num_rounds: 2
  length_per_round: {batches: 20}
  replace_function: {truncate_fraction: 0.5}
  explore_function: {resample_probability: 0.5, perturb_factor: 0.2}
"""


class ScriptedAgent:
    """Answers workloads one at a time; each validation reports a lower error than the last, so
    the member that reports last ends a round as the best and becomes the parent."""

    def __init__(self, manager: ExperimentManager, agent: AgentHandle) -> None:
        self.manager, self.agent = manager, agent
        self.errors = (1.0 / n for n in itertools.count(2))

    def answer_one(self) -> bool:
        while not self.agent.outbox.empty():
            message = self.agent.outbox.get_nowait()
            if message.WhichOneof("message") != "run_workload":
                continue
            w = message.run_workload.workload
            kind = KIND_NAMES[w.kind]
            if kind is Kind.TERMINATE:
                self.manager.on_trial_exited(
                    self.agent, agent_pb2.TrialExited(trial_id=w.trial_id, run_id=w.run_id)
                )
                return True
            result = common_pb2.WorkloadResult(workload=w, num_batches=10)
            if kind is Kind.RUN_STEP:
                result.metrics.CopyFrom(to_struct({"loss": 0.5}))
            elif kind is Kind.COMPUTE_VALIDATION_METRICS:
                result.metrics.CopyFrom(to_struct({"error": next(self.errors)}))
            else:
                result.checkpoint.CopyFrom(common_pb2.Checkpoint(uuid=str(uuid.uuid4()), trial_id=w.trial_id))
            self.manager.on_workload_completed(self.agent, result)
            return True
        return False


def start(db_path: str) -> tuple[ExperimentManager, ScriptedAgent]:
    cluster = Cluster()
    agent = cluster.connect(
        agent_pb2.RegisterAgent(agent_id="a0", slots=[common_pb2.Slot(id="0"), common_pb2.Slot(id="1")])
    )
    manager = ExperimentManager(open_database(db_path), cluster, "127.0.0.1:1")
    return manager, ScriptedAgent(manager, agent)


def test_a_waiting_child_copies_its_parents_round_end_checkpoint_after_a_restart(tmp_path) -> None:
    async def scenario() -> None:
        db_path = str(tmp_path / "scheduler.db")
        manager, agent = start(db_path)
        exp_id = manager.create_experiment(CONFIG, b"model", "model")
        manager.schedule()
        while not any(t.waiting_on is not None for t in manager.trials.values()):
            assert agent.answer_one(), "the round ended without a child waiting on its parent"
            manager.schedule()
        (child,) = [t for t in manager.trials.values() if t.waiting_on is not None]
        parent_id = child.waiting_on
        manager.db.close()  # the scheduler dies here; the agent's runs die with it

        manager, agent = start(db_path)
        manager.recover()
        assert manager.trials[child.id].waiting_on == parent_id
        manager.on_agent_registered(agent.agent, [])
        manager.expire_unconfirmed(float("inf"))
        for _ in range(500):
            manager.schedule()
            await asyncio.sleep(0)
            if not agent.answer_one() and exp_id not in manager.experiments:
                break
        state = experiment_ops.experiment_state(manager.db, exp_id)
        assert state == "COMPLETED"
        logs = "\n".join(r["message"] for r in result_ops.logs_after(manager.db, child.id, 0, limit=10**6))
        assert f"continues from trial {parent_id}'s checkpoint" in logs and "(batch 20)" in logs, logs
        steps = result_ops.steps_of(manager.db, child.id)
        assert [s["total_batches"] for s in steps] == [30, 40]
        manager.db.close()

    asyncio.run(scenario())
