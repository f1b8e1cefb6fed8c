from pathlib import Path

import pytest

from pedl_checkpoint_store.config import ConfigError, parse_config


def test_defaults() -> None:
    config = parse_config([], env={})
    assert (config.host, config.port, config.port_file, config.log_level) == ("127.0.0.1", 8090, None, "info")
    assert config.storage_path == Path("~/.pedl/checkpoints").expanduser()


def test_flags_beat_env_and_env_beats_defaults(tmp_path: Path) -> None:
    env = {
        "PEDL_CHECKPOINT_STORE_PORT": "9000",
        "PEDL_CHECKPOINT_STORE_HOST": "0.0.0.0",
        "PEDL_CHECKPOINT_STORE_STORAGE_PATH": str(tmp_path / "env"),
    }
    config = parse_config(["--port", "0", "--port-file", str(tmp_path / "p")], env=env)
    assert config.port == 0
    assert config.host == "0.0.0.0"
    assert config.storage_path == tmp_path / "env"
    assert config.port_file == tmp_path / "p"


def test_orphan_sweep_defaults_and_settings() -> None:
    config = parse_config([], env={})
    assert (config.orphan_sweep_grace, config.orphan_sweep_interval) == (7200.0, 600.0)
    env = {"PEDL_CHECKPOINT_STORE_ORPHAN_SWEEP_INTERVAL": "30"}
    config = parse_config(["--orphan-sweep-grace", "2.5"], env=env)
    assert (config.orphan_sweep_grace, config.orphan_sweep_interval) == (2.5, 30.0)
    assert parse_config(["--orphan-sweep-interval", "0"], env={}).orphan_sweep_interval == 0


@pytest.mark.parametrize(
    ("argv", "env", "message"),
    [
        (["--port", "http"], {}, "--port: 'http' is not a port number"),
        ([], {"PEDL_CHECKPOINT_STORE_PORT": "70000"}, "PEDL_CHECKPOINT_STORE_PORT: 70000 is not between"),
        (["--log-level", "loud"], {}, "--log-level: 'loud' is not one of"),
        (["--orphan-sweep-grace", "1h"], {}, "--orphan-sweep-grace: '1h' is not a number of seconds"),
        (["--orphan-sweep-grace", "-5"], {}, "--orphan-sweep-grace: '-5' must be a number of seconds >= 0"),
        (
            [],
            {"PEDL_CHECKPOINT_STORE_ORPHAN_SWEEP_INTERVAL": "nan"},
            "PEDL_CHECKPOINT_STORE_ORPHAN_SWEEP_INTERVAL: 'nan' must be a number of seconds >= 0",
        ),
    ],
)
def test_bad_values_name_their_source(argv: list[str], env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_config(argv, env=env)
