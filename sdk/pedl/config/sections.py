"""Validators for the smaller config sections; each fills Determined's documented defaults."""

from __future__ import annotations

import posixpath
import re
from typing import Any

from pedl.config._checks import (
    check_keys,
    describe,
    expect_bool,
    expect_choice,
    expect_int,
    expect_list,
    expect_mapping,
    expect_number,
    expect_str,
    expect_str_list,
    is_int,
)
from pedl.config.env_vars import check_environment_variables
from pedl.config.errors import FieldError, FieldPath

_RESOURCE_KEYS = (
    "slots_per_trial",
    "max_slots",
    "weight",
    "priority",
    "resource_pool",
    "native_parallel",
    "shm_size",
    "agent_label",
    "devices",
    "is_single_node",
    "slots",
)


def validate_resources(value: Any, path: FieldPath = ("resources",)) -> dict[str, Any]:
    """`slots_per_trial: 0` is allowed (a CPU-only trial), as in Determined."""
    resources = dict(expect_mapping({} if value is None else value, path))
    check_keys(resources, path, _RESOURCE_KEYS)
    resources.setdefault("slots_per_trial", 1)
    resources.setdefault("weight", 1)
    resources.setdefault("native_parallel", False)
    expect_int(resources["slots_per_trial"], (*path, "slots_per_trial"), minimum=0)
    expect_number(resources["weight"], (*path, "weight"), exclusive_minimum=0)
    expect_bool(resources["native_parallel"], (*path, "native_parallel"))
    if resources.get("max_slots") is not None:
        expect_int(resources["max_slots"], (*path, "max_slots"), minimum=1)
    if resources.get("priority") is not None:
        expect_int(resources["priority"], (*path, "priority"), minimum=1, maximum=99)
    for key in ("resource_pool", "agent_label"):
        if resources.get(key) is not None:
            expect_str(resources[key], (*path, key))
    label = resources.get("agent_label") or ""
    if label != label.strip() or "@" in label:
        raise FieldError((*path, "agent_label"), "a label is a name without '@' or surrounding spaces")
    if "slots" in resources:
        expect_int(resources["slots"], (*path, "slots"), minimum=0)
    if "shm_size" in resources:
        _check_size(resources["shm_size"], (*path, "shm_size"))
    if "devices" in resources:
        devices = expect_list(resources["devices"], (*path, "devices"))
        resources["devices"] = [_device(d, (*path, "devices", i)) for i, d in enumerate(devices)]
    return resources


# Determined's memory sizes: a number, optionally a space, then a unit like k, Mi, GB, or b.
_SIZE = re.compile(r"^([0-9]*[.])?[0-9]+ ?(([kmgtpKMGTP]([iI]?[bB])?)|[bB])?$")


def _check_size(value: Any, path: FieldPath) -> None:
    if is_int(value):
        expect_int(value, path, minimum=0)
    elif not isinstance(value, str) or not _SIZE.match(value):
        raise FieldError(path, f"expected a memory size like 4G, 512Mi or 1.5 gb, got {describe(value)}")


def _device(device: Any, path: FieldPath) -> dict[str, Any]:
    """Determined's two forms, `host:container[:mode]` or a mapping, as its mapping (mode `mrw`)."""
    if isinstance(device, str):
        parts = device.split(":")
        if len(parts) not in (2, 3) or not all(parts):
            raise FieldError(path, f"expected 'HOST_PATH:CONTAINER_PATH[:MODE]', got {describe(device)}")
        device = dict(zip(("host_path", "container_path", "mode"), parts, strict=False))
    device = {k: v for k, v in expect_mapping(device, path).items() if v is not None or k != "mode"}
    check_keys(
        device, path, ("host_path", "container_path", "mode"), required=("host_path", "container_path")
    )
    device.setdefault("mode", "mrw")
    for key in ("host_path", "container_path", "mode"):
        expect_str(device[key], (*path, key), non_empty=True)
    return device


_MOUNT_PATHS = ("host_path", "container_path")
_MOUNT_KEYS = (*_MOUNT_PATHS, "read_only", "propagation")


# Determined's mount propagation values; a sandboxed trial gets a private mount whichever is named
# (nothing the host mounts later reaches it), which is what `rprivate`, the default, means.
PROPAGATIONS = ("rprivate", "private", "rshared", "shared", "rslave", "slave")
# What a trial needs where it is: a mount there would hide the system it runs on.
_COVERED_BY_NO_MOUNT = ("/", "/usr", "/bin", "/sbin", "/lib", "/lib64", "/etc", "/proc", "/dev", "/sys")


