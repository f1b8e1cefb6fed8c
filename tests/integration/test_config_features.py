"""Config fields that change training, on a real cluster: environment variables, initial validation,
checkpoint policy, gradient aggregation and mixed precision; refused fields create nothing."""

from __future__ import annotations

import grpc
import pytest
from test_cluster import stub, submit, wait

from pedl._metrics import from_struct
from pedl.v1 import common_pb2, scheduler_pb2
from support.models import tiny_config, write_tiny_model
from support.processes import local_cluster

pytestmark = pytest.mark.integration

CHECK_ENV = (
    "import os; assert os.environ.get('GREETING_29') == 'hello', dict(os.environ); "
    "assert os.environ.get('API_TOKEN') == 's3cr3t'"
)
FEATURES = """\
perform_initial_validation: true
checkpoint_policy: all
optimizations:
  aggregation_frequency: 2
  mixed_precision: O1
environment:
  environment_variables:
    - GREETING_29=hello
    - API_TOKEN=s3cr3t
"""


def test_config_features_work_end_to_end_and_refused_fields_create_nothing(tmp_path) -> None:
    with local_cluster(tmp_path / "cluster") as cluster:
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

        before = stub(cluster).ListExperiments(scheduler_pb2.ListExperimentsRequest())
        refused = tiny_config(extra="checkpoint_storage:\n  type: gcs\n  bucket: b\n")
        with pytest.raises(grpc.RpcError) as info:
            submit(cluster, model, refused)
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "checkpoint_storage.type" in (info.value.details() or "")
        after = stub(cluster).ListExperiments(scheduler_pb2.ListExperimentsRequest())
        assert len(after.experiments) == len(before.experiments)
