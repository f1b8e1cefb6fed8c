"""Every case of Determined's schema test cases (vendored unchanged, determined_files/README.md), run by pedl.

Each case is a fragment that Determined's schema `X.json` calls sane (`sane_as`, `complete_as`) or
invalid (`sanity_errors`, `completeness_errors`), or whose defaults it fills (`default_as`). The fragment
is put where `X.json` sits in an experiment config (PLACES) and parsed by pedl, which must agree:

- invalid: pedl refuses it, naming a field of that section;
- valid: pedl accepts it, or refuses it naming a field of that section as one pedl does not offer
  ("not supported by pedl"); a fragment only `sane_as` (not complete) may also lack a field pedl
  requires before it can run ("is required");
- defaults: what pedl fills in agrees with Determined's default wherever pedl keeps the field.

Cases for Determined's own test schemas (`test-*.json`) and template merging (`merge_as`: pedl has no
templates; `pedl template` is refused) have no place in an experiment config and are skipped by name.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from pedl.config import ConfigError, parse_experiment_config

HERE = Path(__file__).parent / "determined_files" / "schema_test_cases_v0"
BASE: dict[str, Any] = {"searcher": {"name": "single", "metric": "loss", "max_length": {"batches": 10}}}
# Determined's schema does not depend on the entrypoint, pedl's rules can (a Core API script decides its
# own length; the adaptive searchers need a Trial class): a fragment is tried with each kind.
ENTRYPOINTS = ("model_def:MyTrial", "python3 train.py")
# Defaults pedl deliberately does not fill, with why (the test still checks every other default).
NOT_FILLED = {
    # pedl neither labels log lines nor acts on them, so it adds none of Determined's labelling policies.
    "log_policies": "pedl does not label log lines",
}
# Determined's schema file -> where its value sits in an experiment config.
PLACES = {
    "experiment": "",
    "searcher": "searcher",
    "check-grid-hyperparameter": "hyperparameters",
    "hyperparameter": "hyperparameters.h",
    "length": "min_validation_period",
    "check-positive-length": "searcher.max_length",
    "checkpoint-storage": "checkpoint_storage",
    "s3": "checkpoint_storage",
    "gcs": "checkpoint_storage",
    "azure": "checkpoint_storage",
    "shared-fs": "checkpoint_storage",
    "directory": "checkpoint_storage",
    "environment": "environment",
    "environment-image": "environment.image",
    "environment-variables": "environment.environment_variables",
    "resources": "resources",
    "profiling": "profiling",
    "bind-mount": "bind_mounts.0",
    "log-policies": "log_policies",
    "log-policy": "log_policies.0",
    "log-action": "log_policies.0.action",
    "log-legacy-action-cancel-retries": "log_policies.0.action",
    "log-legacy-action-exclude-node": "log_policies.0.action",
    "security": "security",
}


def _place_of(url: str) -> str | None:
    name = url.rsplit("/", 1)[1].removesuffix(".json")
    if name.startswith("test-"):
        return None
    for prefix in ("searcher-", "hyperparameter-"):
        if name.startswith(prefix):
            name = prefix[:-1]
    return PLACES[name]


def _checks() -> list[tuple[str, str, str, Any, dict[str, Any]]]:
    """(id, verdict, place, fragment, case) for every (case, schema) pair that has a place."""
    out = []
    for path in sorted(HERE.glob("*.yaml")):
        for case in yaml.safe_load(path.read_text()):
            verdicts: list[tuple[str, str]] = []
            verdicts += [(u, "sane") for u in case.get("sane_as") or ()]
            verdicts += [(u, "complete") for u in case.get("complete_as") or ()]
            verdicts += [(u, "invalid") for u in case.get("sanity_errors") or {}]
            verdicts += [(u, "invalid") for u in case.get("completeness_errors") or {}]
            if case.get("default_as"):
                verdicts.append((case["default_as"], "defaults"))
            for url, verdict in verdicts:
                place = _place_of(url)
                if place is None:
                    continue
                schema = url.rsplit("/", 1)[1]
                ident = f"{path.stem}: {case['name']} [{schema} {verdict}]"
                out.append((ident, verdict, place, case["case"], case))
    return out


CHECKS = _checks()


def _config(place: str, fragment: Any) -> dict[str, Any]:
    if not place:
        return copy.deepcopy(fragment)
    config: Any = copy.deepcopy(BASE)
    parts = place.split(".")
    if parts[0] == "searcher" and len(parts) == 1:
        config.pop("searcher")
    if parts[0] == "hyperparameters" and len(parts) == 1:
        config["searcher"] = {"name": "grid", "metric": "loss", "max_length": {"batches": 10}}
    node = config
    for part, after in zip(parts[:-1], parts[1:], strict=True):
        key: Any = int(part) if part.isdigit() else part
        if isinstance(node, list):
            while len(node) <= key:
                node.append([] if after.isdigit() else {})
        elif key not in node:
            node[key] = [] if after.isdigit() else {}
        node = node[key]
    last: Any = int(parts[-1]) if parts[-1].isdigit() else parts[-1]
    if isinstance(node, list):
        node.append(copy.deepcopy(fragment))
    else:
        node[last] = copy.deepcopy(fragment)
    if parts[0] == "log_policies" and len(parts) > 2:  # an action needs its policy's name
        config["log_policies"][0].setdefault("name", "policy")
    return config


def _section(place: str) -> str:
    """The dotted field an error must name: the section the fragment is in (bind_mounts[0] style)."""
    return re.sub(r"\.(\d+)", r"[\1]", place)


def _names_field_of(error: ConfigError, place: str) -> bool:
    section = _section(place)
    if not section:
        return bool(error.path)
    root = section.split("[")[0].split(".")[0]
    return error.path.startswith(root)


def _get(node: Any, place: str) -> Any:
    for part in place.split(".") if place else ():
        node = node[int(part)] if part.isdigit() else node[part]
    return node


def _agree_on_defaults(filled: Any, expected: Any, where: str) -> int:
    """Compares what pedl kept with Determined's defaults ('*': any value); returns the leaves compared."""
    if expected == "*" or where in NOT_FILLED:
        return 0
    if isinstance(expected, dict) and isinstance(filled, dict):
        pairs = [(filled[k], v, f"{where}.{k}") for k, v in expected.items() if k in filled]
        return sum(_agree_on_defaults(*pair) for pair in pairs)
    assert filled == expected, f"{where}: pedl fills {filled!r}, Determined {expected!r}"
    return 1