def validate_bind_mounts(value: Any, path: FieldPath = ("bind_mounts",)) -> list[Any]:
    """Determined's bind_mounts: host_path mounted at container_path in the trial's sandbox (a
    relative container_path is inside the model directory), read-only where asked. Whether the host
    path may be mounted is the cluster's to say (the scheduler's and agent's --allowed-bind-root)."""
    mounts = expect_list(value, path)
    out: list[Any] = []
    for i, given in enumerate(mounts):
        item = (*path, i)
        # Determined's null read_only / propagation mean their defaults; the two paths have none.
        mount = {k: v for k, v in expect_mapping(given, item).items() if v is not None or k in _MOUNT_PATHS}
        check_keys(mount, item, _MOUNT_KEYS, required=_MOUNT_PATHS)
        for key in _MOUNT_PATHS:
            if mount[key] is None:
                raise FieldError((*item, key), "is required (an absolute path), got null")
        host = expect_str(mount["host_path"], (*item, "host_path"), non_empty=True)
        container = expect_str(mount["container_path"], (*item, "container_path"), non_empty=True)
        if not posixpath.isabs(host):
            raise FieldError((*item, "host_path"), f"must be an absolute path, got {host!r}")
        if container == "." or posixpath.normpath(container).startswith(".."):
            raise FieldError((*item, "container_path"), f"must not be {container!r} (the model directory)")
        covered = next(
            (n for n in _COVERED_BY_NO_MOUNT if posixpath.isabs(container) and _covers(container, n)), None
        )
        if covered is not None:
            raise FieldError(
                (*item, "container_path"),
                f"{container!r} would cover {covered}, which the trial needs to run; mount it elsewhere",
            )
        mount.setdefault("read_only", False)
        mount.setdefault("propagation", "rprivate")
        expect_bool(mount["read_only"], (*item, "read_only"))
        propagation = expect_str(mount["propagation"], (*item, "propagation"))
        if propagation not in PROPAGATIONS:
            raise FieldError(
                (*item, "propagation"), f"must be one of {', '.join(PROPAGATIONS)}, got {propagation!r}"
            )
        out.append(mount)
    return out


def _covers(container: str, needed: str) -> bool:
    """Whether a mount at `container` hides `needed` or part of it (is it, a parent or a child)."""
    c, n = posixpath.normpath(container), posixpath.normpath(needed)
    return c == n or c == "/" or n.startswith(c + "/") or (n != "/" and c.startswith(n + "/"))


ENVIRONMENT_KEYS = (
    "name",
    "python",
    "image",
    "environment_variables",
    "force_pull_image",
    "registry_auth",
    "pod_spec",
    "add_capabilities",
    "drop_capabilities",
    "ports",
    "proxy_ports",
)
_DEVICE_TYPES = ("cpu", "cuda", "rocm", "gpu")


def validate_environment(value: Any, path: FieldPath = ("environment",)) -> str | dict[str, Any]:
    """A string names a Python environment; a mapping is Determined's (container) environment.

    Its container-only keys are warned about or refused by fields.FIELDS; the environment name for a
    mapping comes from its `name` key, falling back to `python`.
    """
    if isinstance(value, str):
        return expect_str(value, path, non_empty=True)
    env = dict(expect_mapping(value, path))
    check_keys(env, path, ENVIRONMENT_KEYS)
    for key in ("name", "python"):
        if key in env:
            expect_str(env[key], (*path, key), non_empty=True)
    if "image" in env:
        if isinstance(env["image"], dict):
            check_keys(env["image"], (*path, "image"), _DEVICE_TYPES)
            for key, image in env["image"].items():
                if image is not None:
                    expect_str(image, (*path, "image", key))
        elif not isinstance(env["image"], str):
            raise FieldError(
                (*path, "image"), f"expected a string or a mapping, got {describe(env['image'])}"
            )
    if "environment_variables" in env:
        check_environment_variables(env["environment_variables"], (*path, "environment_variables"))
    if "force_pull_image" in env:
        expect_bool(env["force_pull_image"], (*path, "force_pull_image"))
    if "pod_spec" in env:
        _check_pod_spec(env["pod_spec"], (*path, "pod_spec"))
    return env


# What Determined's schema forbids a pod_spec to set (it is Determined's to configure): checked so a
# config Determined refuses is refused here too, though pedl has no pods (fields.FIELDS warns).
_POD_DISALLOWED = ("name", "name_space")
_TRIAL_CONTAINER = "determined-container"
_TRIAL_CONTAINER_DISALLOWED = (
    "image",
    "command",
    "args",
    "working_dir",
    "ports",
    "liveness_probe",
    "readiness_probe",
    "startup_probe",
    "lifecycle",
    "termination_message_path",
    "termination_message_policy",
    "image_pull_policy",
    "security_context",
)


def _check_pod_spec(value: Any, path: FieldPath) -> None:
    spec = expect_mapping(value, path)
    for key in _POD_DISALLOWED:
        if key in spec:
            raise FieldError((*path, key), "is not configurable (Determined sets the pod's)")
    containers = (spec.get("spec") or {}).get("containers") if isinstance(spec.get("spec"), dict) else None
    for i, container in enumerate(containers if isinstance(containers, list) else ()):
        if isinstance(container, dict) and container.get("name") == _TRIAL_CONTAINER:
            for key in _TRIAL_CONTAINER_DISALLOWED:
                if key in container:
                    raise FieldError(
                        (*path, "spec", "containers", i, key),
                        f"is not configurable in the {_TRIAL_CONTAINER} container",
                    )


