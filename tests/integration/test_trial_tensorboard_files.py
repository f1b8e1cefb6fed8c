"""A trial's own TensorBoard event files on a real local cluster: a Determined PyTorchTrial writing
with `context.get_tensorboard_writer()` and a Core API script writing to `get_tensorboard_path()`
(and, in the sandbox, to /tmp/tensorboard, Determined's documented logdir). After the experiments,
`pedl tensorboard`'s sync fetches them beside the metric runs and TensorBoard reads the scalars
back; a trial's token cannot write another trial's files; the orphan sweep keeps them; deleting the
experiment removes them."""

from __future__ import annotations

import hashlib
import time
from pathlib import Path

import grpc
import pytest
from test_cluster import stub, submit, wait

from pedl.checkpoints import CheckpointStoreClient, tensorboard
from pedl.v1 import checkpoint_store_pb2, checkpoint_store_pb2_grpc, common_pb2, scheduler_pb2
from support.processes import local_cluster

pytestmark = pytest.mark.integration

COMPLETED = common_pb2.EXPERIMENT_STATE_COMPLETED

TRIAL = """
import torch
from torch import nn

import determined as det
from determined.pytorch import DataLoader, PyTorchTrial


class WritingTrial(PyTorchTrial):
    def __init__(self, context):
        self.context = context
        self.model = context.wrap_model(nn.Linear(1, 1))
        self.opt = context.wrap_optimizer(torch.optim.SGD(self.model.parameters(), lr=0.01))

    def build_training_data_loader(self):
        x = torch.linspace(-1, 1, 64).unsqueeze(1)
        return DataLoader(torch.utils.data.TensorDataset(x, 2 * x), batch_size=8)

    def build_validation_data_loader(self):
        return self.build_training_data_loader()

    def train_batch(self, batch, epoch_idx, batch_idx):
        x, y = batch
        loss = nn.functional.mse_loss(self.model(x), y)
        self.context.backward(loss)
        self.context.step_optimizer(self.opt)
        self.context.get_tensorboard_writer().add_scalar("own/batch_index", batch_idx, batch_idx)
        return {"loss": loss}

    def evaluate_batch(self, batch):
        x, y = batch
        return {"validation_loss": nn.functional.mse_loss(self.model(x), y)}
"""

TRIAL_CONFIG = """
name: tb-trial
entrypoint: model_def:WritingTrial
hyperparameters: {global_batch_size: 8}
searcher: {name: single, metric: validation_loss, max_length: {batches: 20}}
batches_per_step: 10
max_restarts: 0
"""

SCRIPT = """
from pathlib import Path

import determined as det
from torch.utils.tensorboard import SummaryWriter

with det.core.init() as core_context:
    writer = SummaryWriter(log_dir=str(core_context.train.get_tensorboard_path()))
    sandboxed = SummaryWriter(log_dir="/tmp/tensorboard/sandboxed")
    for op in core_context.searcher.operations():
        for step in range(1, op.length + 1):
            writer.add_scalar("script/step_squared", step * step, step)
            sandboxed.add_scalar("script/from_tmp", step, step)
            if step % 5 == 0:
                writer.flush()
                sandboxed.flush()
                core_context.train.report_training_metrics(step, {"loss": 1.0 / step})
        core_context.train.report_validation_metrics(op.length, {"loss": 1.0 / op.length})
        op.report_completed(1.0 / op.length)
    writer.close()
    sandboxed.close()
"""

SCRIPT_CONFIG = """
name: tb-script
entrypoint: python3 script.py
searcher: {name: single, metric: loss, max_length: {batches: 10}}
max_restarts: 0
"""


def _scalars(directory: Path, tag: str) -> list[tuple[int, float]]:
    from tensorboard.backend.event_processing.event_multiplexer import EventMultiplexer

    mux = EventMultiplexer()
    mux.AddRunsFromDirectory(str(directory))
    mux.Reload()
    for run, tags in mux.Runs().items():
        if tag in tags.get("scalars", []):
            return [(e.step, e.value) for e in mux.Scalars(run, tag)]
    return []


def _sandboxed() -> bool:
    from pedl_agent.sandbox import bwrap_path, bwrap_problem

    path = bwrap_path()
    return path is not None and bwrap_problem(path) is None


