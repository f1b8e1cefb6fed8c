# ruff: noqa: E501  (a table of configs reads better one per line)
"""Malformed and unsupported configs: `experiment create` prints one line naming the file, the line
and the field, exits 2, and contacts no scheduler (nothing is created)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pedl.cli.main import main

S = "searcher:\n  name: single\n  metric: loss\n  max_length:\n    batches: 10\n"  # lines 1-5

# (config text, line, field)
CASES: list[tuple[str, int, str]] = [
    # wrong types
    (S + "max_restarts: many\n", 6, "max_restarts"),
    (S + "max_restarts: 1.5\n", 6, "max_restarts"),
    (S + "description: [a]\n", 6, "description"),
    (S + "data: 3\n", 6, "data"),
    (S + "records_per_epoch: true\n", 6, "records_per_epoch"),
    (S + "resources:\n  slots_per_trial: two\n", 7, "resources.slots_per_trial"),
    (S + "resources:\n  weight: 0\n", 7, "resources.weight"),
    (S + "reproducibility:\n  experiment_seed: -1\n", 7, "reproducibility.experiment_seed"),
    (S + "environment: 7\n", 6, "environment"),
    (S + "environment:\n  environment_variables: FOO=1\n", 7, "environment.environment_variables"),
    (S + "environment:\n  environment_variables:\n    - FOO\n", 8, "environment.environment_variables[0]"),
    (
        S + "environment:\n  environment_variables:\n    - PEDL_TRIAL_ID=3\n",
        8,
        "environment.environment_variables[0]",
    ),
    (S + "environment:\n  environment_variables:\n    - RANK=3\n", 8, "environment.environment_variables[0]"),
    (S + "checkpoint_storage:\n  type: s3\n  bucket: 5\n", 8, "checkpoint_storage.bucket"),
    (S + "optimizations:\n  aggregation_frequency: 0\n", 7, "optimizations.aggregation_frequency"),
    (S + "optimizations:\n  mixed_precision: O7\n", 7, "optimizations.mixed_precision"),
    (S + "optimizations:\n  tensor_fusion_threshold: -1\n", 7, "optimizations.tensor_fusion_threshold"),
    (S + "profiling:\n  sync_timings: maybe\n", 7, "profiling.sync_timings"),
    (S + "debug: yes\n", 6, "debug"),  # YAML 1.2: `yes` is a string, not a boolean
    (S + "pbs:\n  slots_per_node: 0\n", 7, "pbs.slots_per_node"),
    # unknown keys at every level
    ("searcher:\n  name: single\n  metric: loss\n  max_lenght:\n    batches: 10\n", 4, "searcher.max_lenght"),
    (S + "max_restart: 3\n", 6, "max_restart"),
    (S + "resources:\n  slot_per_trial: 2\n", 7, "resources.slot_per_trial"),
    (S + "optimizations:\n  bogus_key: 1\n", 7, "optimizations.bogus_key"),
    (S + "environment:\n  imag: x\n", 7, "environment.imag"),
    (
        S + "environment:\n  environment_variables:\n    tpu: [A=1]\n",
        8,
        "environment.environment_variables.tpu",
    ),
    (S + "environment:\n  image:\n    cpus: x\n", 8, "environment.image.cpus"),
    (
        S + "checkpoint_storage:\n  type: shared_fs\n  host_path: /tmp\n  bukket: b\n",
        9,
        "checkpoint_storage.bukket",
    ),
    (S + "checkpoint_storage:\n  save_trial_bets: 1\n", 7, "checkpoint_storage.save_trial_bets"),
    (S + "profiling:\n  enable: false\n", 7, "profiling.enable"),
    (S + "reproducibility:\n  seed: 1\n", 7, "reproducibility.seed"),
    (S + "slurm:\n  sbatch: [-x]\n", 7, "slurm.sbatch"),
    (S + "resources:\n  bogus: null\n", 7, "resources.bogus"),
    # out of range
    (S + "resources:\n  priority: 0\n", 7, "resources.priority"),
    (S + "max_restarts: -1\n", 6, "max_restarts"),
    (S + "scheduling_unit: 0\n", 6, "scheduling_unit"),
    (
        "searcher:\n  name: single\n  metric: loss\n  max_length:\n    batches: -5\n",
        5,
        "searcher.max_length.batches",
    ),
    (S + "profiling:\n  begin_on_batch: 9\n  end_after_batch: 3\n", 7, "profiling.begin_on_batch"),
    (
        S + "checkpoint_storage:\n  type: s3\n  bucket: b\n  prefix: runs/../../etc\n",
        9,
        "checkpoint_storage.prefix",
    ),
    (
        S + "checkpoint_storage:\n  type: shared_fs\n  host_path: /srv\n  storage_path: /etc\n",
        9,
        "checkpoint_storage.storage_path",
    ),
    (
        S + "checkpoint_storage:\n  type: shared_fs\n  host_path: relative\n",
        8,
        "checkpoint_storage.host_path",
    ),
    # duplicate keys
    (S + "searcher:\n  name: random\n", 6, "searcher"),
    (S + "resources:\n  slots_per_trial: 1\n  slots_per_trial: 2\n", 8, "resources.slots_per_trial"),
    # lengths in units that cannot be converted
    (  # records with a batch size that is not a whole number
        "hyperparameters:\n  global_batch_size:\n    type: double\n    minval: 8\n    maxval: 64\n"
        "searcher:\n  name: single\n  metric: loss\n  max_length:\n    records: 640\n",
        10,
        "searcher.max_length.records",
    ),
    (  # the adaptive searcher's budget in another unit than its max_length
        "searcher:\n  name: adaptive\n  metric: loss\n  max_length:\n    epochs: 2\n  budget:\n    batches: 900\n",
        6,
        "searcher.budget",
    ),
    (
        "searcher:\n  name: single\n  metric: loss\n  max_length:\n    records: 640\n",
        5,
        "searcher.max_length.records",
    ),
    ("searcher:\n  name: single\n  metric: loss\n  max_length:\n    minutes: 5\n", 4, "searcher.max_length"),
    (S + "min_validation_period:\n  records: 100\n", 7, "min_validation_period.records"),
    # unsupported features, refused naming the field
    (S + "checkpoint_storage:\n  type: gcs\n  bucket: b\n", 7, "checkpoint_storage.type"),
    (S + "checkpoint_storage:\n  type: azure\n  container: c\n", 7, "checkpoint_storage.type"),
    (S + "checkpoint_storage:\n  type: hdfs\n  hdfs_url: u\n  hdfs_path: /p\n", 7, "checkpoint_storage.type"),
    (
        S + "bind_mounts:\n  - host_path: /data\n    container_path: /usr/lib\n",
        8,
        "bind_mounts[0].container_path",
    ),
    (
        S + "bind_mounts:\n  - host_path: /data\n    container_path: /data\n    propagation: rfoo\n",
        9,
        "bind_mounts[0].propagation",
    ),
    (S + "resources:\n  agent_label: gpu@rack1\n", 7, "resources.agent_label"),
    (S + "resources:\n  shm_size: 3 gi\n", 7, "resources.shm_size"),
    (S + "optimizations:\n  average_training_metrics: false\n", 7, "optimizations.average_training_metrics"),
    (S + "perform_initial_validation: 1\n", 6, "perform_initial_validation"),
    ("searcher:\n  name: sync_halving\n  metric: loss\n  num_rungs: 3\n", 2, "searcher.name"),
    (
        "searcher:\n  name: async_halving\n  metric: loss\n  max_trials: 4\n  max_length: 8\n  num_rungs: 5\n",
        6,
        "searcher.num_rungs",
    ),
    (S.replace("batches: 10\n", "batches: 10\n  source_trial_id: four\n"), 6, "searcher.source_trial_id"),
    (S + "checkpoint_policy: better\n", 6, "checkpoint_policy"),
    (S + "resources:\n  devices:\n    - {host_path: /dev/x}\n", 8, "resources.devices[0].container_path"),
    (S + "profiling:\n  enabled: true\n", 7, "profiling.enabled"),
    (S + "log_policies:\n  - pattern: OOM\n    action: cancel_retries\n", 8, "log_policies[0].action"),
]


@pytest.fixture
def context_dir(tmp_path: Path) -> Path:
    d = tmp_path / "model"
    d.mkdir()
    (d / "__init__.py").write_text(
        "from pedl.pytorch import PyTorchTrial\n\nclass T(PyTorchTrial):\n    pass\n"
    )
    return d


def test_at_least_forty_cases() -> None:
    assert len(CASES) >= 40


@pytest.mark.parametrize(("text", "line", "field"), CASES, ids=[c[2] for c in CASES])
def test_bad_config_is_one_line_with_file_line_field(
    text: str,
    line: int,
    field: str,
    tmp_path: Path,
    context_dir: Path,
    unused_address: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    config = tmp_path / "exp.yaml"
    config.write_text(text)
    code = main(["--master", unused_address, "experiment", "create", str(config), str(context_dir)])
    err = capsys.readouterr().err
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"error: {config}, line {line}: {field}: "), err
    assert "cannot reach" not in err  # refused before any scheduler was contacted


def test_a_warm_start_is_refused_locally_in_one_line(
    tmp_path: Path, context_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "exp.yaml"
    config.write_text(S.replace("batches: 10\n", "batches: 10\n  source_checkpoint_uuid: abc\n"))
    code = main(["experiment", "create", "--local", str(config), str(context_dir)])
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.strip().splitlines() == [
        f"error: {config}: searcher.source_checkpoint_uuid: a warm start reads the checkpoint from a "
        "cluster's store, so it runs only on a cluster (pedl experiment create); locally, load the "
        "weights in your Trial"
    ], err


def _alias_bomb() -> str:
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    lines += [f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 12)]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(
    ("text", "message"),
    [(_alias_bomb(), "aliases expanded"), ("x: " + "[" * 10_000 + "]" * 10_000 + "\n", "nested more than")],
    ids=["alias-bomb", "10000-deep"],
)
def test_yaml_bombs_are_one_line_not_a_hang_or_a_traceback(
    text: str,
    message: str,
    tmp_path: Path,
    context_dir: Path,
    unused_address: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    config = tmp_path / "exp.yaml"
    config.write_text(text)
    code = main(["--master", unused_address, "experiment", "create", str(config), str(context_dir)])
    err = capsys.readouterr().err
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1 and message in err, err
    assert err.startswith(f"error: {config}, line "), err
