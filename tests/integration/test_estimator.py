"""EstimatorTrial on a real cluster, in the TensorFlow 2.15 environment that scripts/build-tf215-env
builds and an agent offers as `tf215`; the scheduler refuses environments no agent offers."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import grpc
import pytest
import yaml
from test_cluster import stub, submit, wait
from test_faults import trial_history

from pedl.checkpoints import CheckpointStoreClient
from pedl.v1 import common_pb2, scheduler_pb2
from support.processes import local_cluster

pytestmark = pytest.mark.integration

ROOT = Path(__file__).parents[2]
EXAMPLE = ROOT / "examples" / "digits_estimator"


@pytest.fixture(scope="module")
def tf215_python() -> str:
    """The environment's interpreter; built on first use (pip), cached by the script's stamp file."""
    started = time.monotonic()
    try:
        done = subprocess.run(
            [str(ROOT / "scripts" / "build-tf215-env")], capture_output=True, text=True, timeout=900
        )
    except subprocess.TimeoutExpired:
        pytest.skip("scripts/build-tf215-env took over 15 minutes (pip could not fetch the packages?)")
    if done.returncode != 0:
        pytest.skip(f"scripts/build-tf215-env failed (cannot fetch TensorFlow 2.15?):\n{done.stderr[-2000:]}")
    print(f"tf215 environment ready in {time.monotonic() - started:.1f}s")
    return done.stdout.strip().splitlines()[-1]


def config(environment: str = "tf215") -> str:
    raw = yaml.safe_load((EXAMPLE / "const.yaml").read_text())
    raw["searcher"].pop("max_steps")
    raw["searcher"]["max_length"] = {"batches": 40}
    raw.update(
        environment=environment,
        batches_per_step=10,
        min_validation_period={"batches": 20},
        min_checkpoint_period={"batches": 20},
    )
    return yaml.safe_dump(raw)


def test_an_estimator_trial_completes_in_the_tf215_environment(tmp_path, tf215_python) -> None:
    agent_args = ["--environment", f"tf215={tf215_python}"]
    with local_cluster(tmp_path / "cluster", agent_args=agent_args) as cluster:
        with pytest.raises(grpc.RpcError) as refused:
            submit(cluster, EXAMPLE, config("tf999"))
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "'tf999' is not offered by any connected agent" in refused.value.details()
        assert "default, tf215" in refused.value.details()

        exp_id = submit(cluster, EXAMPLE, config())
        result = wait(cluster, exp_id, timeout=240)
        assert result.experiment.state == common_pb2.EXPERIMENT_STATE_COMPLETED, cluster.logs()
        steps, validations = trial_history(cluster, exp_id)
        assert [b for b, _ in steps] == [10, 20, 30, 40]
        assert [b for b, _ in validations] == [20, 40]
        assert validations[-1][1]["accuracy"] > 0.5
        detail = stub(cluster).GetTrial(scheduler_pb2.GetTrialRequest(trial_id=result.trials[0].id))
        assert detail.checkpoints[-1].total_batches == 40
        with CheckpointStoreClient(cluster.store.address) as store:
            files = [f.path for f in store.get(detail.checkpoints[-1].uuid).files]
        # One SavedModel per build_serving_input_receiver_fns() entry: serving/<timestamp>/.
        assert any(p.startswith("serving/") and p.endswith("/saved_model.pb") for p in files), files
        assert any(p.startswith("estimator/model.ckpt-40.") for p in files), files


def test_the_estimator_step_benchmark_runs_in_smoke_mode(tf215_python) -> None:
    done = subprocess.run(
        [tf215_python, str(ROOT / "benchmarks" / "estimator_steps.py"), "--smoke"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "one train() call:" in done.stdout and "ratio:" in done.stdout, done.stdout
