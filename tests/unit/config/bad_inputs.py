"""Bad inputs a user may send to `experiment create` (configs, model definitions), each with the one
line pedl answers before anything is created. README.md's table of them is generated from here
(`python tests/unit/config/bad_inputs.py`; `test_bad_inputs.py` checks it and runs every case)."""

from __future__ import annotations

import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from pedl.config import parse_experiment_config
from pedl.model_def.static_check import check_model_definition

REPO = Path(__file__).resolve().parents[3]
BEGIN = "<!-- bad-inputs-table: begin (tests/unit/config/bad_inputs.py) -->"
END = "<!-- bad-inputs-table: end -->"

GOOD_SEARCHER = "searcher: {name: single, metric: loss, max_length: {batches: 10}}\n"
GOOD_TRIAL = """
from determined import pytorch
class MyTrial(pytorch.PyTorchTrial):
    def __init__(self, context):
        self.context = context
"""
_BOMB = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, "
    f"*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}]\n"
    for i in range(8)
)


@dataclass(frozen=True)
class BadInput:
    what: str
    config: str
    files: dict[str, str] = field(default_factory=dict)  # a model definition, when the case needs one


CASES = [
    BadInput("a YAML alias bomb (700 bytes, 10^9 values expanded)", _BOMB + GOOD_SEARCHER),
    BadInput("YAML nested 10,000 levels deep", "a: " + "[" * 10000 + "]" * 10000 + "\n" + GOOD_SEARCHER),
    BadInput("a config that is not a mapping", "- just\n- a list\n"),
    BadInput("no searcher", "entrypoint: model_def:MyTrial\n"),
    BadInput("an unknown searcher", "searcher: {name: bayesian, metric: loss, max_length: {batches: 10}}\n"),
    BadInput("a searcher without its metric", "searcher: {name: single, max_length: {batches: 10}}\n"),
    BadInput(
        "max_trials below 1",
        "searcher: {name: random, metric: loss, max_trials: 0, max_length: {batches: 10}}\n",
    ),
    BadInput(
        "a hyperparameter range upside down",
        "hyperparameters: {lr: {type: double, minval: 1, maxval: 0}}\n" + GOOD_SEARCHER,
    ),
    BadInput("a misspelt field", "sercher: {name: single}\n" + GOOD_SEARCHER),
    BadInput(
        "an entrypoint whose module is missing",
        "entrypoint: no_such_module:MyTrial\n" + GOOD_SEARCHER,
        {"model_def.py": GOOD_TRIAL},
    ),
    BadInput(
        "an entrypoint naming a class its module does not define",
        "entrypoint: model_def:MyTriall\n" + GOOD_SEARCHER,
        {"model_def.py": GOOD_TRIAL},
    ),
    BadInput(
        "an entrypoint naming a function",
        "entrypoint: model_def:make_data_loaders\n" + GOOD_SEARCHER,
        {"model_def.py": GOOD_TRIAL + "def make_data_loaders(config, hparams):\n    return [], []\n"},
    ),
    BadInput(
        "a model definition with a syntax error",
        "entrypoint: model_def:MyTrial\n" + GOOD_SEARCHER,
        {"model_def.py": "class MyTrial(:\n"},
    ),
]


def answer(case: BadInput) -> str:
    """What `pedl experiment create` answers the case (its config parsed, then its model definition
    checked without running it, as the CLI does before uploading); "" when it accepts it."""
    try:
        parsed = parse_experiment_config(case.config)
        if case.files:
            with tempfile.TemporaryDirectory() as tmp:
                for name, text in case.files.items():
                    (Path(tmp) / name).write_text(text)
                try:
                    check_model_definition(Path(tmp), parsed.entrypoint, sorted(case.files))
                except Exception as e:  # noqa: BLE001 (every refusal is the answer)
                    return str(e).replace(tmp, "<context dir>")
    except Exception as e:  # noqa: BLE001
        return str(e)
    return ""


def table() -> str:
    rows = ["| bad input | `pedl experiment create` answers (one line, nothing created) |", "|---|---|"]
    for case in CASES:
        text = answer(case).replace("|", "\\|")
        rows.append(f"| {case.what} | {text[:300]}{'…' if len(text) > 300 else ''} |")
    return "\n".join(rows) + "\n"


if __name__ == "__main__":
    sys.path.insert(0, str(REPO / "scripts"))
    from readme_section import write_or_check

    section = f"{BEGIN}\n{table()}{END}"
    sys.exit(write_or_check(REPO / "README.md", BEGIN, END, section, "bad inputs table", sys.argv))
