"""The experiment page's trials as columns: the same values as the rows, in fewer bytes."""

from __future__ import annotations

import json
from typing import Any

from pedl_webui.trial_columns import columnar, with_columns


def rows(n: int) -> list[dict[str, Any]]:
    return [
        {
            "id": i + 1,
            "state": "COMPLETED",
            "total_batches": 100 * i,
            "best_validation_metric": None if i % 3 else 0.5 / (i + 1),
            "agent_id": None,
            "hparams": {"lr": 10 ** -(i % 4), "layers": i % 8, "optimizer.name": "adam"},
        }
        for i in range(n)
    ]


def back_to_rows(columns: dict[str, Any]) -> list[dict[str, Any]]:
    """What the page's trialRows (common.js) does."""
    out = []
    for i in range(columns["count"]):
        trial = {name: values[i] for name, values in columns["fields"].items()}
        trial["hparams"] = {name: values[i] for name, values in columns["hparams"].items()}
        out.append(trial)
    for name, missing in columns["absent"].items():
        for i in missing:
            del out[i]["hparams"][name]
    return out


def test_columns_hold_every_trials_values_and_come_back_as_the_same_rows() -> None:
    trials = rows(7)
    columns = columnar(trials)
    assert columns["count"] == 7 and columns["absent"] == {}
    assert columns["fields"]["id"] == [1, 2, 3, 4, 5, 6, 7]
    assert columns["hparams"]["layers"] == [0, 1, 2, 3, 4, 5, 6]
    assert back_to_rows(columns) == trials


def test_a_missing_hyperparameter_stays_apart_from_a_null_one() -> None:
    trials = rows(3)
    trials[0]["hparams"]["dropout"] = None  # set, to null
    trials[2]["hparams"]["dropout"] = 0.1  # trial 2 has none
    columns = columnar(trials)
    assert columns["hparams"]["dropout"] == [None, None, 0.1]
    assert columns["absent"] == {"dropout": [1]}
    assert back_to_rows(columns) == trials


def test_no_trials_is_an_empty_table() -> None:
    assert columnar([]) == {"count": 0, "fields": {}, "hparams": {}, "absent": {}}


def test_a_thousand_trials_take_well_under_the_rows_bytes() -> None:
    detail = {"id": 1, "trials": rows(1000), "hparam_names": ["layers", "lr", "optimizer.name"]}
    compact = with_columns(detail)
    assert "trials" not in compact and compact["hparam_names"] == detail["hparam_names"]
    assert len(json.dumps(compact)) < 0.6 * len(json.dumps(detail))
