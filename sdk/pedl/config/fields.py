"""Every experiment-config field pedl knows, with what pedl does about it: the one source of truth.

Each entry is a dotted field path (`resources.shm_size`), or `path=value` for one value of a
field (`checkpoint_storage.type=gcs`, `searcher.name=async_halving`), with a status:

- supported: pedl implements it as Determined (or the PEDL docs) describe;
- refused: `create` fails with one line naming the field, why, and what to use instead;
- warn: accepted with a warning, only for fields that have no meaning where trials run as plain
  processes on an agent (container images, HPC launchers, workspaces).

`inert` lists values that mean "off" (Determined's defaults: `[]`, `false`, `O0`, ...); a refused or
warned field holding one of them is accepted silently, so a config exported with every default
written out (`det experiment config`) can be submitted again. `null` always means "unset".
The README's field table is generated from this module (`scripts/gen-config-fields`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

Status = Literal["supported", "refused", "warn"]


@dataclass(frozen=True)
class Field:
    status: Status
    note: str
    inert: tuple[Any, ...] = ()


def _s(note: str) -> Field:
    return Field("supported", note)


def _r(note: str, *inert: Any) -> Field:
    return Field("refused", note, inert)


def _w(note: str, *inert: Any) -> Field:
    return Field("warn", note, inert)


_NO_CONTAINER = "pedl runs trials as plain processes on the agent, without containers"

FIELDS: dict[str, Field] = {
    # --- top level -------------------------------------------------------------------------
    "name": _s("the experiment's name"),
    "description": _s("shown by `experiment list` and `describe`"),
    "labels": _s("list of strings (or PEDL's mapping), shown by `describe`"),
    "data": _s("free-form mapping handed to the model definition"),
    "hyperparameters": _s("const/int/double/log/categorical, nested mappings and lists"),
    "entrypoint": _s("Trial class `module:Class`, a script, or a command"),
    "max_restarts": _s("restarts of a failed trial, default 5"),
    "records_per_epoch": _s(
        "converts `{epochs: N}` lengths to records; without it a PyTorch trial's epoch is its loader's length"
    ),
    "scheduling_unit": _s("batches per training step (Determined's name), default 100"),
    "batches_per_step": _s("PEDL's name for scheduling_unit"),
    "min_validation_period": _s("validate at least this often: `{batches|records|epochs: N}` or steps"),
    "min_checkpoint_period": _s("checkpoint at least this often: `{batches|records|epochs: N}` or steps"),
    "perform_initial_validation": _s("validates the untrained model (at batch 0) before training"),
    "checkpoint_policy": _s(
        "`best` (the default, as in Determined), `all` or `none` (checkpoints only at "
        "min_checkpoint_period, on pause and at the end)"
    ),
    "checkpoint_policy=best": _s(
        "also a checkpoint after every validation better than all earlier ones of the experiment "
        "(searcher.metric, smaller_is_better)"
    ),
    "checkpoint_policy=all": _s("a checkpoint after every validation"),
    "checkpoint_policy=none": _s("validations do not cause checkpoints"),
    "reproducibility": _s("section"),
    "reproducibility.experiment_seed": _s("seeds the searcher and every trial"),
    "workspace": _w("pedl has no workspaces; experiments are listed per user", ""),
    "project": _w("pedl has no projects; experiments are listed per user", ""),
    "debug": _w("pedl has no per-experiment debug mode; agent and harness logs are always kept", False),
    "data_layer": _w("Determined removed the data layer and ignores this section too"),
    "internal": _r("Determined-internal settings are not part of pedl's config; remove the section"),
    "pbs": _w("pedl has no PBS launcher; trials are placed on pedl agents", {}),
    "pbs.slots_per_node": _w("pedl has no PBS launcher"),
    "pbs.pbsbatch_args": _w("pedl has no PBS launcher", []),
    "slurm": _s("shapes the pilot jobs of a Slurm pool (resources.resource_pool; docs/DEPLOY.md)"),
    "slurm.slots_per_node": _s("slots per node of the pilot jobs submitted for this experiment"),
    "slurm.gpu_type": _s("a GPU pool's pilot jobs ask --gres=gpu:TYPE:N"),
    "slurm.sbatch_args": _s("added to the sbatch of this experiment's pilot jobs, after pedl's own"),
    "preemption_timeout": _r(
        "pedl waits for a preempted trial's checkpoint without a deadline; remove preemption_timeout"
    ),
    "log_policies": _w(
        "pedl does not label log lines by pattern; a policy with an action (cancel_retries, exclude_node) "
        "is refused, since pedl does not act on log patterns",
        [],
    ),
    "retention_policy": _r("pedl keeps trial logs until the experiment is deleted; remove retention_policy"),
    "retention_policy.log_retention_days": _r("see retention_policy"),
    "integrations": _r("pedl has no Pachyderm or webhook integrations; remove integrations"),
    "integrations.pachyderm": _r("pedl has no Pachyderm integration"),
    "integrations.webhooks": _r("pedl has no webhooks"),
    "security": _r("pedl has no Kerberos support; remove security"),
    "security.kerberos": _r("pedl has no Kerberos support"),
    "tensorboard_storage": _r(
        "pedl writes TensorBoard data next to the checkpoints; remove tensorboard_storage"
    ),
    "profiling": _s("section; only `enabled: false` (the default) is accepted"),
    "profiling.enabled": _r("pedl has no profiler; remove profiling or set enabled: false", False),
    "profiling.begin_on_batch": _s("checked as Determined does (not after end_after_batch)"),
    "profiling.end_after_batch": _s("checked as Determined does"),
    "profiling.sync_timings": _s("checked as Determined does; no effect without the profiler"),
    "bind_mounts": _s(
        "host_path mounted at container_path in the trial's sandbox, read_only honoured, propagation "
        "accepted; host paths only under the cluster's `--allowed-bind-root` (refused at create naming "
        "the roots); a container_path over the system or the trial's own paths is refused naming it"
    ),
    # --- environment -----------------------------------------------------------------------
    "environment": _s("a string names the agent's Python environment; a mapping is Determined's"),
    "environment.name": _s("pedl: the agent's Python environment to run trials in"),
    "environment.python": _s("pedl: alias of environment.name"),
    "environment.image": _w(
        f"{_NO_CONTAINER}; the image is not pulled: a scheduler started with --image-environment "
        "PATTERN=NAME runs a matching image in the agents' Python environment NAME (else use "
        "environment.name)"
    ),
    "environment.force_pull_image": _w(f"{_NO_CONTAINER}; there is no image to pull", False),
    "environment.registry_auth": _w(f"{_NO_CONTAINER}; there is no registry to log in to"),
    "environment.pod_spec": _w(f"{_NO_CONTAINER}; there is no Kubernetes pod"),
    "environment.add_capabilities": _w(f"{_NO_CONTAINER}; there are no container capabilities", []),
    "environment.drop_capabilities": _w(f"{_NO_CONTAINER}; there are no container capabilities", []),
    "environment.environment_variables": _s(
        "NAME=value list, or per device type (cpu, cuda/gpu, rocm); set in every harness process"
    ),
    "environment.ports": _r("pedl does not expose trial ports; remove environment.ports", {}),
    "environment.proxy_ports": _r("pedl does not proxy trial ports; remove environment.proxy_ports", []),
    # --- resources -------------------------------------------------------------------------
    "resources": _s("section"),
    "resources.slots_per_trial": _s("slots (GPUs, or CPU slots) per trial; 0 is a CPU-only trial"),
    "resources.max_slots": _s("caps the experiment's slots in use"),
    "resources.weight": _s("fair-share weight"),
    "resources.priority": _s("priority 1-99 (lower runs first)"),
    "resources.resource_pool": _s("the agent pool to run on"),
    "resources.slots": _w("Determined ignores it too (legacy); use slots_per_trial"),
    "resources.agent_label": _s(
        "run only on agents started with `pedl-agent --label NAME`; unset: only on agents without a label"
    ),
    "resources.devices": _w(
        f"{_NO_CONTAINER}; a trial already sees every device of its agent (CUDA_VISIBLE_DEVICES picks GPUs)",
        [],
    ),
    "resources.shm_size": _w(
        f"{_NO_CONTAINER}; a sandboxed trial gets a /dev/shm of its own, which counts against "
        "`pedl-agent --trial-disk-limit`"
    ),
    "resources.native_parallel": _r(
        "Determined removed native parallelism; use slots_per_trial for distributed training", False
    ),
    "resources.is_single_node": _r(
        "pedl places a trial's slots as the scheduler sees fit; remove is_single_node"
    ),
    # --- checkpoint_storage ----------------------------------------------------------------
    "checkpoint_storage": _s("absent: the cluster's checkpoint store decides where checkpoints go"),
    "checkpoint_storage.type": _s("shared_fs or s3"),
    "checkpoint_storage.type=shared_fs": _s("a directory on the checkpoint store's host"),
    "checkpoint_storage.type=s3": _s("an S3 bucket (AWS or S3-compatible), checked at create"),
    "checkpoint_storage.type=gcs": _r(
        "pedl's checkpoint store cannot write to Google Cloud Storage; use type: s3 with GCS's "
        "S3-compatible endpoint_url (https://storage.googleapis.com) and HMAC keys"
    ),
    "checkpoint_storage.type=azure": _r(
        "pedl's checkpoint store cannot write to Azure Blob Storage; use type: s3 or shared_fs"
    ),
    "checkpoint_storage.type=hdfs": _r(
        "pedl's checkpoint store cannot write to HDFS; use type: s3 or shared_fs"
    ),
    "checkpoint_storage.type=directory": _r(
        f"{_NO_CONTAINER}, so there is no container directory; use type: shared_fs with host_path"
    ),
    "checkpoint_storage.save_experiment_best": _s("checkpoints kept for the experiment's best trials"),
    "checkpoint_storage.save_trial_best": _s("best checkpoints kept per trial"),
    "checkpoint_storage.save_trial_latest": _s("latest checkpoints kept per trial"),
    "checkpoint_storage.host_path": _s("shared_fs: absolute directory"),
    "checkpoint_storage.storage_path": _s("shared_fs: relative, or a directory under host_path"),
    "checkpoint_storage.container_path": _w(f"{_NO_CONTAINER}; host_path is used"),
    "checkpoint_storage.propagation": _w(f"{_NO_CONTAINER}; there is no mount to propagate"),
    "checkpoint_storage.checkpoint_path": _w("legacy shared_fs field Determined ignores too"),
    "checkpoint_storage.tensorboard_path": _w("legacy shared_fs field Determined ignores too"),
    "checkpoint_storage.bucket": _s("s3: the bucket, checked at create"),
    "checkpoint_storage.prefix": _s("s3: key prefix; must not leave the bucket's root (`..`)"),
    "checkpoint_storage.endpoint_url": _s("s3: an S3-compatible endpoint"),
    "checkpoint_storage.access_key": _s("s3: masked in describe"),
    "checkpoint_storage.secret_key": _s("s3: masked in describe"),
    "checkpoint_storage.container": _r("azure storage is refused (see type=azure)"),
    "checkpoint_storage.connection_string": _r("azure storage is refused (see type=azure)"),
    "checkpoint_storage.account_url": _r("azure storage is refused (see type=azure)"),
    "checkpoint_storage.credential": _r("azure storage is refused (see type=azure)"),
    "checkpoint_storage.hdfs_url": _r("hdfs storage is refused (see type=hdfs)"),
    "checkpoint_storage.hdfs_path": _r("hdfs storage is refused (see type=hdfs)"),
    "checkpoint_storage.user": _r("hdfs storage is refused (see type=hdfs)"),
    # --- optimizations ---------------------------------------------------------------------
    "optimizations": _s("section; only Determined's default values are accepted"),
    "optimizations.aggregation_frequency": _s(
        "PyTorchTrial (pedl's and Determined's): gradients of N batches are accumulated, then one optimizer "
        "and LR-scheduler step (other trial types fail at start naming the field)"
    ),
    "optimizations.average_aggregated_gradients": _s(
        "PyTorchTrial: average (true) or sum accumulated gradients"
    ),
    "optimizations.average_training_metrics": _r(
        "pedl always averages training metrics over a trial's workers; remove it or set it to true", True
    ),
    "optimizations.mixed_precision": _s(
        "pedl's PyTorchTrial: O1/O2/O3 run forward and loss under torch.autocast (float16 with a gradient "
        "scaler on CUDA, bfloat16 on CPU); Determined's PyTorchTrial uses context.experimental.use_amp()"
    ),
    "optimizations.auto_tf32": _s(
        "PyTorchTrial: lets CUDA matmuls and cuDNN use TF32 (Determined's trials: on unless false, as there)"
    ),
    "optimizations.gradient_compression": _r("pedl does not compress gradients", False),
    "optimizations.auto_tune_tensor_fusion": _w("Horovod tuning; pedl does not use Horovod", False),
    "optimizations.tensor_fusion_threshold": _w("Horovod tuning; pedl does not use Horovod", 64),
    "optimizations.tensor_fusion_cycle_time": _w("Horovod tuning; pedl does not use Horovod", 1),
    "optimizations.grad_updates_size_file": _w("Horovod tuning; pedl does not use Horovod"),
    # --- searcher --------------------------------------------------------------------------
    "searcher": _s("section"),
    "searcher.name": _s("which search runs"),
    "searcher.name=single": _s("one trial"),
    "searcher.name=random": _s("random search"),
    "searcher.name=grid": _s("grid search (int/double/log need count)"),
    "searcher.name=adaptive_asha": _s("asynchronous successive halving with brackets"),
    "searcher.name=adaptive": _s("synchronous successive halving with brackets (older PEDL/Determined)"),
    "searcher.name=adaptive_simple": _s("adaptive with a simple bracket layout"),
    "searcher.name=pbt": _s("population-based training (PEDL)"),
    "searcher.name=async_halving": _s("ASHA in one bracket of num_rungs rungs (adaptive_asha's engine)"),
    "searcher.name=sync_halving": _r(
        "pedl has no single-bracket synchronous halving; use name: adaptive with mode: aggressive"
    ),
    "searcher.name=custom": _r("pedl has no custom (user-code) searcher; use a built-in searcher"),
    "searcher.metric": _s("validation metric to optimize"),
    "searcher.smaller_is_better": _s("default true"),
    "searcher.max_length": _s("a trial's length: `{batches|records|epochs: N}`, the searcher's unit"),
    "searcher.max_trials": _s("random, adaptive_asha, adaptive_simple"),
    "searcher.max_concurrent_trials": _s("trials running at once (0: no limit)"),
    "searcher.mode": _s("aggressive | standard | conservative"),
    "searcher.divisor": _s("halving divisor, > 1"),
    "searcher.max_rungs": _s("rungs per bracket"),
    "searcher.bracket_rungs": _s("rungs of each bracket"),
    "searcher.stop_once": _s("adaptive_asha: stop trials early without promotions"),
    "searcher.budget": _s("adaptive: total length across trials"),
    "searcher.train_stragglers": _s("adaptive"),
    "searcher.num_rungs": _s("async_halving: rungs of its one bracket"),
    "searcher.unit": _r("only used by the custom searcher, which pedl refuses"),
    "searcher.time_metric": _s(
        "ASHA rungs measured in a metric a Core API script reports (with max_time; "
        "det.pytorch.Trainer reports batches and epochs), or a Trial class's batches or epochs"
    ),
    "searcher.max_time": _s("a trial's length in time_metric units (ASHA)"),
    "searcher.source_trial_id": _s(
        "warm start: every trial starts from that trial's latest checkpoint (weights and optimizer "
        "state) at batch 0; its experiment's owner or an admin only"
    ),
    "searcher.source_checkpoint_uuid": _s(
        "warm start from that checkpoint (weights and optimizer state) at batch 0; takes precedence "
        "over source_trial_id; its experiment's owner or an admin only"
    ),
    "searcher.max_steps": _s("PEDL: length in steps of batches_per_step"),
    "searcher.target_trial_steps": _s("PEDL adaptive: length in steps"),
    "searcher.step_budget": _s("PEDL adaptive: budget in steps"),
    "searcher.population_size": _s("pbt"),
    "searcher.num_rounds": _s("pbt"),
    "searcher.length_per_round": _s("pbt: `{batches|records|epochs: N}`"),
    "searcher.steps_per_round": _s("pbt (PEDL): length per round in steps"),
    "searcher.replace_function": _s("pbt: {truncate_fraction}"),
    "searcher.explore_function": _s("pbt: {resample_probability, perturb_factor}"),
}

# Fields whose values are the user's own (not walked for statuses).
OPAQUE = ("data", "hyperparameters", "labels", "entrypoint")
