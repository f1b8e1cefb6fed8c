"""The store's settings: command-line flags, then PEDL_CHECKPOINT_STORE_* env vars, then defaults."""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

ENV_PREFIX = "PEDL_CHECKPOINT_STORE_"
LOG_LEVELS = ("debug", "info", "warning", "error")


@dataclass(frozen=True)
class Config:
    host: str = "127.0.0.1"
    port: int = 8090
    storage_path: Path = Path("~/.pedl/checkpoints")
    port_file: Path | None = None
    log_level: str = "info"

    @property
    def address(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


class ConfigError(ValueError):
    pass


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="pedl-checkpoint-store",
        description="Serve pedl checkpoints (metadata and bytes) over gRPC. "
        f"Every flag can also be set by an env var {ENV_PREFIX}<FLAG>, e.g. {ENV_PREFIX}PORT.",
    )
    p.add_argument("--host", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", help="port to listen on; 0 picks a free one (default 8090)")
    p.add_argument("--storage-path", help="directory holding the checkpoints (default ~/.pedl/checkpoints)")
    p.add_argument("--port-file", help="once serving, write the bound port to this file")
    p.add_argument("--log-level", help=f"one of {', '.join(LOG_LEVELS)} (default info)")
    return p


def parse_config(argv: Sequence[str] | None = None, env: Mapping[str, str] | None = None) -> Config:
    """Raises ConfigError naming the flag or env var whose value is bad."""
    args = vars(_parser().parse_args(argv))
    env = os.environ if env is None else env
    values: dict[str, tuple[str, str]] = {}  # field -> (value, where it came from)
    for name in ("host", "port", "storage_path", "port_file", "log_level"):
        flag = "--" + name.replace("_", "-")
        var = ENV_PREFIX + name.upper()
        if args[name] is not None:
            values[name] = (args[name], flag)
        elif env.get(var):
            values[name] = (env[var], var)
    defaults = Config()
    host = values.get("host", (defaults.host, ""))[0]
    port = defaults.port
    if "port" in values:
        raw, source = values["port"]
        try:
            port = int(raw)
        except ValueError:
            raise ConfigError(f"{source}: {raw!r} is not a port number") from None
        if not 0 <= port <= 65535:
            raise ConfigError(f"{source}: {port} is not between 0 and 65535")
    storage_path = Path(values.get("storage_path", (str(defaults.storage_path), ""))[0]).expanduser()
    port_file = Path(values["port_file"][0]).expanduser() if "port_file" in values else None
    log_level = defaults.log_level
    if "log_level" in values:
        raw, source = values["log_level"]
        log_level = raw.lower()
        if log_level not in LOG_LEVELS:
            raise ConfigError(f"{source}: {raw!r} is not one of {', '.join(LOG_LEVELS)}")
    return Config(host=host, port=port, storage_path=storage_path, port_file=port_file, log_level=log_level)
