"""Validators for the smaller config sections; each fills Determined's documented defaults."""

from __future__ import annotations

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
from pedl.config.errors import FieldError, FieldPath

_SAVE_KEYS = ("save_experiment_best", "save_trial_best", "save_trial_latest")
_SAVE_DEFAULTS = {"save_experiment_best": 0, "save_trial_best": 1, "save_trial_latest": 1}
# type -> (allowed keys, required keys). shared_fs and s3 are what pedl's store serves; the others
# are accepted so Determined configs load, and the checkpoint store decides whether it can use them.
_STORAGE: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "shared_fs": (
        ("host_path", "storage_path", "container_path", "propagation", "checkpoint_path", "tensorboard_path"),
        ("host_path",),
    ),
    "s3": (("bucket", "access_key", "secret_key", "endpoint_url", "prefix"), ("bucket",)),
    "gcs": (("bucket", "prefix"), ("bucket",)),
    "azure": (("container", "connection_string", "account_url", "credential"), ("container",)),
    "hdfs": (("hdfs_url", "hdfs_path", "user"), ("hdfs_url", "hdfs_path")),
    "directory": (("container_path",), ("container_path",)),
}


def validate_checkpoint_storage(value: Any, path: FieldPath = ("checkpoint_storage",)) -> dict[str, Any]:
    """Without `type` the cluster's checkpoint store backend is used; only the save_* policy applies."""
    storage = dict(expect_mapping({} if value is None else value, path))
    for key, default in _SAVE_DEFAULTS.items():
        storage.setdefault(key, default)
        expect_int(storage[key], (*path, key), minimum=0)
    if "type" not in storage:
        check_keys(storage, path, _SAVE_KEYS)
        return storage
    kind = expect_choice(storage["type"], (*path, "type"), _STORAGE)
    allowed, required = _STORAGE[kind]
    check_keys(
        storage,
        path,
        ("type", *_SAVE_KEYS, *allowed),
        required=required,
        what=f"field for {kind} checkpoint storage",
    )
    for key in allowed:
        if key in storage and storage[key] is not None:
            expect_str(storage[key], (*path, key), non_empty=key in required)
    return storage


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
    if "is_single_node" in resources:
        expect_bool(resources["is_single_node"], (*path, "is_single_node"))
    if resources.get("shm_size") is not None:
        _check_size(resources["shm_size"], (*path, "shm_size"))
    if "devices" in resources:
        for i, device in enumerate(expect_list(resources["devices"], (*path, "devices"))):
            _check_device(device, (*path, "devices", i))
    return resources


_SIZE = re.compile(r"^\s*\d+(\.\d+)?\s*([kmgt]i?b?|b)?\s*$", re.IGNORECASE)


def _check_size(value: Any, path: FieldPath) -> None:
    """Bytes as an int, or a string with a unit like `4G` / `512Mi`."""
    if is_int(value):
        expect_int(value, path, minimum=0)
    elif not isinstance(value, str) or not _SIZE.match(value):
        raise FieldError(path, f"expected a size in bytes or a string like '4G', got {describe(value)}")


def _check_device(device: Any, path: FieldPath) -> None:
    if isinstance(device, str):
        return
    device = expect_mapping(device, path)
    check_keys(
        device, path, ("host_path", "container_path", "mode"), required=("host_path", "container_path")
    )
    expect_str(device["host_path"], (*path, "host_path"), non_empty=True)
    expect_str(device["container_path"], (*path, "container_path"), non_empty=True)
    if "mode" in device:
        expect_str(device["mode"], (*path, "mode"))


def validate_bind_mounts(value: Any, path: FieldPath = ("bind_mounts",)) -> list[dict[str, Any]]:
    mounts = []
    for i, mount in enumerate(expect_list(value, path)):
        item_path = (*path, i)
        mount = dict(expect_mapping(mount, item_path))
        check_keys(
            mount,
            item_path,
            ("host_path", "container_path", "read_only", "propagation"),
            required=("host_path", "container_path"),
        )
        expect_str(mount["host_path"], (*item_path, "host_path"), non_empty=True)
        expect_str(mount["container_path"], (*item_path, "container_path"), non_empty=True)
        mount.setdefault("read_only", False)
        expect_bool(mount["read_only"], (*item_path, "read_only"))
        mount.setdefault("propagation", "rprivate")
        expect_str(mount["propagation"], (*item_path, "propagation"))
        mounts.append(mount)
    return mounts


def validate_environment(value: Any, path: FieldPath = ("environment",)) -> str | dict[str, Any]:
    """A string names a Python environment; a mapping is Determined's (container) environment.

    Determined's keys (image, environment_variables, pod_spec, ...) are accepted as written; the
    environment name for a mapping comes from its `name` key, falling back to `python`.
    """
    if isinstance(value, str):
        return expect_str(value, path, non_empty=True)
    env = dict(expect_mapping(value, path))
    for key in ("name", "python"):
        if key in env:
            expect_str(env[key], (*path, key), non_empty=True)
    if "image" in env and not isinstance(env["image"], (str, dict)):
        raise FieldError((*path, "image"), f"expected a string or a mapping, got {describe(env['image'])}")
    if "environment_variables" in env:
        _check_env_vars(env["environment_variables"], (*path, "environment_variables"))
    if "force_pull_image" in env:
        expect_bool(env["force_pull_image"], (*path, "force_pull_image"))
    return env


def _check_env_vars(value: Any, path: FieldPath) -> None:
    if isinstance(value, dict):
        for key, items in value.items():
            _check_env_var_list(items, (*path, key))
    else:
        _check_env_var_list(value, path)


def _check_env_var_list(value: Any, path: FieldPath) -> None:
    for i, item in enumerate(expect_str_list(value, path)):
        if "=" not in item:
            raise FieldError((*path, i), f"expected NAME=value, got {describe(item)}")


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
