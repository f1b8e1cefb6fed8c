"""An experiment's bind_mounts on an agent: honoured (writable, at host_path) or the run fails naming it."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from pedl_agent.bind_mounts import bind_mounts_from_json, unmet_bind_mount
from pedl_agent.sandbox import Sandbox

CONFIG = """
searcher: {name: single, metric: loss, max_length: {batches: 1}}
bind_mounts:
  - {host_path: %s, container_path: %s, read_only: false, propagation: rprivate}
"""


def _mounts(path: Path) -> list[dict]:
    return bind_mounts_from_json(json.dumps(yaml.safe_load(CONFIG % (path, path))))


def test_a_plain_process_sees_the_host_path_as_it_is(tmp_path: Path) -> None:
    assert unmet_bind_mount(_mounts(tmp_path / "data"), None) is None


def test_a_sandbox_honours_a_mount_inside_a_directory_the_operator_shares(tmp_path: Path) -> None:
    sandbox = Sandbox("bwrap", shared=(tmp_path,))
    assert unmet_bind_mount(_mounts(tmp_path / "data"), sandbox) is None
    assert unmet_bind_mount(_mounts(tmp_path), sandbox) is None


def test_a_sandbox_refuses_a_mount_it_would_show_read_only_naming_the_field(tmp_path: Path) -> None:
    sandbox = Sandbox("bwrap", shared=(tmp_path / "datasets",))
    error = unmet_bind_mount(_mounts(tmp_path / "scratch"), sandbox)
    assert error is not None and error.startswith("bind_mounts[0].host_path ")
    assert f"--bind {tmp_path / 'scratch'}" in error and "\n" not in error


def test_a_sandbox_refuses_a_mount_inside_what_the_agent_hides(tmp_path: Path) -> None:
    sandbox = Sandbox("bwrap", hidden=(tmp_path / "work",), shared=(tmp_path,))
    error = unmet_bind_mount(_mounts(tmp_path / "work" / "trials"), sandbox)
    assert error is not None and "hides" in error


def test_a_config_without_mounts_needs_nothing() -> None:
    assert bind_mounts_from_json('{"searcher": {"name": "single"}}') == []
    assert bind_mounts_from_json("") == []
    assert bind_mounts_from_json("{not json") == []
    assert unmet_bind_mount([], Sandbox("bwrap")) is None


def test_a_refused_mount_signs_the_runs_failure_so_a_repeat_ends_the_trial(tmp_path: Path) -> None:
    """The scheduler ends a trial whose two runs fail alike before training (#37.5): the refusal
    carries the mount as its location, the same on every run this agent refuses."""
    import pytest

    from pedl_agent.bind_mounts import BindMountRefused, refuse_unmet_bind_mount

    sandbox = Sandbox("bwrap", shared=(tmp_path / "datasets",))
    refuse_unmet_bind_mount(_mounts(tmp_path / "datasets" / "a"), sandbox)
    with pytest.raises(BindMountRefused) as refused:
        refuse_unmet_bind_mount(_mounts(tmp_path / "scratch"), sandbox)
    signature = refused.value.signature()
    assert signature.location == "bind_mounts[0]" and signature.exception_type.endswith("BindMountRefused")
    assert str(refused.value.args[0]).startswith("bind_mounts[0].host_path ")
