"""The README's Core API path as a user runs it: a training script of their own, submitted with the
CLI, its metrics in `det experiment describe`."""

from __future__ import annotations

import re

import pytest
from test_cli import User, user  # noqa: F401  (the fixture)

pytestmark = pytest.mark.e2e


def test_a_core_api_script_from_the_cli_shows_its_metrics_in_describe(user: User) -> None:  # noqa: F811
    out = user.ok(
        "pedl", "experiment", "create", "examples/core_api/single.yaml", "examples/core_api", "--follow"
    )
    exp_id = re.search(r"Created experiment (\d+)", out).group(1)
    assert "COMPLETED" in out
    described = user.ok("det", "experiment", "describe", exp_id)
    assert "validation_loss" in described and "COMPLETED" in described


def test_a_command_naming_a_script_that_is_not_there_is_refused_before_upload(user: User, tmp_path) -> None:  # noqa: F811
    config = tmp_path / "missing.yaml"
    config.write_text("entrypoint: python3 missing.py\nsearcher: {name: single, metric: x}\n")
    result = user.run("pedl", "experiment", "create", str(config), "examples/core_api")
    assert result.returncode != 0
    assert "runs missing.py, which is not in" in result.stderr
