"""An experiment's bind_mounts on an agent: honoured (writable, at host_path) or the run fails naming it."""

from __future__ import annotations

from pathlib import Path

from pedl.config import carried, parse_experiment_config
from pedl_agent.bind_mounts import unmet_bind_mount
from pedl_agent.sandbox import Sandbox

CONFIG = """
searcher: {name: single, metric: loss, max_length: {batches: 1}}
bind_mounts:
  - {host_path: %s, container_path: %s, read_only: false, propagation: rprivate}
"""


def _mounts(path: Path) -> list[dict]:
    # As the agent gets them: decoded from the document the scheduler sends (StartTrial.config_json).
    return carried.from_json(carried.to_json(parse_experiment_config(CONFIG % (path, path)))).bind_mounts


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
    config = parse_experiment_config("searcher: {name: single, metric: loss, max_length: 1}")
    assert carried.from_json(carried.to_json(config)).bind_mounts == []
    assert unmet_bind_mount([], Sandbox("bwrap")) is None
