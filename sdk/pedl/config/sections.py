"""Validators for the smaller config sections; each fills Determined's documented defaults."""

from __future__ import annotations

import posixpath
import re
from typing import Any

from pedl.config._checks import (
    check_keys,
    expect_bool,
    expect_list,
    expect_mapping,
    expect_str,
)
from pedl.config.env_vars import check_environment_variables
from pedl.config.errors import FieldError, FieldPath


def validate_resources(value: Any, path: FieldPath = ("resources",)) -> dict[str, Any]:
    """Fills Determined's defaults; `slots_per_trial: 0` is allowed (a CPU-only trial), as in Determined."""
    resources = dict({} if value is None else value)
    resources.setdefault("slots_per_trial", 1)
    resources.setdefault("weight", 1)
    resources.setdefault("native_parallel", False)
    if "devices" in resources:
        resources["devices"] = [_device(d) for d in resources["devices"]]
    return resources


def _device(device: str | dict[str, Any]) -> dict[str, Any]:
    """Determined's two forms, `host:container[:mode]` or a mapping, as its mapping (mode `mrw`)."""
    if isinstance(device, str):
        device = dict(zip(("host_path", "container_path", "mode"), device.split(":"), strict=False))
    device = {k: v for k, v in device.items() if v is not None or k != "mode"}
    device.setdefault("mode", "mrw")
    return device


_MOUNT_PATHS = ("host_path", "container_path")
_MOUNT_KEYS = (*_MOUNT_PATHS, "read_only", "propagation")


# Determined's mount propagation values; a sandboxed trial gets a private mount whichever is named
# (nothing the host mounts later reaches it), which is what `rprivate`, the default, means.
PROPAGATIONS = ("rprivate", "private", "rshared", "shared", "rslave", "slave")
# What a trial needs where it is: a mount there would hide the system it runs on.
_COVERED_BY_NO_MOUNT = ("/", "/usr", "/bin", "/sbin", "/lib", "/lib64", "/etc", "/proc", "/dev", "/sys")


# A relative container_path that leaves the model directory: one folder beside it, in the run's own
# directory (as Determined's examples read `../data` beside their working directory); not pedl's
# dot-folders there, nor further up.
_BESIDE_MODEL_DIR = re.compile(r"\.\./[^/.][^/]*")


def validate_bind_mounts(value: Any, path: FieldPath = ("bind_mounts",)) -> list[Any]:
    """Determined's bind_mounts: host_path mounted at container_path in the trial's sandbox (a
    relative container_path is relative to the model directory, the trial's working directory, as
    Determined reads it relative to its working directory: inside it, or `../NAME` beside it),
    read-only where asked. Whether the host
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
        if container == "." or posixpath.normpath(container) == ".":
            raise FieldError((*item, "container_path"), f"must not be {container!r} (the model directory)")
        if posixpath.normpath(container).startswith("..") and not _BESIDE_MODEL_DIR.fullmatch(
            posixpath.normpath(container)
        ):
            raise FieldError(
                (*item, "container_path"),
                f"must not be {container!r}: a relative container_path lies inside the model directory, "
                "or beside it as ../NAME (in the run's own directory)",
            )
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


def validate_environment(
    value: str | dict[str, Any], path: FieldPath = ("environment",)
) -> str | dict[str, Any]:
    """A string names a Python environment; a mapping is Determined's (container) environment.

    Its container-only keys are warned about or refused by fields.FIELDS; the environment name for a
    mapping comes from its `name` key, falling back to `python`.
    """
    if isinstance(value, str):
        return value
    env = dict(value)
    if "environment_variables" in env:
        check_environment_variables(env["environment_variables"], (*path, "environment_variables"))
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


def _check_pod_spec(spec: dict[str, Any], path: FieldPath) -> None:
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


def check_profiling(profiling: dict[str, Any], path: FieldPath = ("profiling",)) -> None:
    """Determined's compareProperties rule, which a JSON Schema cannot state."""
    begin, end = profiling.get("begin_on_batch"), profiling.get("end_after_batch")
    if begin is not None and end is not None and begin > end:
        raise FieldError((*path, "begin_on_batch"), f"must not be after end_after_batch ({begin} > {end})")
