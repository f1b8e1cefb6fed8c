"""Every experiment config Determined shipped (examples/, harness/tests, e2e_tests fixtures) in the last
release of each minor version from 0.12 to 0.38, vendored unchanged (determined_files/README.md), run by pedl.

Each is accepted, or refused in one line (file, line, field) naming a field pedl does not offer ("not
supported by pedl"), or is one that Determined itself refuses (DETERMINED_REFUSES, with where it says
so). An accepted one is accepted again as pedl stored it, and again as `det experiment config` prints it:
every field it leaves unset written out as null (the fields Determined's own "minimal valid experiment"
export lists).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from pedl.config import ConfigError, parse_experiment_config
from pedl.config.yaml12 import Yaml12Loader

HERE = Path(__file__).parent / "determined_files"
ROWS = [
    line.split("\t")
    for line in (HERE / "example_configs" / "SOURCES.tsv").read_text().splitlines()
    if not line.startswith("#")
]
# Source path (or path@release, for one release's version) -> (the field pedl names, where Determined
# refuses the config too).
DETERMINED_REFUSES = {
    # `host_path:` left empty for the user to fill in; Determined's bind-mount.json requires a string.
    "examples/computer_vision/efficientdet_pytorch/const.yaml": (
        "bind_mounts[0].host_path",
        "bind-mount.json",
    ),
    # 0.38's fixtures of failures dropped the trial length of a Trial class; Determined 0.38's
    # Trainer.fit raises "`fit(max_length=X)` must be set" when searcher.max_length is absent too.
    **{
        f"e2e_tests/tests/fixtures/failures/{name}.yaml@v0.38.1": (
            "searcher.max_length",
            "pytorch/_trainer.py",
        )
        for name in (
            "bad-image",
            "bad-pbs-option",
            "bad-slurm-option",
            "docker-login-failure",
            "slurm-requested-node-not-available",
            "unsupported-slurm-option",
        )
    },
}


def _printed_nulls() -> dict[str, Any]:
    """The fields Determined's export of a minimal experiment prints as null, section by section."""
    cases = yaml.safe_load((HERE / "schema_test_cases_v0" / "experiment.yaml").read_text())
    printed = next(c for c in cases if c["name"] == "minimal valid experiment")["defaulted"]
    out: dict[str, Any] = {}
    for key, value in printed.items():
        if value is None:
            out[key] = None
        elif isinstance(value, dict):
            nulls = {k: None for k, v in value.items() if v is None}
            if nulls:
                out[key] = nulls
    return out


PRINTED_NULLS = _printed_nulls()


def _as_printed(config: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(config)
    for key, nulls in PRINTED_NULLS.items():
        if nulls is None:
            out.setdefault(key, None)
        elif isinstance(out.get(key), dict):
            for inner in nulls:
                out[key].setdefault(inner, None)
    return out


@pytest.mark.parametrize("row", ROWS, ids=[f"{r[2]}:{r[1]}" for r in ROWS])
def test_shipped_config(row: list[str]) -> None:
    name, source = row[0], row[1]
    refused_by_determined = DETERMINED_REFUSES.get(source) or DETERMINED_REFUSES.get(f"{source}@{row[2]}")
    text = (HERE / "example_configs" / name).read_text()
    try:
        parsed = parse_experiment_config(text, filename=source)
    except ConfigError as e:
        assert e.path and e.line and "\n" not in str(e), str(e)
        if refused_by_determined is not None:
            assert e.path == refused_by_determined[0], str(e)
        else:
            assert "not supported by pedl" in e.message, str(e)
        return
    assert refused_by_determined is None, "accepted a config Determined refuses"
    spec = parsed.entrypoint_spec
    if spec is not None and spec.kind == "command":
        # pedl's agent is the launcher: of Determined's launch layers only those that run the command
        # as it is may stay in one, and a Trial class under `--trial` is run as that Trial class.
        launchers = {a for a in spec.command if a.startswith("determined.launch.")}
        assert launchers <= {"determined.launch.torch_distributed", "determined.launch.wrap_rank"}, spec
        assert "--trial" not in spec.command, spec
    assert parse_experiment_config(parsed.raw).raw == parsed.raw
    written = yaml.load(text, Loader=Yaml12Loader)
    assert parse_experiment_config(_as_printed(written)).raw == parsed.raw


def test_the_vendored_set_is_whole() -> None:
    assert len(ROWS) >= 700
    assert {r[0] for r in ROWS} == {p.name for p in (HERE / "example_configs").glob("*.yaml")}
    assert PRINTED_NULLS["searcher"] == {"source_checkpoint_uuid": None, "source_trial_id": None}
