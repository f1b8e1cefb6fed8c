"""The store's settings: command-line flags, then PEDL_CHECKPOINT_STORE_* env vars, then defaults."""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pedl_checkpoint_store.errors import InvalidArgument
from pedl_checkpoint_store.orphan_sweep import DEFAULT_GRACE_SECONDS, DEFAULT_INTERVAL_SECONDS
from pedl_checkpoint_store.s3_allow import AWS, S3Allowance
from pedl_checkpoint_store.s3_settings import S3Settings
from pedl_checkpoint_store.storage_roots import parse_roots

ENV_PREFIX = "PEDL_CHECKPOINT_STORE_"
LOG_LEVELS = ("debug", "info", "warning", "error")
STORAGE_KINDS = ("local", "s3")
_S3_FIELDS = ("s3_bucket", "s3_endpoint_url", "s3_prefix", "s3_access_key", "s3_secret_key")
_AUTH_FIELDS = ("master", "cluster_secret_file", "tls_cert", "tls_key", "tls_ca")
_SWEEP_FIELDS = ("orphan_sweep_grace", "orphan_sweep_interval")


@dataclass(frozen=True)
class Config:
    host: str = "127.0.0.1"
    port: int = 8090
    storage_path: Path = Path("~/.pedl/checkpoints")
    port_file: Path | None = None
    log_level: str = "info"
    storage: str = "local"
    # Default backend when storage == "s3"; the storage_path is then unused. Without keys, boto3's
    # credential chain applies (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, profile, instance role).
    s3: dict[str, str] | None = field(default=None, repr=False)  # holds the secret key
    # Authentication (pedl_checkpoint_store.security) and TLS.
    master: str = ""
    cluster_secret_file: str = ""
    no_auth: bool = False
    tls_cert: str = ""
    tls_key: str = ""
    tls_ca: str = ""
    # Where shared_fs checkpoint storage may point (--allowed-storage-root); empty: storage_path only.
    allowed_storage_roots: tuple[Path, ...] = ()
    # Which S3 buckets and endpoints experiments may name (--allowed-s3-bucket/-endpoint); None:
    # the default backend's own (none for a local store).
    allowed_s3: S3Allowance | None = None
    # The orphan sweep (pedl_checkpoint_store.sweeper): unclaimed checkpoint bytes older than the grace
    # are removed at start-up and then every interval; an interval of 0 turns the sweep off.
    orphan_sweep_grace: float = DEFAULT_GRACE_SECONDS
    orphan_sweep_interval: float = DEFAULT_INTERVAL_SECONDS

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
    p.add_argument("--storage", help="default backend: 'local' (--storage-path, the default) or 's3'")
    p.add_argument("--s3-bucket", help="bucket for --storage s3")
    p.add_argument("--s3-endpoint-url", help="S3-compatible endpoint, e.g. http://minio:9000 (default AWS)")
    p.add_argument("--s3-prefix", help="key prefix inside the bucket (default none)")
    p.add_argument("--s3-access-key", help="default: boto3's chain (AWS_ACCESS_KEY_ID, profile, role)")
    p.add_argument("--s3-secret-key", help="prefer the env var AWS_SECRET_ACCESS_KEY: flags show in ps")
    p.add_argument("--master", help="scheduler HOST:PORT that validates users' tokens (or env PEDL_MASTER)")
    p.add_argument("--cluster-secret-file", help="the cluster's shared secret (or env PEDL_CLUSTER_SECRET)")
    p.add_argument("--no-auth", action="store_true", help="development only: accept every call")
    p.add_argument("--tls-cert", help="serve TLS with this certificate PEM (with --tls-key)")
    p.add_argument("--tls-key", help="private key PEM of --tls-cert")
    p.add_argument("--tls-ca", help="CA bundle to verify the scheduler with (or env PEDL_TLS_CA)")
    p.add_argument(
        "--orphan-sweep-grace",
        metavar="SECONDS",
        help="checkpoint bytes in storage that no record or upload in progress claims are removed once "
        "nothing was written under them for this long, and a direct upload nothing was written for this "
        "long is aborted; keep it above the longest upload (presigned URLs last 3600 s) (default 7200)",
    )
    p.add_argument(
        "--orphan-sweep-interval",
        metavar="SECONDS",
        help="how often the orphan sweep runs, besides once at start-up; 0 turns it off (default 600)",
    )
    p.add_argument(
        "--allowed-storage-root",
        action="append",
        default=[],
        metavar="DIR",
        help="a directory under which experiments' shared_fs checkpoint_storage.host_path may lie "
        f"(symlinks followed); repeatable, or env {ENV_PREFIX}ALLOWED_STORAGE_ROOT joined by "
        f"'{os.pathsep}' (default: --storage-path only)",
    )
    p.add_argument(
        "--allowed-s3-bucket",
        action="append",
        default=[],
        metavar="BUCKET",
        help="an S3 bucket experiments' checkpoint_storage may name; repeatable, or env "
        f"{ENV_PREFIX}ALLOWED_S3_BUCKET joined by ',' (default: --s3-bucket when --storage s3, else none)",
    )
    p.add_argument(
        "--allowed-s3-endpoint",
        action="append",
        default=[],
        metavar="URL",
        help=f"an S3 endpoint_url experiments may name ('{AWS}': AWS's own); repeatable, or env "
        f"{ENV_PREFIX}ALLOWED_S3_ENDPOINT joined by ',' (default: --s3-endpoint-url, else '{AWS}')",
    )
    return p


