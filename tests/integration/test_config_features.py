"""Config fields that change training, on a real cluster: environment variables, initial validation,
checkpoint policy, gradient aggregation and mixed precision; refused fields create nothing."""

from __future__ import annotations

import grpc
import pytest
from test_auth import create_user, scheduler
from test_cluster import logs, stub, submit, wait

from pedl._metrics import from_struct
from pedl.context import pack
from pedl.v1 import common_pb2, scheduler_pb2
from support.models import tiny_config, write_tiny_model
from support.processes import local_cluster

pytestmark = pytest.mark.integration

CHECK_ENV = (
    "import os; assert os.environ.get('GREETING_29') == 'hello', dict(os.environ); "
    "assert os.environ.get('API_TOKEN') == 's3cr3t'; "
    "print('fetching https://bob:hunter22@data.example/x?signature=QQQ&page=2 with API_TOKEN=s3cr3t')"
)
FEATURES = """\
perform_initial_validation: true
checkpoint_policy: all
checkpoint_storage:
  save_trial_latest: 10  # every checkpoint taken stays listed (GC keeps them)
optimizations:
  aggregation_frequency: 2
  mixed_precision: O1
environment:
  environment_variables:
    - GREETING_29=hello
    - API_TOKEN=s3cr3t
data:
  url: https://reader:pa55word@data.example/set?token=abc123&split=train
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """One default cluster for the tests below that need nothing else (a start costs ~10 s loaded);
    each counts only its own experiments."""
    with local_cluster(tmp_path_factory.mktemp("cluster")) as shared:
        yield shared


def test_config_features_work_end_to_end_and_refused_fields_create_nothing(cluster, tmp_path) -> None:
    model = write_tiny_model(tmp_path / "env", build_model_body=CHECK_ENV)
    exp_id = submit(cluster, model, tiny_config(max_batches=40, extra=FEATURES))
    result = wait(cluster, exp_id)
    assert result.experiment.state == common_pb2.EXPERIMENT_STATE_COMPLETED, cluster.logs()
    (trial,) = result.trials
    detail = stub(cluster).GetTrial(scheduler_pb2.GetTrialRequest(trial_id=trial.id))
    assert [v.total_batches for v in detail.validations] == [0, 20, 40]
    assert sorted(c.total_batches for c in detail.checkpoints) == [20, 40]
    # describe masks the secret among the variables
    shown = from_struct(result.experiment.config)["environment"]["environment_variables"]
    assert shown == ["GREETING_29=hello", "API_TOKEN=********"]
    assert "s3cr3t" not in result.experiment.config_yaml
    # ... and the password and token in a URL, in the config and in the trial's own log lines
    shown_url = from_struct(result.experiment.config)["data"]["url"]
    assert shown_url == "https://reader:********@data.example/set?token=********&split=train"
    assert "pa55word" not in result.experiment.config_yaml and "abc123" not in str(result.experiment)
    printed = logs(cluster, trial.id)
    assert "https://bob:********@data.example/x?signature=********&page=2" in printed, printed
    assert "hunter22" not in printed and "QQQ" not in printed and "s3cr3t" not in printed

    before = stub(cluster).ListExperiments(scheduler_pb2.ListExperimentsRequest())
    refused = tiny_config(extra="checkpoint_storage:\n  type: gcs\n  bucket: b\n")
    with pytest.raises(grpc.RpcError) as info:
        submit(cluster, model, refused)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "checkpoint_storage.type" in (info.value.details() or "")
    after = stub(cluster).ListExperiments(scheduler_pb2.ListExperimentsRequest())
    assert len(after.experiments) == len(before.experiments)


def first_and_last_losses(cluster, trial_id: int) -> tuple[tuple[int, float], float]:
    detail = stub(cluster).GetTrial(scheduler_pb2.GetTrialRequest(trial_id=trial_id))
    losses = [from_struct(s.metrics)["loss"] for s in detail.steps]
    return (detail.steps[0].total_batches, losses[0]), losses[-1]


def test_a_warm_start_trains_on_from_the_source_checkpoints_weights_at_batch_0(cluster, tmp_path) -> None:
    model = write_tiny_model(tmp_path / "tiny")
    source_id = submit(cluster, model, tiny_config(max_batches=200))
    source = wait(cluster, source_id)
    assert source.experiment.state == common_pb2.EXPERIMENT_STATE_COMPLETED, cluster.logs()
    (source_trial,) = source.trials
    (_, cold_loss), trained_loss = first_and_last_losses(cluster, source_trial.id)
    uuid = source_trial.latest_checkpoint_uuid

    warm_id = submit(
        cluster,
        model,
        tiny_config(max_batches=40).replace(
            "    batches: 40", f"    batches: 40\n  source_checkpoint_uuid: {uuid}"
        ),
    )
    warm = wait(cluster, warm_id)
    assert warm.experiment.state == common_pb2.EXPERIMENT_STATE_COMPLETED, cluster.logs()
    (warm_trial,) = warm.trials
    (batches, warm_loss), _ = first_and_last_losses(cluster, warm_trial.id)
    assert batches == 10  # the batch count starts again at 0
    print(f"step-1 loss: warm {warm_loss:.4f}, source's last {trained_loss:.4f}, cold {cold_loss:.4f}")
    assert abs(warm_loss - trained_loss) < abs(warm_loss - cold_loss), (
        warm_loss,
        trained_loss,
        cold_loss,
    )

    by_trial = tiny_config().replace(
        "    batches: 40", f"    batches: 40\n  source_trial_id: {source_trial.id}"
    )
    before = len(stub(cluster).ListExperiments(scheduler_pb2.ListExperimentsRequest()).experiments)
    bob = scheduler(cluster.master, create_user(cluster, "bob"))
    packed = pack(model)
    for config, message in (
        (by_trial, "only its owner or an admin may warm-start from it"),
        (
            tiny_config().replace("    batches: 40", "    batches: 40\n  source_checkpoint_uuid: nosuch"),
            "checkpoint nosuch does not exist",
        ),
    ):
        request = scheduler_pb2.CreateExperimentRequest(
            config_yaml=config, model_definition=packed.data, model_definition_name=packed.name
        )
        with pytest.raises(grpc.RpcError) as info:
            bob.CreateExperiment(request, timeout=30)
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert message in (info.value.details() or "")
    after = len(stub(cluster).ListExperiments(scheduler_pb2.ListExperimentsRequest()).experiments)
    assert after == before


def test_checkpoint_policy_best_on_a_cluster_checkpoints_after_each_new_best(cluster, tmp_path) -> None:
    model = write_tiny_model(tmp_path / "tiny")
    # A large learning rate: the validation loss goes up and down, so not every validation is a new best.
    config = (
        tiny_config(
            max_batches=80,
            validation_period=10,
            # Every checkpoint taken stays listed: garbage collection keeps them.
            extra="checkpoint_policy: best\ncheckpoint_storage:\n  save_trial_latest: 100\n",
        )
        .replace("metric: error", "metric: validation_loss")
        .replace("learning_rate: 0.1", "learning_rate: 8.0")
    )
    result = wait(cluster, submit(cluster, model, config))
    assert result.experiment.state == common_pb2.EXPERIMENT_STATE_COMPLETED, cluster.logs()
    (trial,) = result.trials
    detail = stub(cluster).GetTrial(scheduler_pb2.GetTrialRequest(trial_id=trial.id))
    losses = [(v.total_batches, from_struct(v.metrics)["validation_loss"]) for v in detail.validations]
    improved = [b for i, (b, v) in enumerate(losses) if all(v < w for _, w in losses[:i])]
    assert set(improved) != {b for b, _ in losses}, losses
    assert sorted(c.total_batches for c in detail.checkpoints) == sorted(set(improved) | {80})


def test_bind_mounts_appear_at_container_path_in_a_sandbox_or_the_trial_fails_naming_the_mount(
    tmp_path,
) -> None:
    """As Determined's configs write them: host_path at container_path, read_only honoured; a host
    path outside the agent's --allowed-bind-root fails the trial naming the mount and the roots."""
    shared, elsewhere = tmp_path / "shared", tmp_path / "elsewhere"
    shared.mkdir()
    shared.chmod(0o777)  # the trial's (unprivileged) user writes here
    elsewhere.mkdir()
    write = "open({path!r}, 'w').write('from the trial')"
    with local_cluster(tmp_path / "cluster", agent_args=["--allowed-bind-root", str(shared)]) as cluster:
        (agent,) = stub(cluster).ListAgents(scheduler_pb2.ListAgentsRequest()).agents
        assert agent.isolation == "bwrap"
        mount = "bind_mounts:\n  - {{host_path: {p}, container_path: /data}}\nmax_restarts: 0\n"
        model = write_tiny_model(tmp_path / "w", build_model_body=write.format(path="/data/out"))
        exp_id = submit(cluster, model, tiny_config(max_batches=10, extra=mount.format(p=shared)))
        assert wait(cluster, exp_id).experiment.state == common_pb2.EXPERIMENT_STATE_COMPLETED, cluster.logs()
        assert (shared / "out").read_text() == "from the trial"
        assert (shared / "out").stat().st_uid != 0  # written as the trial's user, never root

        model = write_tiny_model(tmp_path / "e", build_model_body=write.format(path="/data/out"))
        exp_id = submit(cluster, model, tiny_config(max_batches=10, extra=mount.format(p=elsewhere)))
        result = wait(cluster, exp_id)
        assert result.experiment.state == common_pb2.EXPERIMENT_STATE_ERROR, cluster.logs()
        printed = logs(cluster, result.trials[0].id)
        assert f"bind_mounts[0].host_path {elsewhere}:" in printed and f"allowed roots: {shared}" in printed
        assert not (elsewhere / "out").exists()


def test_a_trial_class_under_determineds_launchers_runs_and_other_launchers_create_nothing(
    cluster, tmp_path
) -> None:
    model = write_tiny_model(tmp_path / "tiny")
    launched = "entrypoint: python3 -m determined.launch.horovod --autohorovod --trial :TinyTrial\n"
    exp_id = submit(cluster, model, tiny_config(max_batches=20, extra=launched))
    result = wait(cluster, exp_id)
    assert result.experiment.state == common_pb2.EXPERIMENT_STATE_COMPLETED, cluster.logs()
    assert result.trials[0].total_batches == 20

    before = len(stub(cluster).ListExperiments(scheduler_pb2.ListExperimentsRequest()).experiments)
    refused = "entrypoint: python3 -m determined.launch.horovod python3 train.py\n"
    with pytest.raises(grpc.RpcError) as info:
        submit(cluster, model, tiny_config(extra=refused))
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "entrypoint: determined.launch.horovod is not supported by pedl" in (info.value.details() or "")
    after = len(stub(cluster).ListExperiments(scheduler_pb2.ListExperimentsRequest()).experiments)
    assert after == before