def _parse_with_each_entrypoint(config: dict[str, Any]) -> list[Any]:
    """pedl's verdict with each kind of entrypoint: the parsed config, or the ConfigError."""
    out: list[Any] = []
    for entrypoint in ENTRYPOINTS:
        attempt = copy.deepcopy(config)
        if isinstance(attempt, dict):
            attempt.setdefault("entrypoint", entrypoint)
        try:
            out.append(parse_experiment_config(attempt))
        except ConfigError as e:
            out.append(e)
    return out


@pytest.mark.parametrize(
    ("verdict", "place", "fragment", "case"), [c[1:] for c in CHECKS], ids=[c[0] for c in CHECKS]
)
def test_determined_schema_case(verdict: str, place: str, fragment: Any, case: dict[str, Any]) -> None:
    results = _parse_with_each_entrypoint(_config(place, fragment))
    if verdict == "invalid":
        for result in results:
            assert isinstance(result, ConfigError), f"accepted: {result.raw}"
            assert _names_field_of(result, place), str(result)
            assert "\n" not in str(result)
        return
    accepted = [r for r in results if not isinstance(r, ConfigError)]
    if not accepted:
        # Refused naming a field of the section as one pedl does not offer; or, for a fragment Determined
        # calls sane but not complete, lacking a field pedl needs to run it.
        incomplete_ok = "complete_as" not in case
        for e in results:
            refused = "not supported by pedl" in e.message
            incomplete = incomplete_ok and "is required" in e.message
            assert (refused or incomplete) and _names_field_of(e, place), str(e)
        return
    for parsed in accepted:
        if verdict == "defaults":
            _agree_on_defaults(_get(parsed.raw, place), case["defaulted"], _section(place) or "config")
        # What pedl accepted it accepts again as it stored it (describe / `det experiment config`).
        assert parse_experiment_config(parsed.raw).raw == parsed.raw


