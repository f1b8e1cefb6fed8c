"""`pedl-scheduler --image-environment PATTERN=NAME`: rules in the order given; a bad one is a usage
error naming it."""

from __future__ import annotations

import pytest

from pedl.config.image_environments import ImageRule
from pedl_scheduler.main import parse_args


def test_rules_keep_their_order() -> None:
    args = parse_args(["--image-environment", "*tf-2.8*=tf28", "--image-environment", "*=default"])
    assert args.image_rules == (ImageRule("*tf-2.8*", "tf28"), ImageRule("*", "default"))


def test_a_rule_without_a_name_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse_args(["--image-environment", "*tf-2.8*"])
    assert "--image-environment must be PATTERN=NAME, got '*tf-2.8*'" in capsys.readouterr().err
