"""bind_mounts checked at create against the scheduler's --allowed-bind-root: one line naming the
allowed roots, before anything is created (an agent with the same roots would refuse it later)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pedl.config import ExperimentConfig, parse_experiment_config
from pedl_scheduler.bind_check import BindMountRefused, check_bind_mounts

CONFIG = """
searcher: {name: single, metric: loss, max_length: {batches: 1}}
bind_mounts:
  - {host_path: %s, container_path: /data, read_only: true}
"""


def _config(text: str) -> ExperimentConfig:
    return parse_experiment_config(text)


def test_host_paths_under_an_allowed_root_are_accepted_at_any_container_path(tmp_path: Path) -> None:
    check_bind_mounts(_config(CONFIG % (tmp_path / "datasets" / "mnist")), [tmp_path.resolve()])
    check_bind_mounts(_config(CONFIG % "/anywhere"), None)  # no roots given: the agents decide


def test_a_host_path_elsewhere_is_refused_naming_the_allowed_roots(tmp_path: Path) -> None:
    with pytest.raises(BindMountRefused) as e:
        check_bind_mounts(_config(CONFIG % "/etc"), [tmp_path.resolve()])
    message = str(e.value)
    assert message.startswith("bind_mounts[0].host_path /etc: ") and str(tmp_path.resolve()) in message
    assert "--allowed-bind-root" in message and "\n" not in message
    with pytest.raises(BindMountRefused, match="allowed roots: none"):
        check_bind_mounts(_config(CONFIG % "/etc"), [])


def test_a_symlink_out_of_an_allowed_root_is_refused(tmp_path: Path) -> None:
    (tmp_path / "escape").symlink_to("/etc")
    with pytest.raises(BindMountRefused):
        check_bind_mounts(_config(CONFIG % (tmp_path / "escape")), [tmp_path.resolve()])