def test_every_case_file_is_run() -> None:
    files = {c[0].split(":")[0] for c in CHECKS}
    # test-structs (Determined's own test schemas) and merging (templates) alone have nothing placed.
    assert files == {p.stem for p in HERE.glob("*.yaml")} - {"test-structs", "merging"}
    assert len(CHECKS) >= 150


def test_a_config_as_det_experiment_config_prints_it_is_accepted() -> None:
    """`det experiment config` prints every field, unset ones as null: Determined's own "minimal valid
    experiment" defaults are that print. With a trial length and its '*' placeholders filled it loads,
    warning only about what has no meaning here, and loads again as pedl stored it."""
    cases = yaml.safe_load((HERE / "experiment.yaml").read_text())
    printed = copy.deepcopy(next(c for c in cases if c["name"] == "minimal valid experiment")["defaulted"])
    printed["searcher"]["max_length"] = {"batches": 10}
    printed["name"] = "exported"
    printed["environment"]["image"] = {
        kind: "determinedai/pytorch-ngc:0.38.0" for kind in ("cpu", "cuda", "rocm")
    }
    printed["reproducibility"]["experiment_seed"] = 42
    defaults = yaml.safe_load((HERE / "log_policies.yaml").read_text())
    printed["log_policies"] = next(c for c in defaults if c["name"] == "default values")["defaulted"]
    parsed = parse_experiment_config(printed)
    assert sorted(w.split(":")[0] for w in parsed.warnings) == ["environment.image", "log_policies"]
    assert parsed.searcher_name == "single" and parsed.max_length_batches == 10
    assert parse_experiment_config(parsed.raw).raw == parsed.raw


def _schema_verdict(config: Any) -> list[str]:
    """pedl's JSON Schema alone (pedl.config.schema) on the config as the parser hands it over: explicit
    nulls mean "unset" there, so they are dropped first, as the parser does."""
    from pedl.config.policy import drop_nulls
    from pedl.config.schema_errors import schema_errors

    data = drop_nulls(config) if isinstance(config, dict) else config
    return [str(e) for e in schema_errors(data)]


def test_determined_cases_against_pedls_json_schema(capsys: pytest.CaptureFixture[str]) -> None:
    """Every case run against pedl's own JSON Schema with `jsonschema`. The schema must accept what
    Determined calls valid unless pedl refuses that field (the parser says so, naming it), and refuse what
    Determined calls invalid unless the rule is one a JSON Schema cannot state (a < b, a grid's counts),
    which pedl's parser then enforces. The count of cases the schema itself decides is printed and held."""
    by_schema = by_rules = 0
    for ident, verdict, place, fragment, _case in CHECKS:
        config = _config(place, fragment)
        if isinstance(config, dict):
            config.setdefault("entrypoint", ENTRYPOINTS[0])
        errors = _schema_verdict(config)
        if verdict == "invalid":
            if errors:
                by_schema += 1
                continue
            assert isinstance(_parse_with_each_entrypoint(config)[0], ConfigError), ident
            by_rules += 1
            continue
        if not errors:
            by_schema += 1
            continue
        parsed = _parse_with_each_entrypoint(config)[0]
        assert isinstance(parsed, ConfigError) and _names_field_of(parsed, place), f"{ident}: {errors[0]}"
        by_rules += 1
    with capsys.disabled():
        print(
            f"\nDetermined schema cases: {by_schema} of {len(CHECKS)} decided by pedl's JSON Schema alone, "
            f"{by_rules} by pedl's other rules"
        )
    assert by_schema + by_rules == len(CHECKS)
    assert by_schema >= SCHEMA_DECIDES_AT_LEAST


# Measured when the schema was written; a change that makes the schema decide fewer cases is a regression.
SCHEMA_DECIDES_AT_LEAST = 146