def _listed(values: Sequence[str], env_value: str) -> list[str]:
    return [v for v in values if v] or [v for v in env_value.split(",") if v.strip()]


def parse_config(argv: Sequence[str] | None = None, env: Mapping[str, str] | None = None) -> Config:
    """Raises ConfigError naming the flag or env var whose value is bad."""
    args = vars(_parser().parse_args(argv))
    env = os.environ if env is None else env
    values: dict[str, tuple[str, str]] = {}  # field -> (value, where it came from)
    for name in (
        "host",
        "port",
        "storage_path",
        "port_file",
        "log_level",
        "storage",
        *_S3_FIELDS,
        *_AUTH_FIELDS,
        *_SWEEP_FIELDS,
    ):
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
    storage, s3 = _storage(values)
    grace = (
        _seconds(values["orphan_sweep_grace"]) if "orphan_sweep_grace" in values else DEFAULT_GRACE_SECONDS
    )
    interval = (
        _seconds(values["orphan_sweep_interval"])
        if "orphan_sweep_interval" in values
        else DEFAULT_INTERVAL_SECONDS
    )
    roots = parse_roots(args["allowed_storage_root"], env.get(ENV_PREFIX + "ALLOWED_STORAGE_ROOT", ""))
    return Config(
        host=host,
        port=port,
        storage_path=storage_path,
        port_file=port_file,
        log_level=log_level,
        storage=storage,
        s3=s3,
        no_auth=bool(args["no_auth"]),
        allowed_storage_roots=tuple(Path(r).expanduser() for r in roots),
        allowed_s3=_allowed_s3(args, env, s3),
        orphan_sweep_grace=grace,
        orphan_sweep_interval=interval,
        **{name: values[name][0] for name in _AUTH_FIELDS if name in values},
    )


def _seconds(given: tuple[str, str]) -> float:
    raw, source = given
    try:
        seconds = float(raw)
    except ValueError:
        raise ConfigError(f"{source}: {raw!r} is not a number of seconds") from None
    if not 0 <= seconds < float("inf"):
        raise ConfigError(f"{source}: {raw!r} must be a number of seconds >= 0")
    return seconds


def _allowed_s3(args: dict, env: Mapping[str, str], s3: dict[str, str] | None) -> S3Allowance | None:
    buckets = _listed(args["allowed_s3_bucket"], env.get(ENV_PREFIX + "ALLOWED_S3_BUCKET", ""))
    endpoints = _listed(args["allowed_s3_endpoint"], env.get(ENV_PREFIX + "ALLOWED_S3_ENDPOINT", ""))
    if not buckets and not endpoints:
        return None
    own = S3Allowance.from_store(s3)
    return S3Allowance.of(buckets or own.buckets, endpoints or (own.endpoints if s3 else [AWS]))


def _storage(values: dict[str, tuple[str, str]]) -> tuple[str, dict[str, str] | None]:
    storage, source = values.get("storage", ("local", ""))
    if storage not in STORAGE_KINDS:
        raise ConfigError(f"{source}: {storage!r} is not one of {', '.join(STORAGE_KINDS)}")
    given = {name: values[name] for name in _S3_FIELDS if name in values}
    if storage != "s3":
        if given:
            raise ConfigError(f"{next(iter(given.values()))[1]} needs --storage s3")
        return storage, None
    if "s3_bucket" not in given:
        raise ConfigError("--storage s3 needs --s3-bucket")
    s3 = {"type": "s3", **{name.removeprefix("s3_"): value for name, (value, _) in given.items()}}
    try:
        S3Settings.from_config(s3)
    except InvalidArgument as e:
        message = str(e)
        for name in _S3_FIELDS:
            message = message.replace(
                f"checkpoint_storage.{name.removeprefix('s3_')}",
                values.get(name, ("", "--" + name.replace("_", "-")))[1],
            )
        raise ConfigError(message) from None
    return storage, s3
