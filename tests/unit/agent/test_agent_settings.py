"""Flags, environment and slot detection of the agent."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from pedl_agent.config import parse_args
from pedl_agent.devices import Gpu, cuda_visible_devices, make_slots, parse_nvidia_smi
from pedl_agent.link import backoff_seconds
from pedl_agent.main import _socket_dir
from pedl_agent.model_definitions import check_name


def test_defaults_come_from_the_environment_then_built_ins(tmp_path: Path) -> None:
    cfg = parse_args(["--agent-id", "a1"], environ={"PEDL_MASTER": "sched:9000"})
    assert cfg.master == "sched:9000"
    assert cfg.work_dir == Path.home() / ".pedl" / "agent" / "a1"
    assert cfg.cpu_slots is None and cfg.resource_pool == "default" and cfg.kill_grace_seconds == 10.0
    assert cfg.harness_argv()[1:] == ["-m", "pedl.harness"]
    assert parse_args(["--agent-id", "a1"], environ={}).master == "127.0.0.1:8080"


def test_flags_win_over_the_environment(tmp_path: Path) -> None:
    cfg = parse_args(
        ["--master", "m:1", "--slots", "3", "--work-dir", str(tmp_path)]
        + ["--harness-command", "py 'my harness.py'"],
        environ={"PEDL_MASTER": "other:2", "PEDL_HARNESS_COMMAND": "ignored"},
    )
    assert (cfg.master, cfg.cpu_slots, cfg.work_dir) == ("m:1", 3, tmp_path.resolve())
    assert cfg.harness_argv() == ["py", "my harness.py"]
    assert parse_args([], environ={"PEDL_HARNESS_COMMAND": "x y"}).harness_argv() == ["x", "y"]
    assert parse_args([], environ={}).preload_tensorflow_after_seconds == 5.0
    assert parse_args(["--preload-tensorflow-after", "0"], environ={}).preload_tensorflow_after_seconds == 0.0


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--master", "no-port"], "--master must be HOST:PORT"),
        (["--slots", "-1"], "--slots must be >= 0"),
        (["--harness-command", "unclosed 'quote"], "--harness-command cannot be parsed"),
        (["--preload-tensorflow-after", "-1"], "--preload-tensorflow-after -1: must be a number of seconds"),
        (["--preload-tensorflow-after", "nan"], "--preload-tensorflow-after nan: must be"),
        (["--preload-tensorflow-after", "soon"], "--preload-tensorflow-after: invalid float value: 'soon'"),
    ],
)
def test_bad_flags_are_named(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse_args(argv, environ={})
    assert message in capsys.readouterr().err


def test_nvidia_smi_output_becomes_gpu_slots() -> None:
    gpus = parse_nvidia_smi("0, GPU-aaa, NVIDIA H100 80GB HBM3\n1, GPU-bbb, NVIDIA H100, rev 2\n\n")
    assert gpus == [Gpu(0, "GPU-aaa", "NVIDIA H100 80GB HBM3"), Gpu(1, "GPU-bbb", "NVIDIA H100, rev 2")]
    assert [(s.id, s.type, s.device) for s in make_slots(gpus, None)] == [
        ("gpu0", "gpu", "GPU-aaa"),
        ("gpu1", "gpu", "GPU-bbb"),
    ]
    assert [s.id for s in make_slots(gpus, 1)] == ["gpu0", "gpu1", "cpu0"]
    with pytest.raises(ValueError, match="line 1"):
        parse_nvidia_smi("garbage")


def test_cpu_machine_offers_one_slot_by_default_and_refuses_none() -> None:
    assert [s.id for s in make_slots([], None)] == ["cpu0"]
    assert [s.id for s in make_slots([], 2)] == ["cpu0", "cpu1"]
    with pytest.raises(ValueError, match="no slots"):
        make_slots([], 0)


def test_trials_see_only_their_gpus() -> None:
    gpus = [Gpu(0, "GPU-aaa", "x"), Gpu(1, "GPU-bbb", "x")]
    assert cuda_visible_devices(["gpu1"], gpus) == "GPU-bbb"
    assert cuda_visible_devices(["cpu0"], gpus) == ""
    assert cuda_visible_devices(["cpu0"], []) is None


def test_backoff_doubles_up_to_the_cap() -> None:
    assert [backoff_seconds(n, 5.0) for n in range(8)] == [0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 5.0, 5.0]


@pytest.mark.parametrize("name", ["", ".", "..", "a/b", "a\\b"])
def test_model_definition_names_must_be_one_directory(name: str) -> None:
    with pytest.raises(ValueError, match="model_definition_name"):
        check_name(name)


def test_harness_sockets_stay_short_enough_for_unix_sockets(tmp_path: Path) -> None:
    # pytest's tmp_path can itself be long (pytest-xdist adds a worker folder): use a short one.
    with tempfile.TemporaryDirectory(dir="/tmp") as top:
        short, temporary = _socket_dir(Path(top) / "w")
        assert short == Path(top) / "w" / "sock" and not temporary
    deep = tmp_path / ("d" * 120)
    sock_dir, temporary = _socket_dir(deep)
    try:
        assert temporary and len(str(sock_dir / "2147483647-2147483647.sock")) < 104
    finally:
        sock_dir.rmdir()


def test_label_is_sent_at_registration_and_a_bad_one_is_refused(capsys) -> None:
    assert parse_args(["--agent-id", "a1"], environ={}).label == ""
    assert parse_args(["--agent-id", "a1", "--label", "big"], environ={}).label == "big"
    with pytest.raises(SystemExit):
        parse_args(["--agent-id", "a1", "--label", "gpu@rack"], environ={})
    assert "--label 'gpu@rack'" in capsys.readouterr().err


def test_an_address_of_another_machine_is_refused_at_start(capsys) -> None:
    assert parse_args(["--agent-id", "a1", "--address", "127.0.0.1"], environ={}).address == "127.0.0.1"
    with pytest.raises(SystemExit):
        parse_args(["--agent-id", "a1", "--address", "198.18.0.250"], environ={})
    err = capsys.readouterr().err
    assert "--address 198.18.0.250 is not an address of this machine (its interfaces: lo 127.0.0.1" in err
    with pytest.raises(SystemExit):
        parse_args(["--agent-id", "a1", "--address", "no-such-host.invalid"], environ={})
    assert "--address 'no-such-host.invalid' does not resolve" in capsys.readouterr().err
