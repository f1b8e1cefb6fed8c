"""Model definitions written for PEDL 0.11 and for Determined's PyTorchTrial, run unchanged on a
local cluster: searched with adaptive_asha (and PEDL 0.11's adaptive_simple), distributed over
gloo, resumed exactly after an agent is killed with SIGKILL mid-trial, and loaded back from a
downloaded checkpoint as Determined documents."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from test_cluster import logs, stub, submit, wait, wait_for_steps
from test_faults import trial_history

from pedl.experimental.client import get_experiment
from pedl.harness.compat import pythonpath_with_compat
from pedl.v1 import common_pb2, scheduler_pb2
from support.processes import local_cluster

pytestmark = pytest.mark.integration

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

PEDL011 = """
entrypoints:
  trial_class: model_def:DigitsTrial
  data_loaders_function: data:make_data_loaders
  download_data_function: data:download_data
hyperparameters:
  learning_rate: {type: const, val: 0.05}
  n_filters: {type: const, val: 4}
  dropout: {type: const, val: 0.1}
  batch_size: {type: const, val: 16}
"""

DETERMINED = """
entrypoint: model_def:DigitsTrial
hyperparameters:
  global_batch_size: 16
  learning_rate: 0.003
  hidden_size: 32
  dropout: 0.1
"""

# Deterministic: a fixed experiment seed; checkpoints every 2 steps, so a kill loses work to redo.
SINGLE = """
searcher: {name: single, metric: validation_error, smaller_is_better: true, max_length: {batches: 60}}
batches_per_step: 10
min_validation_period: {batches: 30}
min_checkpoint_period: {batches: 20}
reproducibility: {experiment_seed: 7}
"""

ASHA = """
searcher:
  name: adaptive_asha
  metric: validation_error
  smaller_is_better: true
  max_length: {batches: 40}
  max_trials: 4
  max_rungs: 2
  divisor: 4
  mode: aggressive
batches_per_step: 10
reproducibility: {experiment_seed: 3}
"""

GENERATIONS = {
    "pedl011": ("digits_pytorch_pedl011", PEDL011),
    "determined": ("digits_determined_pytorch", DETERMINED),
}

SHAPES = {"one-slot": {"agents": 1, "slots": 1}, "two-slots": {"agents": 1, "slots": 2}}


@pytest.fixture(scope="module")
def shared_cluster(request, tmp_path_factory):
    """One cluster of each shape for the tests that leave it as they found it (a start costs ~10 s on
    a loaded machine; each test reads only its own experiment). Parametrized per module, so pytest
    runs the tests of one shape together and stops that cluster before it starts the next."""
    with local_cluster(tmp_path_factory.mktemp("cluster"), **SHAPES[request.param]) as cluster:
        yield cluster


def on_shared(shape: str) -> pytest.MarkDecorator:
    return pytest.mark.parametrize("shared_cluster", [shape], indirect=True)


@pytest.mark.parametrize("generation", sorted(GENERATIONS))
def test_a_killed_agent_resumes_the_trial_exactly(tmp_path, generation: str) -> None:
    example, model_config = GENERATIONS[generation]
    config = model_config + SINGLE
    with local_cluster(tmp_path / "cluster", agents=2) as cluster:
        reference = submit(cluster, EXAMPLES / example, config)
        assert wait(cluster, reference).experiment.state == common_pb2.EXPERIMENT_STATE_COMPLETED, (
            cluster.logs()
        )

        exp_id = submit(cluster, EXAMPLES / example, config)
        wait_for_steps(cluster, exp_id, 3)
        (trial,) = (
            stub(cluster).GetExperiment(scheduler_pb2.GetExperimentRequest(experiment_id=exp_id)).trials
        )
        victim = next(a for a in cluster.agents if a.name == trial.agent_id)
        os.kill(victim.process.pid, signal.SIGKILL)

        result = wait(cluster, exp_id)
        assert result.experiment.state == common_pb2.EXPERIMENT_STATE_COMPLETED, cluster.logs()
        assert result.trials[0].restarts == 0  # a lost agent does not spend max_restarts
        steps, validations = trial_history(cluster, exp_id)
        assert [b for b, _ in steps] == list(range(10, 61, 10))
        assert "validation_error" in validations[-1][1]
        assert (steps, validations) == trial_history(cluster, reference)


@on_shared("one-slot")
@pytest.mark.parametrize("generation", sorted(GENERATIONS))
def test_an_adaptive_asha_search_completes(shared_cluster, generation: str) -> None:
    example, model_config = GENERATIONS[generation]
    model_config = model_config.replace(
        "learning_rate: {type: const, val: 0.05}",
        "learning_rate: {type: log, minval: -2, maxval: -1, base: 10}",
    )
    model_config = model_config.replace(
        "learning_rate: 0.003", "learning_rate: {type: log, minval: -3, maxval: -2, base: 10}"
    )
    # One slot: each configuration is alone in its rung when it reports there and stops; the best
    # is promoted once all four have, and continues as the same trial (Determined's adaptive_asha).
    cluster = shared_cluster
    exp_id = submit(cluster, EXAMPLES / example, model_config + ASHA)
    result = wait(cluster, exp_id, timeout=300)
    assert result.experiment.state == common_pb2.EXPERIMENT_STATE_COMPLETED, cluster.logs()
    assert len(result.trials) == 4 and len({str(t.hparams) for t in result.trials}) == 4
    assert all(t.best_validation_metric <= 1.0 for t in result.trials)
    (top,) = [t for t in result.trials if t.total_batches == 40]
    assert sorted(t.total_batches for t in result.trials) == [10, 10, 10, 40]
    assert top.best_validation_metric <= min(t.best_validation_metric for t in result.trials if t != top)
    detail = stub(cluster).GetTrial(scheduler_pb2.GetTrialRequest(trial_id=top.id))
    assert [s.total_batches for s in detail.steps] == [10, 20, 30, 40]
    # Promoted once all four had reported, the same trial continued from its checkpoint; unless it
    # was the last to report there and the best, which simply goes on.
    promoted = f"trial {top.id} promoted by the searcher: it continues from its checkpoint"
    assert promoted in logs(cluster, top.id) or top.id == max(t.id for t in result.trials)


@on_shared("two-slots")
@pytest.mark.parametrize("generation", sorted(GENERATIONS))
def test_a_trial_trains_on_two_slots_over_gloo(shared_cluster, generation: str) -> None:
    example, model_config = GENERATIONS[generation]
    config = (
        model_config + SINGLE.replace("batches: 60", "batches: 40") + "resources:\n  slots_per_trial: 2\n"
    )
    cluster = shared_cluster
    exp_id = submit(cluster, EXAMPLES / example, config)
    result = wait(cluster, exp_id, timeout=180)
    assert result.experiment.state == common_pb2.EXPERIMENT_STATE_COMPLETED, cluster.logs()
    steps, validations = trial_history(cluster, exp_id)
    assert [b for b, _ in steps] == [10, 20, 30, 40]
    assert 0.0 <= validations[-1][1]["validation_error"] <= 1.0


@on_shared("one-slot")
def test_a_pedl011_model_definition_searched_with_adaptive_simple_completes(shared_cluster) -> None:
    """The PEDL 0.11 config form of a search: `adaptive_simple` with `max_steps` and `max_trials`,
    the `entrypoints:` mapping, sampled hyperparameters of each type."""
    config = """
