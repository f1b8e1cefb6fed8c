"""Bounded points per curve: min/max buckets (the scheduler's `GetMetrics` with `max_points`).

With 1,000 trials x 100 validations an experiment's history is 100,000 rows; drawing a trial's curve
needs far fewer points than it has rows. Each curve keeps its first and last row and, in each of a
bounded number of buckets, the rows holding each metric's minimum and maximum, so every peak, dip,
start and end the user sees in the full curve is still drawn (the curve's global min and max too).
Pure: the scheduler runs it on the rows it reads, before they go out.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

# Points kept per curve by default: a 1,400-px-wide chart has no room for more per trial.
MAX_POINTS = 200
_INF = math.inf


def _objects(metrics_json: Sequence[str]) -> list[dict[str, Any]]:
    """The rows as dicts ({} for one that is not an object): one parse of them all as a JSON array,
    a C call rather than one per row (the scheduler cuts 100,000 rows for a page of 1,000 trials)."""
    try:
        parsed = json.loads("[" + ",".join(metrics_json) + "]")
    except ValueError:
        parsed = None
    if not isinstance(parsed, list) or len(parsed) != len(metrics_json):
        parsed = [_object(text) for text in metrics_json]
    return [row if isinstance(row, dict) else {} for row in parsed]


def _object(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return {}


def _values(rows: list[dict[str, Any]], name: str) -> list[float | None]:
    """Each row's finite number for `name`, else None (booleans, strings, NaN and infinities)."""
    return [
        v if (type(v) is float or type(v) is int) and -_INF < v < _INF else None
        for v in (r.get(name) for r in rows)
    ]


def keep(metrics_json: Sequence[str], max_points: int = MAX_POINTS) -> list[int]:
    """Indices of at most `max_points` (>= 2) rows to send, in order: all of them when there are no
    more; else the first, the last and each metric's min and max row of each bucket between them
    (metrics by name, as many as fit two rows each in the bound; with none, evenly spaced rows)."""
    n = len(metrics_json)
    max_points = max(max_points, 2)
    if n <= max_points:
        return list(range(n))
    rows = _objects(metrics_json)
    columns = {name: _values(rows, name) for name in sorted({name for row in rows for name in row})}
    columns = {name: values for name, values in columns.items() if any(v is not None for v in values)}
    names = list(columns)[: (max_points - 2) // 2]
    inner = n - 2
    chosen = {0, n - 1}
    if not names:
        spare = max_points - 2
        chosen.update(1 + k * inner // spare for k in range(spare))
        return sorted(chosen)
    buckets = max(1, (max_points - 2) // (2 * len(names)))
    for b in range(buckets):
        lo, hi = 1 + b * inner // buckets, 1 + (b + 1) * inner // buckets
        for name in names:
            values = columns[name]
            present = [(v, i) for i in range(lo, hi) if (v := values[i]) is not None]
            if present:
                chosen.add(min(present)[1])
                chosen.add(max(present)[1])
    return sorted(chosen)
