"""Grouping a page of trials' result rows by trial, for the batch listing of trial details."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any


def group(trial_ids: Iterable[int], **kinds: Iterable[Mapping[str, Any]]) -> dict[int, dict[str, list[Any]]]:
    """{trial_id: {kind: [rows in the order given]}} with an empty list for every kind a trial lacks."""
    grouped: dict[int, dict[str, list[Any]]] = {tid: {kind: [] for kind in kinds} for tid in trial_ids}
    for kind, rows in kinds.items():
        for row in rows:
            grouped[row["trial_id"]][kind].append(row)
    return grouped
