"""The scheduler's own statements, end to end, on a real PostgreSQL 15.

The ExperimentManager creates, runs and finishes an experiment against PostgreSQL, and the
`pedl-scheduler` process serves its API from a `postgresql://` database and recovers from it.
"""

from __future__ import annotations

import asyncio
import io
import tarfile
import uuid

import pytest

from pedl import _grpc
from pedl._metrics import to_struct
from pedl.sequencer import Kind
from pedl.v1 import agent_pb2, common_pb2, scheduler_pb2, scheduler_pb2_grpc
from pedl_scheduler.cluster import AgentHandle, Cluster
from pedl_scheduler.experiments import KIND_NAMES, ExperimentManager
from pedl_scheduler.storage import open_storage
from support import processes, stored
from support.models import tiny_config

pytestmark = pytest.mark.integration


def _model() -> bytes:
    """A plain tar (the scheduler refuses anything else) holding every byte value."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        data = bytes(range(256)) * 64
        info = tarfile.TarInfo("model_def.py")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


MODEL = _model()


def answer_workloads(manager: ExperimentManager, agent: AgentHandle) -> list[Kind]:
    """Plays a well-behaved agent until its outbox is empty; returns the workload kinds it ran."""
    kinds = []
    while not agent.outbox.empty():
        message = agent.outbox.get_nowait()
        if message.WhichOneof("message") != "run_workload":
            continue
        w = message.run_workload.workload
        kind = KIND_NAMES[w.kind]
        kinds.append(kind)
        if kind is Kind.TERMINATE:
            manager.on_trial_exited(agent, agent_pb2.TrialExited(trial_id=w.trial_id, run_id=w.run_id))
            continue
        result = common_pb2.WorkloadResult(workload=w, num_batches=10)
        if kind is Kind.RUN_STEP:
            result.metrics.CopyFrom(to_struct({"loss": 0.5}))
        elif kind is Kind.COMPUTE_VALIDATION_METRICS:
            result.metrics.CopyFrom(to_struct({"error": 0.25}))
        else:
            result.checkpoint.CopyFrom(common_pb2.Checkpoint(uuid=str(uuid.uuid4()), trial_id=w.trial_id))
        manager.on_workload_completed(agent, result)
    return kinds


def test_an_experiment_runs_to_completion_on_postgres(postgres_url: str) -> None:
    async def scenario() -> None:
        db = open_storage(postgres_url)
        cluster = Cluster()
        agent = cluster.connect(agent_pb2.RegisterAgent(agent_id="a0", slots=[common_pb2.Slot(id="0")]))
        manager = ExperimentManager(db, cluster, "127.0.0.1:1")
        exp_id = manager.create_experiment(tiny_config(max_batches=40), MODEL, "model")
        assert stored.rows(db, "SELECT id, state FROM experiments") == [{"id": exp_id, "state": "ACTIVE"}]
        (trial,) = stored.rows(db, "SELECT * FROM trials WHERE experiment_id = :e", e=exp_id)
        assert trial["state"] == "ACTIVE" and trial["request_id"]

        manager.schedule()
        kinds = answer_workloads(manager, agent)
        await asyncio.sleep(0)
        assert kinds.count(Kind.RUN_STEP) == 4 and kinds[-1] is Kind.TERMINATE

        experiment = stored.row(db, "SELECT state, model_definition FROM experiments WHERE id = :e", e=exp_id)
        assert experiment["state"] == "COMPLETED" and bytes(experiment["model_definition"]) == MODEL
        trial = stored.row(db, "SELECT * FROM trials WHERE id = :t", t=trial["id"])
        assert (trial["state"], trial["total_batches"], trial["best_validation"]) == ("COMPLETED", 40, 0.25)
        assert trial["start_time"] and trial["end_time"] and trial["latest_checkpoint_uuid"]
        steps = stored.rows(db, "SELECT step_id, total_batches FROM steps ORDER BY total_batches")
        assert steps == [{"step_id": i, "total_batches": 10 * i} for i in range(1, 5)]
        assert stored.row(db, "SELECT COUNT(*) AS n FROM validations")["n"] >= 1
        # checkpoint_policy best (the default): after each validation that is the best so far (20, 40).
        saved = stored.rows(db, "SELECT total_batches FROM checkpoints ORDER BY total_batches")
        assert [r["total_batches"] for r in saved] == [20, 40]
        assert stored.row(db, "SELECT COUNT(*) AS n FROM trial_logs")["n"] >= 1

        killed = manager.create_experiment(tiny_config(), MODEL, "model")
        manager.kill_experiment(killed)
        assert stored.row(db, "SELECT state FROM experiments WHERE id = :e", e=killed)["state"] == "CANCELED"
        db.close()

        # A restarted scheduler finds nothing left to run.
        restarted = ExperimentManager(open_storage(postgres_url), Cluster(), "127.0.0.1:1")
        restarted.recover()
        assert restarted.experiments == {} and restarted.trials == {}
        restarted.db.close()

    asyncio.run(scenario())


def test_the_scheduler_process_serves_from_postgres_and_recovers(tmp_path, postgres_url: str) -> None:
    def start() -> processes.Service:
        port_file = tmp_path / "scheduler.port"
        port_file.unlink(missing_ok=True)
        args = ["pedl-scheduler", "--port", "0", "--db", postgres_url, "--checkpoint-store", "127.0.0.1:1"]
        return processes.start("scheduler", [*args, "--port-file", str(port_file)], tmp_path, port_file)

    scheduler = start()
    try:
        stub = scheduler_pb2_grpc.SchedulerServiceStub(_grpc.channel(scheduler.address))
        created = stub.CreateExperiment(
            scheduler_pb2.CreateExperimentRequest(
                config_yaml=tiny_config(), model_definition=MODEL, model_definition_name="model"
            ),
            timeout=30,
        )
        exp_id = created.experiment.id
        listed = stub.ListExperiments(scheduler_pb2.ListExperimentsRequest(), timeout=30).experiments
        assert [e.id for e in listed] == [exp_id]
    finally:
        processes.stop(scheduler.process)

    scheduler = start()
    try:
        stub = scheduler_pb2_grpc.SchedulerServiceStub(_grpc.channel(scheduler.address))
        listed = stub.ListExperiments(scheduler_pb2.ListExperimentsRequest(), timeout=30).experiments
        assert [(e.id, e.state) for e in listed] == [(exp_id, common_pb2.EXPERIMENT_STATE_ACTIVE)]
        request = scheduler_pb2.GetModelDefinitionRequest(experiment_id=exp_id)
        assert stub.GetModelDefinition(request, timeout=30).model_definition == MODEL
    finally:
        processes.stop(scheduler.process)
