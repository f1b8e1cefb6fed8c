"""What only a terminal gets: progress bars and coloured states; NO_COLOR and pipes get plain text."""

from __future__ import annotations

import contextlib
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


@pytest.mark.parametrize("uploads", [True, False])
def test_the_model_definition_goes_up_in_parts_the_bar_counts(uploads: bool) -> None:
    """A scheduler without UploadExperiment still gets the whole definition in one CreateExperiment."""
    from pedl.cli.client import UPLOAD_CHUNK, SchedulerClient

    from .fake_scheduler import Script, serve

    data = bytes(range(256)) * (UPLOAD_CHUNK * 2 // 256 + 7)
    script, sent = Script(uploads=uploads), []
    with serve(script) as address, SchedulerClient(address) as client:
        assert client.create_experiment("a: 1\n", data, "model", sent.append).id == 7
    (request,) = script.created
    assert (request.config_yaml, request.model_definition_name, request.model_definition) == (
        "a: 1\n",
        "model",
        data,
    )
    if uploads:
        assert script.upload_parts == sent == [UPLOAD_CHUNK, UPLOAD_CHUNK, len(data) - 2 * UPLOAD_CHUNK]


def test_the_upload_bar_shows_the_bytes_sent(monkeypatch: pytest.MonkeyPatch) -> None:
    drawn = []
    monkeypatch.setattr(transfer_bar, "_ticker", lambda draw: _capture(drawn, draw))
    with transfer_bar.upload("Uploading", 4 * 2**20) as sent:
        sent(2**20)
        sent(2**20)
    line = drawn[0](3.0)
    assert "50%" in line and line.startswith("Uploading [") and "3 s" in line
    assert transfer_bar.bar_line("x", 2 * 2**20, 4 * 2**20, 3.0) == line.replace("Uploading", "x", 1)


@contextlib.contextmanager
def _capture(drawn: list, draw):  # type: ignore[no-untyped-def]
    drawn.append(draw)
    yield
