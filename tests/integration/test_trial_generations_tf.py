"""Determined's TFKerasTrial and EstimatorTrial (with their contexts) and PEDL 0.11's TFKerasTrial
run unchanged on a local cluster: they resume exactly after their agent is killed with SIGKILL
mid-trial, adaptive_asha stops them at a rung and promotes the best, which continues from its
checkpoint as the same trial, and a
trial returning the TensorBoard callback has its curves in pedl's TensorBoard files.
EstimatorTrial runs in the TensorFlow 2.15 environment (scripts/build-tf215-env) that an agent
offers as `tf215`."""

from __future__ import annotations

import os
import shutil
import signal
from pathlib import Path

import pytest
import yaml
from test_cluster import stub, submit, wait, wait_for_steps
from test_estimator import tf215_python  # noqa: F401  (the fixture)
from test_faults import trial_history

from pedl._metrics import from_struct
from pedl.v1 import common_pb2, scheduler_pb2
from support.processes import local_cluster

pytestmark = pytest.mark.integration

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def small(example: str, batches: int) -> str:
    raw = yaml.safe_load((EXAMPLES / example / "const.yaml").read_text())
    raw["searcher"]["max_length"] = {"batches": batches}
    raw.update(
        scheduling_unit=10,
        min_validation_period={"batches": 20},
        min_checkpoint_period={"batches": 20},
        reproducibility={"experiment_seed": 11},
    )
    return yaml.safe_dump(raw)


@pytest.fixture(scope="module")
def one_slot_cluster(tmp_path_factory):
    """One one-slot cluster (TensorFlow preloaded) for the tests that leave it as they found it: a
    start costs ~10 s on a loaded machine, and each test reads only its own experiment. The tests
    that kill an agent, or need the TensorFlow 2.15 environment, start their own."""
    with local_cluster(
        tmp_path_factory.mktemp("cluster"), agents=1, slots=1, preload_tensorflow=True
    ) as cluster:
        yield cluster


def killed_run_matches_reference(cluster, example: str, config: str) -> None:
    reference = submit(cluster, EXAMPLES / example, config)
    assert wait(cluster, reference, timeout=300).experiment.state == common_pb2.EXPERIMENT_STATE_COMPLETED, (
        cluster.logs()
    )
    exp_id = submit(cluster, EXAMPLES / example, config)
    wait_for_steps(cluster, exp_id, 3, timeout=180)
    (trial,) = stub(cluster).GetExperiment(scheduler_pb2.GetExperimentRequest(experiment_id=exp_id)).trials
    victim = next(a for a in cluster.agents if a.name == trial.agent_id)
    os.kill(victim.process.pid, signal.SIGKILL)
    result = wait(cluster, exp_id, timeout=300)
    assert result.experiment.state == common_pb2.EXPERIMENT_STATE_COMPLETED, cluster.logs()
    assert result.trials[0].restarts == 0  # a lost agent does not spend max_restarts
    steps, validations = trial_history(cluster, exp_id)
    assert [b for b, _ in steps] == list(range(10, 61, 10))
    # The searcher's metric as the framework names it: Keras `val_accuracy`, an Estimator's eval
    # metric as its `eval_metric_ops` name it (`accuracy`).
    assert yaml.safe_load(config)["searcher"]["metric"] in validations[-1][1]
    assert (steps, validations) == trial_history(cluster, reference)


def test_a_determined_tfkeras_trial_resumes_exactly_after_its_agent_is_killed(tmp_path) -> None:
    with local_cluster(tmp_path / "cluster", agents=2, preload_tensorflow=True) as cluster:
        killed_run_matches_reference(cluster, "digits_determined_keras", small("digits_determined_keras", 60))


def test_a_determined_estimator_trial_resumes_exactly_after_its_agent_is_killed(
    tmp_path,
    tf215_python: str,  # noqa: F811
) -> None:
    agent_args = ["--environment", f"tf215={tf215_python}"]
    with local_cluster(
        tmp_path / "cluster", agents=2, agent_args=agent_args, preload_tensorflow=True
    ) as cluster:
        config = small("digits_determined_estimator", 60)
        killed_run_matches_reference(cluster, "digits_determined_estimator", config)


def asha(example: str) -> str:
    """Four configurations, one rung at 10 batches and the top at 40: on one slot each of the four
    stops at the first rung, then the best continues from its checkpoint (the same trial). PEDL 0.11
    configs count in steps (`batches_per_step`, `max_steps`), Determined's in batches."""
    raw = yaml.safe_load((EXAMPLES / example / "const.yaml").read_text())
    raw["hyperparameters"]["learning_rate"] = {"type": "log", "minval": -3, "maxval": -1, "base": 10}
    searcher = {
        "name": "adaptive_asha",
        "mode": "aggressive",
        "metric": raw["searcher"]["metric"],  # val_accuracy (Keras) or accuracy (an Estimator's)
        "smaller_is_better": False,
        "max_trials": 4,
    }
    raw.pop("min_validation_period", None)
    if "batches_per_step" in raw:
        raw["searcher"] = {**searcher, "max_steps": 4, "max_rungs": 2, "divisor": 4}
        raw["batches_per_step"] = 10
    else:
        raw["searcher"] = {**searcher, "max_length": {"batches": 40}, "max_rungs": 2, "divisor": 4}
        raw["scheduling_unit"] = 10
    raw["reproducibility"] = {"experiment_seed": 5}
    return yaml.safe_dump(raw)


