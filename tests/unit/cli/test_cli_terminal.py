"""What only a terminal gets: progress bars and coloured states; NO_COLOR and pipes get plain text."""

from __future__ import annotations

import io
import json

import pytest

from pedl import records
from pedl.cli import output, transfer_bar
from pedl.v1 import common_pb2


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_bar_line_shows_fraction_sizes_and_time() -> None:
    line = transfer_bar.bar_line("checkpoint u1", 512, 2048, 3.2)
    assert line == "checkpoint u1 [#######.......................]  25%  512 B / 2.0 KB  3 s"
    assert "100%" in transfer_bar.bar_line("x", 5000, 2048, 0) and "0%" in transfer_bar.bar_line("x", 1, 0, 0)


def test_states_are_coloured_only_on_a_terminal_without_no_color(monkeypatch: pytest.MonkeyPatch) -> None:
    text = "1  COMPLETED\n2  ERROR\n3  STOPPING_CANCELED"
    monkeypatch.delenv("NO_COLOR", raising=False)
    assert output.colour_states(text) == text  # pytest's stdout is no terminal
    monkeypatch.setattr("sys.stdout", Tty())
    coloured = output.colour_states(text)
    assert "\033[32mCOMPLETED\033[0m" in coloured and "\033[31mERROR\033[0m" in coloured
    assert "\033[33mSTOPPING_CANCELED\033[0m" in coloured
    monkeypatch.setenv("NO_COLOR", "1")
    assert output.colour_states(text) == text


def test_no_bar_when_stdout_is_not_a_terminal(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    with transfer_bar.upload("Uploading", 10), transfer_bar.download("ck", tmp_path / "x", 10):
        pass
    assert capsys.readouterr().err == ""


def test_hyperparameters_get_the_types_the_config_gave_them() -> None:
    space = {
        "lr": {"type": "double", "minval": 0.1, "maxval": 1},
        "layers": {"type": "int", "minval": 1, "maxval": 4},
        "width": 64,
        "act": {"type": "categorical", "vals": ["relu", 2, True]},
        "group": {"inner": {"type": "int", "minval": 1, "maxval": 2}},
    }
    typed = records.typed_hparams(
        {"lr": 1.0, "layers": 3.0, "width": 64.0, "act": 2.0, "group": {"inner": 2.0}, "extra": 1.0}, space
    )
    assert json.dumps(typed, sort_keys=True) == (
        '{"act": 2, "extra": 1.0, "group": {"inner": 2}, "layers": 3, "lr": 1.0, "width": 64}'
    )
    assert records.typed_hparams({"act": True}, space) == {"act": True}


def test_system_lines_are_pedls_own() -> None:
    assert records.is_system_line("pedl", "trial 1 started on agent-1")
    assert records.is_system_line("stderr", '{"event": "step done", "level": "info", "service": "harness"}')
    assert not records.is_system_line("stdout", '{"loss": 0.5}')
    assert not records.is_system_line("stdout", "epoch 1 loss 0.5")


def test_csv_flattens_nested_values() -> None:
    rows = [{"id": 1, "hparams": {"lr": 0.1}, "labels": ["a"], "ok": True, "end": None}]
    assert records.to_csv(rows) == 'id,hparams.lr,labels,ok,end\n1,0.1,"[""a""]",true,'


def test_states_use_the_short_names_tables_show() -> None:
    assert records.trial_state(common_pb2.TRIAL_STATE_COMPLETED) == "COMPLETED"
    assert records.checkpoint_state(common_pb2.CHECKPOINT_STATE_DELETED) == "DELETED"