entrypoints:
  trial_class: model_def:DigitsTrial
  data_loaders_function: data:make_data_loaders
  download_data_function: data:download_data
hyperparameters:
  learning_rate: {type: log, minval: -2.5, maxval: -0.5, base: 10}
  n_filters: {type: int, minval: 2, maxval: 6}
  dropout: {type: double, minval: 0.0, maxval: 0.4}
  batch_size: {type: categorical, vals: [16, 32]}
searcher:
  name: adaptive_simple
  metric: validation_error
  smaller_is_better: true
  max_steps: 4
  max_trials: 4
  max_rungs: 2
  divisor: 4
  mode: aggressive
batches_per_step: 10
reproducibility: {experiment_seed: 5}
"""
    cluster = shared_cluster
    exp_id = submit(cluster, EXAMPLES / "digits_pytorch_pedl011", config)
    result = wait(cluster, exp_id, timeout=420)
    assert result.experiment.state == common_pb2.EXPERIMENT_STATE_COMPLETED, cluster.logs()
    assert len({str(t.hparams) for t in result.trials}) == 4
    batches = sorted(t.total_batches for t in result.trials)
    assert batches[0] == 10 and batches[-1] == 40  # stopped at the rung; the best went to the top
    assert all(0.0 <= t.best_validation_metric <= 1.0 for t in result.trials)


LOAD_SCRIPT = """
import json, sys
import torch
import determined as det
from determined.experimental import client

client.login(master=sys.argv[1])
checkpoint = client.get_experiment(int(sys.argv[2])).top_checkpoint()
path = checkpoint.download()
trial = det.pytorch.load_trial_from_checkpoint_path(path, map_location="cpu")
trial.model.eval()
with torch.no_grad():
    loader = trial.build_validation_data_loader()
    errors = [float(trial.evaluate_batch(b, i)["validation_error"]) for i, b in enumerate(loader)]
hidden = trial.context.get_hparam("hidden_size")
print(json.dumps({"class": type(trial).__name__, "hidden": hidden, "error": sum(errors) / len(errors)}))
"""


@on_shared("one-slot")
def test_a_downloaded_checkpoint_loads_in_a_fresh_process_as_determined_documents(
    shared_cluster, tmp_path
) -> None:
    """Determined's flow, in another process with no model definition on its path:
    `client.get_experiment(id).top_checkpoint().download()`, then
    `det.pytorch.load_trial_from_checkpoint_path(path)`: the trial comes back with its
    hyperparameters and trained weights, and validates as reported."""
    config = DETERMINED + SINGLE.replace("batches: 60", "batches: 30").replace("batches: 20", "batches: 30")
    cluster = shared_cluster
    # The test's session token (PEDL_TOKEN) is in the environment while the cluster runs.
    env = {**os.environ, "PYTHONPATH": pythonpath_with_compat(None)}
    env.pop("PEDL_MASTER", None)
    exp_id = submit(cluster, EXAMPLES / "digits_determined_pytorch", config)
    experiment = get_experiment(exp_id, master=cluster.master)
    assert experiment.wait(timeout=180) == "COMPLETED", cluster.logs()
    top = experiment.top_checkpoint()
    done = subprocess.run(
        [sys.executable, "-c", LOAD_SCRIPT, cluster.master, str(exp_id)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    loaded = json.loads(done.stdout.strip().splitlines()[-1])
    assert loaded["class"] == "DigitsTrial" and loaded["hidden"] == 32
    assert loaded["error"] == pytest.approx(top.validation_metrics["validation_error"], abs=1e-6)
