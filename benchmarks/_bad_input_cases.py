"""The catalogue `benchmarks/bad_inputs.py` sends to `pedl experiment create`: configs Determined's own
schema tests say must fail, model definitions that cannot train, and archives no scheduler should
unpack. Each case is data only; the benchmark sends it and sorts the answer.

Determined's cases are test inputs read from shared/upstream beside the checkout (or $PEDL_UPSTREAM):
each invalid case (`sanity_errors` or `completeness_errors`) names the schema it fails, often a part
of the experiment config (a checkpoint storage, a length); the part is set in an otherwise good
config where an experiment holds it.
"""

from __future__ import annotations

import copy
import dataclasses
import gzip
import io
import os
import tarfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

_CASES_IN = "determined/0.38.1/schemas/test_cases/v0"


def schema_cases_dir() -> Path | None:
    """Determined's schema test cases: under $PEDL_UPSTREAM, else the `shared/upstream` folder beside
    the checkout, else /work/shared/upstream; None when none holds them."""
    repo = Path(__file__).resolve().parents[1]
    for root in (
        os.environ.get("PEDL_UPSTREAM"),
        repo.parent / "shared" / "upstream",
        "/work/shared/upstream",
    ):
        if root and (Path(root) / _CASES_IN).is_dir():
            return Path(root) / _CASES_IN
    return None


BASE: dict[str, Any] = {
    "hyperparameters": {"learning_rate": 0.1},
    "searcher": {"name": "single", "metric": "error", "max_length": {"batches": 10}},
    "batches_per_step": 5,
    "max_restarts": 1,
}


@dataclass(frozen=True)
class Case:
    kind: str  # "config", "model definition" or "archive"
    what: str
    config: dict[str, Any] = field(default_factory=lambda: copy.deepcopy(BASE))
    # The model definition as a directory for the CLI: (relative path, text); None for the tiny model.
    files: dict[str, str] | None = None
    # A crafted archive sent as the model definition (what the CLI uploads), instead of a directory.
    archive: bytes | None = None
    # Changes the written directory after `files` (a symlink, a sparse file).
    prepare: Callable[[Path], None] | None = None
    # Whether pedl can and must refuse it at create; a model definition's errors may show only when
    # it runs (its entrypoint's class is found by importing it).
    must_refuse: bool = True


def _place(schema: str, part: Any) -> dict[str, Any] | None:
    """A config holding `part` where an experiment config holds what `schema` describes; None
    when the schema is not a part an experiment config holds as such."""
    config = copy.deepcopy(BASE)
    if schema == "experiment.json":
        return {**config, **part}
    if schema in ("checkpoint-storage.json", "shared-fs.json", "azure.json"):
        config["checkpoint_storage"] = part
    elif schema in ("length.json", "check-positive-length.json"):
        config["searcher"]["max_length"] = part
    elif schema in ("hyperparameter.json", "hyperparameter-int.json"):
        config["hyperparameters"]["h"] = part
    elif schema == "check-grid-hyperparameter.json":
        config["hyperparameters"] = part
        config["searcher"]["name"] = "grid"
    elif schema == "bind-mount.json":
        config["bind_mounts"] = [part]
    elif schema == "log-action.json":
        config["log_policies"] = [{"pattern": "x", "action": part}]
    elif schema == "log-policy.json":
        config["log_policies"] = [part]
    elif schema in ("environment.json", "resources.json", "profiling.json", "security.json"):
        config[schema.removesuffix(".json")] = part
    else:
        return None
    return config


def determined_config_cases() -> list[Case]:
    """Every case Determined's schema tests expect to fail, placed in a config; [] when the test
    cases are not on this machine."""
    cases: list[Case] = []
    folder = schema_cases_dir()
    for path in sorted(folder.glob("*.yaml")) if folder else []:
        for case in yaml.safe_load(path.read_text()) or []:
            errors = case.get("sanity_errors") or case.get("completeness_errors")
            if not errors:
                continue
            placed = (_place(url.rsplit("/", 1)[-1], case["case"]) for url in errors)
            config = next((c for c in placed if c is not None), None)
            if config is not None:
                cases.append(Case("config", f"{case['name']} ({path.name})", config))
    return cases