@pytest.fixture(scope="module")
def ran(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("tbfiles")
    (workdir / "trial").mkdir()
    (workdir / "trial" / "model_def.py").write_text(TRIAL)
    (workdir / "script").mkdir()
    (workdir / "script" / "script.py").write_text(SCRIPT)
    # The orphan sweep every second with no grace: whatever it does not claim it removes at once.
    sweep = ["--orphan-sweep-interval", "1", "--orphan-sweep-grace", "0"]
    with local_cluster(workdir / "cluster", store_args=sweep) as cluster:
        try:
            trial_exp = submit(cluster, workdir / "trial", TRIAL_CONFIG)
            script_exp = submit(cluster, workdir / "script", SCRIPT_CONFIG)
            for exp_id in (trial_exp, script_exp):
                result = wait(cluster, exp_id, timeout=240)
                assert result.experiment.state == COMPLETED, cluster.logs()
            yield cluster, trial_exp, script_exp
        except BaseException:
            print(cluster.logs())
            raise


def test_pedl_tensorboard_sync_fetches_the_trials_own_event_files(ran, tmp_path) -> None:
    from pedl.cli.client import SchedulerClient
    from pedl.tensorboard import MetricsSync
    from pedl.tensorboard.files_sync import TrialFilesSync, files_dir

    cluster, trial_exp, script_exp = ran
    with SchedulerClient(cluster.master) as client, CheckpointStoreClient(cluster.store.address) as store:
        metrics = MetricsSync(client, tmp_path, [trial_exp, script_exp])
        assert metrics.refresh() is True
        metrics.close()
        files = TrialFilesSync(store, tmp_path, [trial_exp, script_exp])
        assert files.refresh() >= 2
        assert files.refresh() == 0  # nothing changed: nothing fetched again
        trial_id = client.get_experiment(trial_exp).trials[0].id
        script_trial = client.get_experiment(script_exp).trials[0].id

    own = _scalars(files_dir(tmp_path, trial_exp, trial_id), "own/batch_index")
    assert [step for step, _ in own] == list(range(20)), own
    assert [value for _, value in own] == [float(s) for s in range(20)]
    squared = _scalars(files_dir(tmp_path, script_exp, script_trial), "script/step_squared")
    assert squared == [(s, float(s * s)) for s in range(1, 11)]
    if _sandboxed():  # /tmp is the run's own only in the sandbox
        assert _scalars(files_dir(tmp_path, script_exp, script_trial), "script/from_tmp")[-1] == (10, 10.0)
    # `pedl tensorboard -t TRIAL_ID`: only the trials named of an experiment named through them.
    with CheckpointStoreClient(cluster.store.address) as store:
        only = {script_exp: {script_trial}, trial_exp: {trial_id + 1000}}
        TrialFilesSync(store, tmp_path / "one", [trial_exp, script_exp], only).refresh()
    assert files_dir(tmp_path / "one", script_exp, script_trial).is_dir()
    assert not files_dir(tmp_path / "one", trial_exp, trial_id).exists()
    # The metric runs are beside them, as before.
    assert (tmp_path / f"exp-{trial_exp}" / f"trial-{trial_id}" / "training").is_dir()


def test_a_trial_token_writes_only_its_own_trials_files(ran) -> None:
    from pedl_server_auth import trial_token

    cluster, trial_exp, _ = ran
    trial_id = (
        stub(cluster).GetExperiment(scheduler_pb2.GetExperimentRequest(experiment_id=trial_exp)).trials[0].id
    )
    secret = (cluster.workdir / "cluster-secret").read_text().strip()
    # A live run's token is what a harness holds; this one names a run the scheduler never started,
    # so even its own trial is refused as not live: the scope check comes first for another trial.
    token = trial_token.mint(secret, trial_exp, trial_id, run_id=1)
    channel = grpc.insecure_channel(cluster.store.address)
    try:
        store = checkpoint_store_pb2_grpc.CheckpointStoreServiceStub(channel)
        data = b"forged"
        chunk = checkpoint_store_pb2.FileChunk(
            path="events.out.tfevents.forged", data=data, last=True, sha256=hashlib.sha256(data).hexdigest()
        )
        header = checkpoint_store_pb2.TensorboardFilesHeader(
            experiment_id=trial_exp, trial_id=trial_id + 1000
        )
        requests = [
            checkpoint_store_pb2.UploadTensorboardFilesRequest(header=header),
            checkpoint_store_pb2.UploadTensorboardFilesRequest(chunk=chunk),
        ]
        with pytest.raises(grpc.RpcError) as refused:
            store.UploadTensorboardFiles(
                iter(requests), metadata=[("authorization", f"Bearer {token}")], timeout=30
            )
        assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED
        assert "may store only that trial's" in refused.value.details()
    finally:
        channel.close()
    with CheckpointStoreClient(cluster.store.address) as admin:
        assert tensorboard.list_files(admin, trial_exp, trial_id + 1000) == []


def test_the_orphan_sweep_keeps_them_and_deleting_the_experiment_removes_them(ran) -> None:
    cluster, trial_exp, script_exp = ran
    stored = cluster.workdir / "checkpoints" / "tensorboard" / str(script_exp)
    assert any(p.is_file() for p in stored.rglob("*"))
    # Sweeps ran (every second) since the files were stored, and more now; the files are still there.
    passes = cluster.store.log().count("orphan sweep done")
    deadline = time.monotonic() + 30
    while cluster.store.log().count("orphan sweep done") < passes + 2:
        assert time.monotonic() < deadline, cluster.store.log()[-2000:]
        time.sleep(0.2)
    assert any(p.is_file() for p in stored.rglob("*"))

    stub(cluster).DeleteExperiment(
        scheduler_pb2.DeleteExperimentRequest(experiment_id=script_exp), timeout=60
    )
    assert not stored.exists()
    with CheckpointStoreClient(cluster.store.address) as admin:
        assert tensorboard.list_files(admin, script_exp) == []
        assert tensorboard.list_files(admin, trial_exp)  # another experiment's stay
