"""Ids on the command line: a value the API cannot carry is refused by the parser with one line
naming it (exit 2), never a traceback from the request builder."""

from __future__ import annotations

import pytest

from pedl.cli.main import main

ID_COMMANDS = [
    ["experiment", "describe", "{}"],
    ["experiment", "describe", "1,{}"],
    ["experiment", "kill", "{}"],
    ["experiment", "activate", "{}"],
    ["experiment", "list-trials", "{}"],
    ["experiment", "config", "{}"],
    ["trial", "describe", "{}"],
    ["trial", "logs", "{}"],
    ["trial", "kill", "{}"],
    ["checkpoint", "list", "{}"],
]
BAD_IDS = ["0", "-3", "2147483648", "99999999999999999999", "abc", "1.5"]


@pytest.mark.parametrize("bad", BAD_IDS)
@pytest.mark.parametrize("command", ID_COMMANDS, ids=lambda c: " ".join(c[:2]))
def test_an_id_out_of_range_exits_2_naming_it(
    command: list[str], bad: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [word.format(bad) for word in command]
    with pytest.raises(SystemExit) as exited:
        main(["--master", "127.0.0.1:1", *argv])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert f"expected a positive integer up to 2147483647, got '{bad}'" in err
    assert "Traceback" not in err


def test_the_largest_id_is_accepted_by_the_parser() -> None:
    from pedl.cli.main import build_parser

    args = build_parser().parse_args(["trial", "describe", "2147483647"])
    assert args.trial_id == 2147483647
