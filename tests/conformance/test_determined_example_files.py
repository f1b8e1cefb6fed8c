"""Every experiment config Determined shipped (examples/, harness/tests, e2e_tests fixtures) in the last
release of each minor version from 0.12 to 0.38, vendored unchanged (determined_files/README.md), run by pedl.

Each is accepted, or refused in one line (file, line, field) naming a field pedl does not offer ("not
supported by pedl"), or is one that Determined itself refuses (DETERMINED_REFUSES, with where it says
so). An accepted one is accepted again as pedl stored it, and again as `det experiment config` prints it:
every field Determined knows written out, with Determined's defaults and unset fields as null (from
Determined's own "minimal valid experiment" test case), training the same way.
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


def _determined_export() -> dict[str, Any]:
    """What Determined's `det experiment config` adds to a config: its own "minimal valid experiment"
    defaults (every field, unset ones as null) and its default log policies; '*' marks a value
    Determined chooses (a name, a seed, an image), left out here."""
    cases = yaml.safe_load((HERE / "schema_test_cases_v0" / "experiment.yaml").read_text())
    printed = next(c for c in cases if c["name"] == "minimal valid experiment")["defaulted"]
    policies = yaml.safe_load((HERE / "schema_test_cases_v0" / "log_policies.yaml").read_text())
    printed = {
        **printed,
        "log_policies": next(c for c in policies if c["name"] == "default values")["defaulted"],
    }
    return {k: v for k, v in printed.items() if k != "entrypoint" and not _chosen(v)}


def _chosen(value: Any) -> bool:
    if isinstance(value, dict):
        return any(_chosen(v) for v in value.values())
    return value == "*"


EXPORT = _determined_export()
# Sections Determined fills field by field; the others (lengths, checkpoint storage, the searcher) are
# unions it keeps whole when the config sets them.
STRUCTS = ("environment", "resources", "optimizations", "profiling", "reproducibility")


def _as_printed(config: dict[str, Any]) -> dict[str, Any]:
    """`config` as `det experiment config` prints it: every field Determined knows, defaults filled."""
    out = copy.deepcopy(config)
    for key, value in EXPORT.items():
        if key == "scheduling_unit" and "batches_per_step" in out:
            continue  # the older name of the same field
        if key not in out:
            out[key] = copy.deepcopy(value)
        elif key in STRUCTS and isinstance(out[key], dict) and isinstance(value, dict):
            for inner, default in value.items():
                if not _chosen(default):
                    out[key].setdefault(inner, copy.deepcopy(default))
        elif key == "searcher" and isinstance(out[key], dict):
            for inner in ("smaller_is_better", "source_trial_id", "source_checkpoint_uuid"):
                out[key].setdefault(inner, value[inner])
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
        # deepspeed: det_ds.Trainer scripts; tensorflow: det.keras.DeterminedCallback scripts
        ran_as_is = {"torch_distributed", "wrap_rank", "deepspeed", "tensorflow"}
        assert launchers <= {f"determined.launch.{name}" for name in ran_as_is}, spec
        assert "--trial" not in spec.command, spec
    assert parse_experiment_config(parsed.raw).raw == parsed.raw
    # As `det experiment config` prints it: accepted, trained the same way, and stable once stored.
    printed = parse_experiment_config(_as_printed(yaml.load(text, Loader=Yaml12Loader)))
    for attr in ("max_length", "length_unit", "min_validation_period", "min_checkpoint_period", "budget"):
        assert getattr(printed, attr) == getattr(parsed, attr), attr
    assert printed.searcher_name == parsed.searcher_name and printed.entrypoint_spec == parsed.entrypoint_spec
    assert parse_experiment_config(printed.raw).raw == printed.raw


def test_the_vendored_set_is_whole() -> None:
    assert len(ROWS) >= 700
    assert {r[0] for r in ROWS} == {p.name for p in (HERE / "example_configs").glob("*.yaml")}
    assert EXPORT["searcher"]["source_trial_id"] is None and EXPORT["checkpoint_policy"] == "best"


def test_no_shipped_bind_mount_is_refused_but_those_determined_refuses() -> None:
    """Determined's configs mount data at another container_path (/data, /mnt/data...): pedl's
    sandbox mounts it there, so none is refused at parse (where a host path may come from is the
    cluster's --allowed-bind-root, checked at create)."""
    refused = []
    for name, source, release, *_ in ROWS:
        try:
            parse_experiment_config((HERE / "example_configs" / name).read_text(), filename=source)
        except ConfigError as e:
            if e.path.startswith("bind_mounts") and source not in DETERMINED_REFUSES:
                refused.append(f"{source}@{release}: {e}")
    assert refused == []
