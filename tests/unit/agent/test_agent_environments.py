"""Python environments an agent offers (--environment NAME=PYTHON) and how a trial picks one."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from pedl_agent.agent import Agent
from pedl_agent.config import parse_args
from pedl_agent.run_settings import RunSettings


def test_environments_are_offered_by_name_with_default_first(tmp_path: Path) -> None:
    cfg = parse_args(["--environment", f"tf215={sys.executable}", "--python", "/usr/bin/python3"], environ={})
    assert cfg.environments == {"tf215": str(Path(sys.executable).absolute())}
    argvs = cfg.environment_argvs()
    assert list(argvs) == ["default", "tf215"]
    assert argvs["default"] == ["/usr/bin/python3", "-m", "pedl.harness"]
    assert argvs["tf215"] == [str(Path(sys.executable).absolute()), "-m", "pedl.harness"]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("tf215", "--environment must be NAME=PYTHON"),
        ("tf 215=/bin/sh", "may hold only letters"),
        ("default=/bin/sh", "the default environment is --python"),
        ("tf215=/no/such/python", "/no/such/python is not an executable file"),
    ],
)
def test_bad_environments_are_named(value: str, message: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse_args(["--environment", value], environ={})
    assert message in capsys.readouterr().err


def test_a_trial_gets_its_environments_harness_or_an_error_listing_the_offered_ones(tmp_path: Path) -> None:
    settings = RunSettings(
        harness_argv=["py", "-m", "pedl.harness"],
        work_dir=tmp_path,
        socket_dir=tmp_path,
        model_definitions=None,  # type: ignore[arg-type]
        send=lambda _: None,
        environments={
            "default": ["py", "-m", "pedl.harness"],
            "tf215": ["/envs/tf/python", "-m", "pedl.harness"],
        },
    )
    assert settings.harness_for("") == settings.harness_for("default") == ["py", "-m", "pedl.harness"]
    assert settings.harness_for("tf215")[0] == "/envs/tf/python"
    with pytest.raises(
        ValueError, match=r"environment 'tf999' is not offered by this agent; it offers: default, tf215"
    ):
        settings.harness_for("tf999")


def test_the_agent_registers_the_environments_it_offers() -> None:
    agent = Agent("a1", [], "host", "addr", "default", run_factory=None, environments=["default", "tf215"])  # type: ignore[arg-type]
    assert list(agent.register_message().register.environments) == ["default", "tf215"]
