"""pedl's experiment-config JSON Schema: every field's type, bounds and union, checked by `jsonschema`.

Written from the facts of Determined's published expconf v0 schema (field names, types, bounds, unions)
for Determined's fields and from pedl's rules for the rest (PEDL's older fields, pedl-only sections).
What a schema cannot say (a length converted by the batch size, `minval < maxval`, a path under
another, a searcher that needs a Trial class) stays in the section modules. `EXPERIMENT_SCHEMA` is
plain JSON (`json.dumps` writes it out).
"""

from __future__ import annotations

from pedl.config.schema_parts import (
    ANY,
    BOOLEAN,
    HYPERPARAMETER,
    MAPPING,
    SPACE,
    Schema,
    choice,
    integer,
    length,
    number,
    section,
    strings,
    text,
    when,
)
from pedl.config.schema_searcher import SEARCHER

_DEVICE_TYPES = ("cpu", "cuda", "rocm", "gpu")
_SIZE = r"^([0-9]*[.])?[0-9]+ ?(([kmgtpKMGTP]([iI]?[bB])?)|[bB])?$"

RESOURCES = section(
    {
        "slots_per_trial": integer(0),
        "max_slots": integer(1),
        "weight": number(exclusive_minimum=0),
        "priority": integer(1, 99),
        "resource_pool": text(),
        "native_parallel": BOOLEAN,
        "shm_size": {
            "type": ["integer", "string"],
            "minimum": 0,
            "pattern": _SIZE,
            "x-type": "expected a memory size like 4G, 512Mi or 1.5 gb, got {value}",
            "x-pattern": "expected a memory size like 4G, 512Mi or 1.5 gb, got {value}",
        },
        "agent_label": {
            "type": "string",
            "pattern": r"^([^@\s]([^@]*[^@\s])?)?$",
            "x-pattern": "a label is a name without '@' or surrounding spaces",
        },
        "devices": {
            "type": "array",
            "items": {
                "type": ["string", "object"],
                "pattern": "^[^:]+:[^:]+(:[^:]+)?$",
                "x-pattern": "expected 'HOST_PATH:CONTAINER_PATH[:MODE]', got {value}",
                **{
                    k: v
                    for k, v in section(
                        {
                            "host_path": text(True),
                            "container_path": text(True),
                            "mode": {"type": ["string", "null"]},
                        },
                        required=("host_path", "container_path"),
                    ).items()
                    if k != "type"
                },
            },
        },
        "is_single_node": BOOLEAN,
        "slots": integer(0),
    }
)

_ENV_VAR = {
    "type": "string",
    "pattern": "^[A-Za-z_][A-Za-z0-9_]*=",
    "x-pattern": "expected NAME=value, got {value}",
}
_ENV_VARS = {
    "type": ["array", "object"],
    "items": _ENV_VAR,
    "additionalProperties": False,
    "x-unknown": "field",
    "properties": {kind: {"type": ["array", "null"], "items": _ENV_VAR} for kind in _DEVICE_TYPES},
}
ENVIRONMENT = {
    "type": ["string", "object"],
    "pattern": r"\S",
    "x-pattern": "must not be empty",
    "additionalProperties": False,
    "x-unknown": "field",
    "properties": {
        "name": text(True),
        "python": text(True),
        "image": {
            "type": ["string", "object"],
            "additionalProperties": False,
            "x-unknown": "field",
            "properties": {kind: {"type": ["string", "null"]} for kind in _DEVICE_TYPES},
        },
        "environment_variables": _ENV_VARS,
        "force_pull_image": BOOLEAN,
        "registry_auth": MAPPING,
        "pod_spec": MAPPING,
        "add_capabilities": strings(),
        "drop_capabilities": strings(),
        "ports": MAPPING,
        "proxy_ports": {"type": "array"},
    },
}

_SAVE: dict[str, Schema] = {
    key: integer(0) for key in ("save_experiment_best", "save_trial_best", "save_trial_latest")
}
_SHARED_FS = (
    "host_path",
    "storage_path",
    "container_path",
    "propagation",
    "checkpoint_path",
    "tensorboard_path",
)
_S3 = ("bucket", "access_key", "secret_key", "endpoint_url", "prefix")
CHECKPOINT_STORAGE: Schema = {
    "type": "object",
    "properties": {"type": choice("shared_fs", "s3"), **_SAVE},
    "allOf": [
        {
            "if": {"not": {"required": ["type"]}},
            "then": section({"type": ANY, **_SAVE}, unknown="field (give type: shared_fs or s3 first)"),
        },
        when(
            "type",
            "shared_fs",
            section(
                {"type": ANY, **_SAVE, "host_path": text(True), **{k: text() for k in _SHARED_FS[1:]}},
                required=("host_path",),
                unknown="field for shared_fs checkpoint storage",
            ),
        ),
        when(
            "type",
            "s3",
            section(
                {"type": ANY, **_SAVE, "bucket": text(True), **{k: text() for k in _S3[1:]}},
                required=("bucket",),
                unknown="field for s3 checkpoint storage",
            ),
        ),
    ],
}