def stopped_at_the_rung_then_resumed(cluster, exp_id: int, metric: str = "val_accuracy") -> None:
    result = wait(cluster, exp_id, timeout=540)
    assert result.experiment.state == common_pb2.EXPERIMENT_STATE_COMPLETED, cluster.logs()
    details = [stub(cluster).GetTrial(scheduler_pb2.GetTrialRequest(trial_id=t.id)) for t in result.trials]
    assert len(details) == 4  # max_trials: a promotion is no further trial
    stopped = [d for d in details if d.trial.total_batches == 10]
    resumed = [d for d in details if d.trial.total_batches == 40]
    assert len(stopped) == 3 and len(resumed) == 1
    assert len({str(d.trial.hparams) for d in details}) == 4
    (top,) = resumed
    # The best configuration at the rung goes on from its checkpoint there: its steps run 10..40.
    assert [s.total_batches for s in top.steps] == [10, 20, 30, 40]
    first = {d.trial.id: from_struct(d.validations[0].metrics)[metric] for d in details}
    assert first[top.trial.id] == max(first.values())
    assert all(metric in from_struct(d.validations[-1].metrics) for d in details)


def test_a_determined_tfkeras_trial_is_stopped_at_a_rung_and_resumed_by_adaptive_asha(
    one_slot_cluster,
) -> None:
    exp_id = submit(one_slot_cluster, EXAMPLES / "digits_determined_keras", asha("digits_determined_keras"))
    stopped_at_the_rung_then_resumed(one_slot_cluster, exp_id)


def test_a_pedl011_keras_trial_is_stopped_at_a_rung_and_resumed_by_adaptive_asha(one_slot_cluster) -> None:
    exp_id = submit(one_slot_cluster, EXAMPLES / "digits_keras_pedl011", asha("digits_keras_pedl011"))
    stopped_at_the_rung_then_resumed(one_slot_cluster, exp_id)


def test_a_determined_estimator_trial_is_stopped_at_a_rung_and_resumed_by_adaptive_asha(
    tmp_path,
    tf215_python: str,  # noqa: F811
) -> None:
    agent_args = ["--environment", f"tf215={tf215_python}"]
    with local_cluster(
        tmp_path / "cluster", agents=1, slots=1, agent_args=agent_args, preload_tensorflow=True
    ) as cluster:
        config = asha("digits_determined_estimator")
        exp_id = submit(cluster, EXAMPLES / "digits_determined_estimator", config)
        stopped_at_the_rung_then_resumed(cluster, exp_id, metric="accuracy")


class SchedulerSource:
    """pedl.tensorboard.MetricsSource over the cluster's scheduler stub."""

    def __init__(self, cluster) -> None:
        self.stub = stub(cluster)

    def get_experiment(self, experiment_id: int) -> scheduler_pb2.GetExperimentResponse:
        return self.stub.GetExperiment(scheduler_pb2.GetExperimentRequest(experiment_id=experiment_id))

    def get_trial(self, trial_id: int) -> scheduler_pb2.GetTrialResponse:
        return self.stub.GetTrial(scheduler_pb2.GetTrialRequest(trial_id=trial_id))


def test_a_tfkeras_trial_with_the_tensorboard_callback_has_its_curves_in_pedl_tensorboard(
    one_slot_cluster, tmp_path
) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from pedl.tensorboard import MetricsSync, run_dir

    model = Path(shutil.copytree(EXAMPLES / "digits_determined_keras", tmp_path / "det_keras_tb"))
    source = (model / "model_def.py").read_text()
    callback = "det_keras.callbacks.TensorBoard(update_freq='batch')"
    source += f"\n    def keras_callbacks(self):\n        return [{callback}]\n"
    (model / "model_def.py").write_text(source)
    cluster = one_slot_cluster
    exp_id = submit(cluster, model, small("digits_determined_keras", 40))
    result = wait(cluster, exp_id, timeout=300)
    assert result.experiment.state == common_pb2.EXPERIMENT_STATE_COMPLETED, cluster.logs()
    sync = MetricsSync(SchedulerSource(cluster), tmp_path / "logdir", [exp_id])
    assert sync.refresh() is True
    sync.close()
    (trial,) = result.trials
    curves = {}
    for kind in ("training", "validation"):
        accumulator = EventAccumulator(str(run_dir(tmp_path / "logdir", exp_id, trial.id, kind)))
        accumulator.Reload()
        curves[kind] = {
            tag: [e.step for e in accumulator.Scalars(tag)] for tag in accumulator.Tags()["scalars"]
        }
    assert curves["training"]["accuracy"] == [10, 20, 30, 40]
    assert curves["validation"]["val_accuracy"] == [20, 40]
