# ruff: noqa: E501  (tables of config fragments read better one per line)
"""Every config field has a status (pedl.config.fields) and a test here that the status holds.

DETERMINED_FIELDS lists the fields of Determined's published experiment-config schema
(schemas/expconf/v0 in determined-ai/determined, all releases this project reads configs from);
each must have a status. EXAMPLES sets each field to a value that is not its "off" value; the test
checks that create does what the status says: supported parses without a warning, refused fails
with an error naming the field, warn parses with a warning naming the field.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pedl.config import ConfigError, parse_experiment_config
from pedl.config.fields import FIELDS

ROOT = Path(__file__).resolve().parents[3]

DETERMINED_FIELDS = [
    # experiment.json, top level
    "bind_mounts", "checkpoint_policy", "checkpoint_storage", "data", "integrations", "data_layer",
    "debug", "description", "entrypoint", "environment", "hyperparameters", "internal", "labels",
    "log_policies", "retention_policy", "max_restarts", "min_checkpoint_period", "min_validation_period",
    "name", "optimizations", "pbs", "perform_initial_validation", "preemption_timeout", "profiling",
    "project", "records_per_epoch", "reproducibility", "resources", "scheduling_unit", "searcher",
    "security", "slurm", "tensorboard_storage", "workspace",
    # checkpoint storage, all types (hdfs is from older releases)
    "checkpoint_storage.type", "checkpoint_storage.save_experiment_best", "checkpoint_storage.save_trial_best",
    "checkpoint_storage.save_trial_latest", "checkpoint_storage.host_path", "checkpoint_storage.storage_path",
    "checkpoint_storage.container_path", "checkpoint_storage.propagation", "checkpoint_storage.checkpoint_path",
    "checkpoint_storage.tensorboard_path", "checkpoint_storage.bucket", "checkpoint_storage.prefix",
    "checkpoint_storage.endpoint_url", "checkpoint_storage.access_key", "checkpoint_storage.secret_key",
    "checkpoint_storage.container", "checkpoint_storage.connection_string", "checkpoint_storage.account_url",
    "checkpoint_storage.credential", "checkpoint_storage.hdfs_url", "checkpoint_storage.hdfs_path",
    "checkpoint_storage.user",
    "checkpoint_storage.type=shared_fs", "checkpoint_storage.type=s3", "checkpoint_storage.type=gcs",
    "checkpoint_storage.type=azure", "checkpoint_storage.type=hdfs", "checkpoint_storage.type=directory",
    # environment
    "environment.image", "environment.environment_variables", "environment.proxy_ports", "environment.ports",
    "environment.force_pull_image", "environment.registry_auth", "environment.add_capabilities",
    "environment.drop_capabilities", "environment.pod_spec",
    # integrations, security, retention, HPC
    "integrations.pachyderm", "integrations.webhooks", "security.kerberos",
    "retention_policy.log_retention_days", "pbs.slots_per_node", "pbs.pbsbatch_args",
    "slurm.slots_per_node", "slurm.gpu_type", "slurm.sbatch_args",
    # optimizations
    "optimizations.aggregation_frequency", "optimizations.auto_tune_tensor_fusion",
    "optimizations.average_aggregated_gradients", "optimizations.average_training_metrics",
    "optimizations.gradient_compression", "optimizations.grad_updates_size_file",
    "optimizations.mixed_precision", "optimizations.tensor_fusion_cycle_time",
    "optimizations.tensor_fusion_threshold", "optimizations.auto_tf32",
    # profiling, reproducibility
    "profiling.enabled", "profiling.begin_on_batch", "profiling.end_after_batch", "profiling.sync_timings",
    "reproducibility.experiment_seed",
    # resources
    "resources.agent_label", "resources.devices", "resources.is_single_node", "resources.max_slots",
    "resources.native_parallel", "resources.priority", "resources.resource_pool", "resources.shm_size",
    "resources.slots", "resources.slots_per_trial", "resources.weight",
    # searcher, every searcher's fields
    "searcher.bracket_rungs", "searcher.divisor", "searcher.max_concurrent_trials", "searcher.max_length",
    "searcher.max_rungs", "searcher.max_time", "searcher.time_metric", "searcher.max_trials", "searcher.mode",
    "searcher.name", "searcher.num_rungs", "searcher.stop_once", "searcher.metric",
    "searcher.smaller_is_better", "searcher.source_trial_id", "searcher.source_checkpoint_uuid",
    "searcher.budget", "searcher.train_stragglers", "searcher.unit",
    "searcher.name=single", "searcher.name=random", "searcher.name=grid", "searcher.name=adaptive_asha",
    "searcher.name=adaptive", "searcher.name=adaptive_simple", "searcher.name=async_halving",
    "searcher.name=sync_halving", "searcher.name=custom",
]  # fmt: skip

SEARCHER = "searcher: {name: single, metric: loss, max_length: {batches: 10}}\n"
ASHA = "searcher: {name: adaptive_asha, metric: loss, max_length: {batches: 64}, max_trials: 4"
# A Core API script (a command entrypoint) under ASHA measured in a metric it reports.
CORE_API_ASHA = (
    "entrypoint: python3 train.py\n"
    "searcher: {name: adaptive_asha, metric: loss, max_trials: 4, time_metric: batches, max_time: 100}\n"
)
ADAPTIVE = "searcher: {name: adaptive, metric: loss, max_length: {batches: 64}, budget: {batches: 256}"
S3 = "checkpoint_storage: {type: s3, bucket: b"
FS = "checkpoint_storage: {type: shared_fs, host_path: /tmp"

# field -> a whole config that sets it (to something other than its "off" value)
EXAMPLES: dict[str, str] = {
    "name": SEARCHER + "name: exp\n",
    "description": SEARCHER + "description: d\n",
    "labels": SEARCHER + "labels: [a]\n",
    "data": SEARCHER + "data: {x: 1}\n",
    "hyperparameters": SEARCHER + "hyperparameters: {lr: 0.1}\n",
    "entrypoint": SEARCHER + "entrypoint: model_def:T\n",
    "max_restarts": SEARCHER + "max_restarts: 2\n",
    "records_per_epoch": SEARCHER + "records_per_epoch: 100\n",
    "scheduling_unit": SEARCHER + "scheduling_unit: 10\n",
    "batches_per_step": SEARCHER + "batches_per_step: 10\n",
    "min_validation_period": SEARCHER + "min_validation_period: {batches: 5}\n",
    "min_checkpoint_period": SEARCHER + "min_checkpoint_period: {batches: 5}\n",
    "perform_initial_validation": SEARCHER + "perform_initial_validation: true\n",
    "checkpoint_policy": SEARCHER + "checkpoint_policy: none\n",
    "checkpoint_policy=best": SEARCHER + "checkpoint_policy: best\n",
    "checkpoint_policy=all": SEARCHER + "checkpoint_policy: all\n",
    "checkpoint_policy=none": SEARCHER + "checkpoint_policy: none\n",
    "reproducibility": SEARCHER + "reproducibility: {}\n",
    "reproducibility.experiment_seed": SEARCHER + "reproducibility: {experiment_seed: 3}\n",
    "workspace": SEARCHER + "workspace: team\n",
    "project": SEARCHER + "project: p\n",
    "debug": SEARCHER + "debug: true\n",
    "data_layer": SEARCHER + "data_layer: {type: shared_fs}\n",
    "internal": SEARCHER + "internal: {native: {command: [x]}}\n",
    "pbs": SEARCHER + "pbs: {slots_per_node: 2}\n",
    "pbs.slots_per_node": SEARCHER + "pbs: {slots_per_node: 2}\n",
    "pbs.pbsbatch_args": SEARCHER + "pbs: {pbsbatch_args: [-x]}\n",
    "slurm": SEARCHER + "slurm: {gpu_type: a100}\n",
    "slurm.slots_per_node": SEARCHER + "slurm: {slots_per_node: 2}\n",
    "slurm.gpu_type": SEARCHER + "slurm: {gpu_type: a100}\n",
    "slurm.sbatch_args": SEARCHER + "slurm: {sbatch_args: [-x]}\n",
    "preemption_timeout": SEARCHER + "preemption_timeout: 60\n",
    "log_policies": SEARCHER + "log_policies: [{name: CUDA OOM, pattern: '.*CUDA out of memory.*'}]\n",
    "retention_policy": SEARCHER + "retention_policy: {log_retention_days: 3}\n",
    "retention_policy.log_retention_days": SEARCHER + "retention_policy: {log_retention_days: 3}\n",
    "integrations": SEARCHER + "integrations: {webhooks: {webhook_id: [1]}}\n",
    "integrations.pachyderm": SEARCHER + "integrations: {pachyderm: {pachd: {host: h, port: 1}}}\n",
    "integrations.webhooks": SEARCHER + "integrations: {webhooks: {webhook_id: [1]}}\n",
    "security": SEARCHER + "security: {kerberos: {config_file: /k}}\n",
    "security.kerberos": SEARCHER + "security: {kerberos: {config_file: /k}}\n",
    "tensorboard_storage": SEARCHER + "tensorboard_storage: {type: shared_fs, host_path: /tmp}\n",
    "profiling": SEARCHER + "profiling: {enabled: false}\n",
    "profiling.enabled": SEARCHER + "profiling: {enabled: true}\n",
    "profiling.begin_on_batch": SEARCHER + "profiling: {begin_on_batch: 3}\n",
    "profiling.end_after_batch": SEARCHER + "profiling: {end_after_batch: 3}\n",
    "profiling.sync_timings": SEARCHER + "profiling: {sync_timings: false}\n",
    "bind_mounts": SEARCHER + "bind_mounts: [{host_path: /data, container_path: /data}]\n",
    "environment": SEARCHER + "environment: py311\n",
    "environment.name": SEARCHER + "environment: {name: py311}\n",
    "environment.python": SEARCHER + "environment: {python: py311}\n",
    "environment.image": SEARCHER + "environment: {image: pytorch:latest}\n",
    "environment.force_pull_image": SEARCHER + "environment: {force_pull_image: true}\n",
    "environment.registry_auth": SEARCHER + "environment: {registry_auth: {username: u}}\n",
    "environment.pod_spec": SEARCHER + "environment: {pod_spec: {spec: {}}}\n",
    "environment.add_capabilities": SEARCHER + "environment: {add_capabilities: [CAP_X]}\n",
    "environment.drop_capabilities": SEARCHER + "environment: {drop_capabilities: [CAP_X]}\n",
    "environment.environment_variables": SEARCHER + "environment: {environment_variables: [A=1]}\n",
    "environment.ports": SEARCHER + "environment: {ports: {web: 8080}}\n",
    "environment.proxy_ports": SEARCHER + "environment: {proxy_ports: [{proxy_port: 8080}]}\n",
    "resources": SEARCHER + "resources: {}\n",
    "resources.slots_per_trial": SEARCHER + "resources: {slots_per_trial: 2}\n",
    "resources.max_slots": SEARCHER + "resources: {max_slots: 2}\n",
    "resources.weight": SEARCHER + "resources: {weight: 2}\n",
    "resources.priority": SEARCHER + "resources: {priority: 2}\n",
    "resources.resource_pool": SEARCHER + "resources: {resource_pool: gpus}\n",
    "resources.slots": SEARCHER + "resources: {slots: 2}\n",
    "resources.agent_label": SEARCHER + "resources: {agent_label: big}\n",
    "resources.devices": SEARCHER + "resources: {devices: ['/dev/fuse:/dev/fuse']}\n",
    "resources.shm_size": SEARCHER + "resources: {shm_size: 4G}\n",
    "resources.native_parallel": SEARCHER + "resources: {native_parallel: true}\n",
    "resources.is_single_node": SEARCHER + "resources: {is_single_node: true}\n",
    "checkpoint_storage": SEARCHER + "checkpoint_storage: {save_trial_best: 2}\n",
    "checkpoint_storage.type": SEARCHER + FS + "}\n",
    "checkpoint_storage.type=shared_fs": SEARCHER + FS + "}\n",
    "checkpoint_storage.type=s3": SEARCHER + S3 + "}\n",
    "checkpoint_storage.type=gcs": SEARCHER + "checkpoint_storage: {type: gcs, bucket: b}\n",
    "checkpoint_storage.type=azure": SEARCHER + "checkpoint_storage: {type: azure, container: c}\n",
    "checkpoint_storage.type=hdfs": SEARCHER
    + "checkpoint_storage: {type: hdfs, hdfs_url: u, hdfs_path: /p}\n",
    "checkpoint_storage.type=directory": SEARCHER
    + "checkpoint_storage: {type: directory, container_path: /c}\n",
    "checkpoint_storage.save_experiment_best": SEARCHER + "checkpoint_storage: {save_experiment_best: 2}\n",
    "checkpoint_storage.save_trial_best": SEARCHER + "checkpoint_storage: {save_trial_best: 2}\n",
    "checkpoint_storage.save_trial_latest": SEARCHER + "checkpoint_storage: {save_trial_latest: 2}\n",
    "checkpoint_storage.host_path": SEARCHER + FS + "}\n",
    "checkpoint_storage.storage_path": SEARCHER + FS + ", storage_path: ckpt}\n",
    "checkpoint_storage.container_path": SEARCHER + FS + ", container_path: /c}\n",
    "checkpoint_storage.propagation": SEARCHER + FS + ", propagation: rshared}\n",
    "checkpoint_storage.checkpoint_path": SEARCHER + FS + ", checkpoint_path: /c}\n",
    "checkpoint_storage.tensorboard_path": SEARCHER + FS + ", tensorboard_path: /t}\n",
    "checkpoint_storage.bucket": SEARCHER + S3 + "}\n",
    "checkpoint_storage.prefix": SEARCHER + S3 + ", prefix: runs/a}\n",
    "checkpoint_storage.endpoint_url": SEARCHER + S3 + ", endpoint_url: 'http://s3:9000'}\n",
    "checkpoint_storage.access_key": SEARCHER + S3 + ", access_key: a, secret_key: s}\n",
    "checkpoint_storage.secret_key": SEARCHER + S3 + ", access_key: a, secret_key: s}\n",
    "checkpoint_storage.container": SEARCHER + "checkpoint_storage: {container: c, type: azure}\n",
    "checkpoint_storage.connection_string": SEARCHER
    + "checkpoint_storage: {connection_string: c, type: azure}\n",
    "checkpoint_storage.account_url": SEARCHER + "checkpoint_storage: {account_url: u, type: azure}\n",
    "checkpoint_storage.credential": SEARCHER + "checkpoint_storage: {credential: c, type: azure}\n",
    "checkpoint_storage.hdfs_url": SEARCHER + "checkpoint_storage: {hdfs_url: u, type: hdfs}\n",
    "checkpoint_storage.hdfs_path": SEARCHER + "checkpoint_storage: {hdfs_path: /p, type: hdfs}\n",
    "checkpoint_storage.user": SEARCHER + "checkpoint_storage: {user: u, type: hdfs}\n",
    "optimizations": SEARCHER + "optimizations: {}\n",
    "optimizations.aggregation_frequency": SEARCHER + "optimizations: {aggregation_frequency: 4}\n",
    "optimizations.average_aggregated_gradients": SEARCHER
    + "optimizations: {average_aggregated_gradients: false}\n",
    "optimizations.average_training_metrics": SEARCHER + "optimizations: {average_training_metrics: false}\n",
    "optimizations.mixed_precision": SEARCHER + "optimizations: {mixed_precision: O1}\n",
    "optimizations.auto_tf32": SEARCHER + "optimizations: {auto_tf32: true}\n",
    "optimizations.gradient_compression": SEARCHER + "optimizations: {gradient_compression: true}\n",
    "optimizations.auto_tune_tensor_fusion": SEARCHER + "optimizations: {auto_tune_tensor_fusion: true}\n",
    "optimizations.tensor_fusion_threshold": SEARCHER + "optimizations: {tensor_fusion_threshold: 32}\n",
    "optimizations.tensor_fusion_cycle_time": SEARCHER + "optimizations: {tensor_fusion_cycle_time: 5}\n",
    "optimizations.grad_updates_size_file": SEARCHER + "optimizations: {grad_updates_size_file: /f}\n",
    "searcher": SEARCHER,
    "searcher.name": SEARCHER,
    "searcher.name=single": SEARCHER,
    "searcher.name=random": "searcher: {name: random, metric: loss, max_length: {batches: 8}, max_trials: 2}\n",
    "searcher.name=grid": "searcher: {name: grid, metric: loss, max_length: {batches: 8}}\n",
    "searcher.name=adaptive_asha": ASHA + "}\n",
    "searcher.name=adaptive": ADAPTIVE + "}\n",
    "searcher.name=adaptive_simple": "searcher: {name: adaptive_simple, metric: loss, max_length: {batches: 64}, "
    "max_trials: 4}\n",
    "searcher.name=pbt": "searcher: {name: pbt, metric: loss, population_size: 2, num_rounds: 2, "
    "length_per_round: {batches: 4}, replace_function: {truncate_fraction: 0.5}, "
    "explore_function: {resample_probability: 0.5, perturb_factor: 0.2}}\n",
    "searcher.name=async_halving": "searcher: {name: async_halving, metric: loss, num_rungs: 3, "
    "max_length: {batches: 64}, max_trials: 4}\n",
    "searcher.name=sync_halving": "searcher: {name: sync_halving, metric: loss, num_rungs: 3, "
    "max_length: {batches: 64}, budget: {batches: 256}}\n",
    "searcher.name=custom": "searcher: {name: custom, metric: loss}\n",
    "searcher.metric": SEARCHER,
    "searcher.smaller_is_better": "searcher: {name: single, metric: acc, smaller_is_better: false, "
    "max_length: {batches: 10}}\n",
    "searcher.max_length": SEARCHER,
    "searcher.max_trials": ASHA + "}\n",
    "searcher.max_concurrent_trials": ASHA + ", max_concurrent_trials: 2}\n",
    "searcher.mode": ASHA + ", mode: aggressive}\n",
    "searcher.divisor": ASHA + ", divisor: 3}\n",
    "searcher.max_rungs": ASHA + ", max_rungs: 3}\n",
    "searcher.bracket_rungs": ASHA + ", bracket_rungs: [3, 2]}\n",
    "searcher.stop_once": ASHA + ", stop_once: true}\n",
    "searcher.budget": ADAPTIVE + "}\n",
    "searcher.train_stragglers": ADAPTIVE + ", train_stragglers: false}\n",
    "searcher.num_rungs": "searcher: {name: async_halving, metric: loss, num_rungs: 3, max_trials: 4, max_length: {batches: 64}}\n",
    "searcher.unit": "searcher: {name: single, metric: loss, max_length: {batches: 10}, unit: batches}\n",
    "searcher.time_metric": CORE_API_ASHA,
    "searcher.max_time": CORE_API_ASHA,
    "searcher.source_trial_id": "searcher: {name: single, metric: loss, max_length: {batches: 10}, "
    "source_trial_id: 3}\n",
    "searcher.source_checkpoint_uuid": "searcher: {name: single, metric: loss, max_length: {batches: 10}, "
    "source_checkpoint_uuid: 1e2b}\n",
    "searcher.max_steps": "searcher: {name: single, metric: loss, max_steps: 3}\n",
    "searcher.target_trial_steps": "searcher: {name: adaptive, metric: loss, target_trial_steps: 4, "
    "step_budget: 16}\n",
    "searcher.step_budget": "searcher: {name: adaptive, metric: loss, target_trial_steps: 4, step_budget: 16}\n",
    "searcher.population_size": "searcher: {name: pbt, metric: loss, population_size: 2, num_rounds: 2, "
    "steps_per_round: 1, replace_function: {truncate_fraction: 0.5}, "
    "explore_function: {resample_probability: 0.5, perturb_factor: 0.2}}\n",
}
for _key in (
    "searcher.num_rounds",
    "searcher.length_per_round",
    "searcher.replace_function",
    "searcher.explore_function",
):
    EXAMPLES[_key] = EXAMPLES["searcher.name=pbt"]
EXAMPLES["searcher.steps_per_round"] = EXAMPLES["searcher.population_size"]


def test_every_determined_field_has_a_status() -> None:
    missing = [f for f in DETERMINED_FIELDS if f not in FIELDS]
    assert not missing, f"fields of Determined's schema without a status in pedl.config.fields: {missing}"


def test_every_status_has_an_example() -> None:
    assert sorted(set(FIELDS) - set(EXAMPLES)) == []
    assert sorted(set(EXAMPLES) - set(FIELDS)) == []


@pytest.mark.parametrize("field", sorted(FIELDS))
def test_status_holds(field: str) -> None:
    path = field.partition("=")[0]
    status = FIELDS[field].status
    # A field inside a refused or warned section is governed by that section (`pbs.gpu_type`).
    parts = path.split(".")
    for n in range(1, len(parts)):
        outer = FIELDS.get(".".join(parts[:n]))
        if outer is not None and outer.status != "supported":
            path, status = ".".join(parts[:n]), outer.status
            break
    text = EXAMPLES[field]
    if status == "refused":
        with pytest.raises(ConfigError) as info:
            parse_experiment_config(text, filename="c.yaml")
        assert info.value.path == path, str(info.value)
        assert "not supported by pedl" in info.value.message
        return
    config = parse_experiment_config(text, filename="c.yaml")
    mine = [w for w in config.warnings if w.startswith(f"{path}:")]
    if status == "warn":
        assert mine, f"{field}: no warning in {config.warnings}"
    else:
        assert not mine, mine


def test_off_values_and_nulls_are_accepted_silently() -> None:
    """The values Determined prints for unset fields re-submit without errors or warnings."""
    text = SEARCHER + (
        "bind_mounts: []\nperform_initial_validation: false\ndebug: false\nlog_policies: []\n"
        "workspace: ''\nproject: ''\npbs: {}\nslurm: {}\ninternal: null\npreemption_timeout: null\n"
        "tensorboard_storage: null\nintegrations: null\nprofiling: {enabled: false, begin_on_batch: 0, "
        "end_after_batch: null, sync_timings: true}\n"
        "optimizations: {aggregation_frequency: 1, auto_tune_tensor_fusion: false, "
        "average_aggregated_gradients: true, average_training_metrics: true, gradient_compression: false, "
        "grad_updates_size_file: null, mixed_precision: O0, tensor_fusion_cycle_time: 1, "
        "tensor_fusion_threshold: 64}\n"
        "resources: {devices: [], native_parallel: false, shm_size: null, max_slots: null, priority: null, "
        "resource_pool: '', is_single_node: null, agent_label: ''}\n"
        "environment: {environment_variables: {cpu: [], cuda: [], rocm: []}, force_pull_image: false, "
        "pod_spec: null, ports: {}, proxy_ports: [], registry_auth: null, add_capabilities: [], "
        "drop_capabilities: []}\n"
        "reproducibility: {experiment_seed: null}\nrecords_per_epoch: 0\ndescription: null\n"
    )
    config = parse_experiment_config(text, filename="c.yaml")
    assert config.warnings == ()
    again = parse_experiment_config(config.raw)
    assert again.raw == config.raw


def test_readme_table_is_current() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen_config_fields.py"), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


SNAPSHOT = os.environ.get("PEDL_DETERMINED_SCHEMAS", "")


@pytest.mark.skipif(not SNAPSHOT or not Path(SNAPSHOT).is_dir(), reason="no Determined schema snapshot")
def test_snapshot_fields_have_a_status() -> None:
    """With PEDL_DETERMINED_SCHEMAS=<checkout>/schemas/expconf/v0, the published schema itself."""
    root = Path(SNAPSHOT)
    top = json.loads((root / "experiment.json").read_text())["properties"]
    missing = [name for name in top if name not in FIELDS]
    sections = {"resources": "resources.json", "optimizations": "optimizations.json",
                "environment": "environment.json", "searcher": "searcher.json",
                "checkpoint_storage": "checkpoint-storage.json", "profiling": "profiling.json"}  # fmt: skip
    for section, file in sections.items():
        props = json.loads((root / file).read_text()).get("properties", {})
        missing += [f"{section}.{name}" for name in props if f"{section}.{name}" not in FIELDS]
    assert not missing