def environment_name(env: str | dict[str, Any] | None) -> str | None:
    if env is None or isinstance(env, str):
        return env
    return env.get("name") or env.get("python")


def validate_reproducibility(value: Any, path: FieldPath = ("reproducibility",)) -> dict[str, Any]:
    repro = dict(expect_mapping({} if value is None else value, path))
    check_keys(repro, path, ("experiment_seed", "replay_mismatch"))
    if repro.get("experiment_seed") is not None:
        expect_int(repro["experiment_seed"], (*path, "experiment_seed"), minimum=0, maximum=2**31 - 1)
    # What a resumed trial does when a replayed Python generator gives other data than before
    # (pedl.keras._replay): "fail" (the default) or "warn" and continue.
    if repro.get("replay_mismatch") is not None and repro["replay_mismatch"] not in ("fail", "warn"):
        shown = describe(repro["replay_mismatch"])
        raise FieldError((*path, "replay_mismatch"), f"expected 'fail' or 'warn', got {shown}")
    return repro


_PROFILING_KEYS = ("enabled", "begin_on_batch", "end_after_batch", "sync_timings")


def validate_profiling(value: Any, path: FieldPath = ("profiling",)) -> dict[str, Any]:
    profiling = dict(expect_mapping(value, path))
    check_keys(profiling, path, _PROFILING_KEYS)
    for key in ("enabled", "sync_timings"):
        if key in profiling:
            expect_bool(profiling[key], (*path, key))
    for key in ("begin_on_batch", "end_after_batch"):
        if profiling.get(key) is not None:
            expect_int(profiling[key], (*path, key), minimum=0)
    begin, end = profiling.get("begin_on_batch"), profiling.get("end_after_batch")
    if begin is not None and end is not None and begin > end:
        raise FieldError((*path, "begin_on_batch"), f"must not be after end_after_batch ({begin} > {end})")
    return profiling


def validate_labels(value: Any, path: FieldPath = ("labels",)) -> list[str] | dict[str, Any]:
    """Determined uses a list of strings; older configs used a mapping of label -> anything."""
    if isinstance(value, dict):
        return expect_mapping(value, path)
    return expect_str_list(value, path)


def validate_typed_mapping(value: Any, path: FieldPath) -> dict[str, Any]:
    """Sections like data_layer/tensorboard_storage: a mapping whose optional `type` is a string."""
    mapping = expect_mapping(value, path)
    if "type" in mapping:
        expect_str(mapping["type"], (*path, "type"), non_empty=True)
    return mapping


_OPTIMIZATION_INTS = {
    "aggregation_frequency": 1,
    "tensor_fusion_threshold": 0,
    "tensor_fusion_cycle_time": 0,
}
_OPTIMIZATION_BOOLS = (
    "average_aggregated_gradients",
    "average_training_metrics",
    "gradient_compression",
    "auto_tune_tensor_fusion",
    "auto_tf32",
)


def validate_optimizations(value: Any, path: FieldPath = ("optimizations",)) -> dict[str, Any]:
    """Values that reach here are Determined's defaults or Horovod knobs (see fields.FIELDS)."""
    opts = dict(expect_mapping(value, path))
    known = (*_OPTIMIZATION_INTS, *_OPTIMIZATION_BOOLS, "mixed_precision", "grad_updates_size_file")
    check_keys(opts, path, known)
    for key, minimum in _OPTIMIZATION_INTS.items():
        if key in opts:
            expect_int(opts[key], (*path, key), minimum=minimum)
    for key in _OPTIMIZATION_BOOLS:
        if key in opts:
            expect_bool(opts[key], (*path, key))
    if "mixed_precision" in opts:
        expect_choice(opts["mixed_precision"], (*path, "mixed_precision"), ("O0", "O1", "O2", "O3"))
    if "grad_updates_size_file" in opts:
        expect_str(opts["grad_updates_size_file"], (*path, "grad_updates_size_file"))
    return opts


_HPC_KEYS = {
    "pbs": ("slots_per_node", "pbsbatch_args"),
    "slurm": ("slots_per_node", "gpu_type", "sbatch_args"),
}


def validate_hpc(value: Any, path: FieldPath) -> dict[str, Any]:
    """`pbs` / `slurm`: checked as Determined does, though pedl launches no HPC jobs."""
    section = dict(expect_mapping(value, path))
    check_keys(section, path, _HPC_KEYS[str(path[-1])])
    if "slots_per_node" in section:
        expect_int(section["slots_per_node"], (*path, "slots_per_node"), minimum=1)
    if "gpu_type" in section:
        expect_str(section["gpu_type"], (*path, "gpu_type"))
    for key in ("pbsbatch_args", "sbatch_args"):
        if key in section:
            expect_str_list(section[key], (*path, key))
    return section