TRIAL_RAISES = """
class TinyTrial(TinyTrial):  # noqa: F811
    def __init__(self, *args, **kwargs):
        raise RuntimeError("this trial refuses to start")
"""


def model_cases(tiny: str) -> list[Case]:
    """Model definitions that cannot train; `tiny` is a good one's __init__.py to spoil."""

    def entry(name: str) -> dict[str, Any]:
        return {**copy.deepcopy(BASE), "entrypoint": name}

    cases = [
        Case("model definition", "a syntax error", files={"__init__.py": "class TinyTrial(:\n"}),
        Case(
            "model definition",
            "an import of a module that does not exist",
            files={"__init__.py": "import pedl_no_such_module  # noqa\n" + tiny},
        ),
        Case(
            "model definition", "an entrypoint naming no class", entry(":NoSuchTrial"), {"__init__.py": tiny}
        ),
        Case(
            "model definition",
            "an entrypoint naming a function",
            entry(":make_data_loaders"),
            {"__init__.py": tiny},
        ),
        Case(
            "model definition",
            "an entrypoint module that is missing",
            entry("nowhere:TinyTrial"),
            {"__init__.py": tiny},
        ),
        Case(
            "model definition",
            "a Trial whose __init__ raises",
            entry(":TinyTrial"),
            {"__init__.py": tiny + TRIAL_RAISES},
        ),
        Case("model definition", "an empty directory", files={}),
    ]
    # An entrypoint naming nothing its module defines, or a function, is refused by the CLI's static
    # check; the others show only when the agent imports the model definition.
    refused = {"an entrypoint naming no class", "an entrypoint naming a function"}
    return [dataclasses.replace(c, must_refuse=c.what in refused) for c in cases]


def _tar(*members: tuple[tarfile.TarInfo, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", format=tarfile.GNU_FORMAT) as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if data else None)
    return buf.getvalue()


def _file(name: str, data: bytes = b"x = 1\n") -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    return info, data


def _link(name: str, target: str, kind: bytes = tarfile.SYMTYPE) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, target
    return info, b""


def _sparse(size: int) -> Callable[[Path], None]:
    def prepare(directory: Path) -> None:
        with open(directory / "weights.bin", "wb") as f:
            f.truncate(size)

    return prepare


def _symlink_out(directory: Path) -> None:
    (directory / "secrets").symlink_to("/etc")


def archive_cases(tiny: str) -> list[Case]:
    """Archives crafted as the model definition, and directories the CLI must pack."""
    init = _file("__init__.py", tiny.encode())
    return [
        Case(
            "archive",
            "a 100 MiB (sparse) file in the directory",
            files={"__init__.py": tiny},
            prepare=_sparse(100 << 20),
        ),
        Case(
            "archive",
            "a symlink to /etc in the directory (packed without it)",
            files={"__init__.py": tiny},
            prepare=_symlink_out,
            must_refuse=False,
        ),
        Case("archive", "a symlink entry to /etc/passwd", archive=_tar(init, _link("passwd", "/etc/passwd"))),
        Case("archive", "a symlink entry to ../../..", archive=_tar(init, _link("up", "../../.."))),
        Case(
            "archive",
            "a hard link entry to /etc/shadow",
            archive=_tar(init, _link("h", "/etc/shadow", tarfile.LNKTYPE)),
        ),
        Case("archive", "an absolute path entry", archive=_tar(init, _file("/tmp/pedl-bad-input-abs.py"))),
        Case("archive", "a ../ path entry", archive=_tar(init, _file("../../escape.py"))),
        Case("archive", "a declared 10 GiB entry", archive=_declared_huge(init)),
        Case("archive", "bytes that are not an archive", archive=b"this is not a tar.gz"),
    ]


def _declared_huge(init: tuple[tarfile.TarInfo, bytes]) -> bytes:
    """A gzip'd tar whose second header declares 10 GiB and whose data stops short."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tar:
        tar.addfile(init[0], io.BytesIO(init[1]))
    head = tarfile.TarInfo("huge.bin")
    head.size = 10 << 30
    raw = buf.getvalue().rstrip(b"\0") + b"\0" * (-len(buf.getvalue().rstrip(b"\0")) % 512)
    return gzip.compress(raw + head.tobuf(tarfile.GNU_FORMAT) + b"\0" * 4096)