OPTIMIZATIONS = section(
    {
        "aggregation_frequency": integer(1),
        "tensor_fusion_threshold": integer(0),
        "tensor_fusion_cycle_time": integer(0),
        **{
            key: BOOLEAN
            for key in (
                "average_aggregated_gradients",
                "average_training_metrics",
                "gradient_compression",
                "auto_tune_tensor_fusion",
                "auto_tf32",
            )
        },
        "mixed_precision": choice("O0", "O1", "O2", "O3"),
        "grad_updates_size_file": text(),
    }
)

PROFILING = section(
    {"enabled": BOOLEAN, "sync_timings": BOOLEAN, "begin_on_batch": integer(0), "end_after_batch": integer(0)}
)

REPRODUCIBILITY = section(
    {"experiment_seed": integer(0, 2**31 - 1), "replay_mismatch": choice("fail", "warn")}
)

_LOG_ACTION = {
    "type": ["string", "object", "null"],
    "additionalProperties": False,
    "x-unknown": "field",
    "properties": {"type": ANY},
}
LOG_POLICIES = {
    "type": "array",
    "items": {
        "type": "object",
        "additionalProperties": False,
        "x-unknown": "field",
        "properties": {
            "name": {"type": ["string", "null"]},
            "pattern": {"type": ["string", "null"]},
            "action": _LOG_ACTION,
        },
    },
}

_SCRIPT = section(
    {"script": text(True), "args": {"type": ["array", "null"], "items": {"type": ["string", "number"]}}},
    required=("script",),
)
ENTRYPOINT = {
    "type": ["string", "array", "object"],
    "pattern": r"\S",
    "x-pattern": "must not be empty",
    "items": text(),
    "minItems": 1,
    "x-messages": {"minItems": "must not be an empty list"},
    **{k: v for k, v in _SCRIPT.items() if k not in ("type",)},
}

TOP_LEVEL: dict[str, Schema] = {
    "description": text(),
    "name": text(),
    "labels": {"type": ["array", "object"], "items": text()},
    "data": MAPPING,
    "hyperparameters": SPACE,
    "searcher": SEARCHER,
    "batches_per_step": integer(1),
    "scheduling_unit": integer(1),
    "min_validation_period": length(0),
    "min_checkpoint_period": length(0),
    "checkpoint_storage": CHECKPOINT_STORAGE,
    "resources": RESOURCES,
    "max_restarts": integer(0),
    "entrypoint": ENTRYPOINT,
    "entrypoints": {
        "type": "object",
        "x-type": (
            "expected a mapping with trial_class, data_loaders_function, download_data_function, got {value}"
        ),
    },
    "environment": ENVIRONMENT,
    "reproducibility": REPRODUCIBILITY,
    "records_per_epoch": integer(0),
    "optimizations": OPTIMIZATIONS,
    # Trials are plain processes: which mounts pedl can honour is decided in `sections.validate_bind_mounts`.
    "bind_mounts": {"type": "array", "items": MAPPING},
    "perform_initial_validation": BOOLEAN,
    "checkpoint_policy": choice("best", "all", "none"),
    "tensorboard_storage": MAPPING,
    "profiling": PROFILING,
    "debug": BOOLEAN,
    "workspace": text(),
    "project": text(),
    "data_layer": {"type": "object", "properties": {"type": text(True)}},
    # Accepted as written so Determined configs load; pedl does not act on them (fields.FIELDS).
    "internal": ANY,
    "pbs": section({"slots_per_node": integer(1), "pbsbatch_args": strings()}),
    "slurm": section({"slots_per_node": integer(1), "gpu_type": text(), "sbatch_args": strings()}),
    "log_policies": LOG_POLICIES,
    "retention_policy": ANY,
    "integrations": ANY,
    "preemption_timeout": ANY,
    "security": ANY,
}

EXPERIMENT_SCHEMA: Schema = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": "https://pedl.dev/schemas/experiment-config/v1.json",
    "title": "pedl experiment config",
    **section(TOP_LEVEL, required=("searcher",)),
    "$defs": {"space": SPACE, "hyperparameter": HYPERPARAMETER},
}
