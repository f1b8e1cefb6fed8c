"""Reads deploy/docker-compose.yml as `docker compose` would: `${VAR:-default}` interpolation from
an environment (a .env file's values), `$$` escapes, YAML merge keys; typed services."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml

COMPOSE = Path(__file__).resolve().parents[2] / "deploy" / "docker-compose.yml"


def interpolate(text: str, env: dict[str, str] | None = None) -> str:
    """Compose's `${VAR:-default}` and `${VAR}` from `env` (else the default), and `$$` escapes."""
    env = env or {}

    def value(m: re.Match[str]) -> str:
        return env.get(m[1]) or (m[2] or "")

    text = re.sub(r"(?<!\$)\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}", value, text)
    return text.replace("$$", "$")


@dataclass(frozen=True)
class Volume:
    source: str  # a named volume, or "" for an anonymous one
    target: str
    read_only: bool


@dataclass
class ComposeService:
    name: str
    command: list[str]
    environment: dict[str, str]
    volumes: list[Volume]
    healthcheck: list[str] = field(default_factory=list)  # the CMD argv, if any
    depends_on: dict[str, str] = field(default_factory=dict)


def _volume(spec: str) -> Volume:
    parts = spec.split(":")
    if len(parts) == 1:
        return Volume("", parts[0], False)
    return Volume(parts[0], parts[1], len(parts) > 2 and parts[2] == "ro")


def services(env: dict[str, str] | None = None, path: Path = COMPOSE) -> dict[str, ComposeService]:
    raw = yaml.safe_load(interpolate(path.read_text(), env))["services"]
    out: dict[str, ComposeService] = {}
    for name, spec in raw.items():
        check = (spec.get("healthcheck") or {}).get("test") or []
        depends = spec.get("depends_on") or {}
        out[name] = ComposeService(
            name=name,
            command=[str(a) for a in spec.get("command") or spec.get("entrypoint") or []],
            environment={k: str(v) for k, v in (spec.get("environment") or {}).items()},
            volumes=[_volume(v) for v in spec.get("volumes") or []],
            healthcheck=[str(a) for a in check[1:]] if check[:1] == ["CMD"] else [],
            depends_on={d: c["condition"] for d, c in depends.items()} if isinstance(depends, dict) else {},
        )
    return out
