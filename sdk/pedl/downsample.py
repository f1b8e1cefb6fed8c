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

# Points kept per curve by default: a 1,400-px-wide chart has no room for more per trial.
MAX_POINTS = 200


def _numbers(text: str) -> dict[str, float]:
    try:
        parsed = json.loads(text)
    except ValueError:
        return {}
    if not isinstance(parsed, dict):
        return {}
    return {
        k: float(v)
        for k, v in parsed.items()
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
    }


def keep(metrics_json: Sequence[str], max_points: int = MAX_POINTS) -> list[int]:
    """Indices of at most `max_points` (>= 2) rows to send, in order: all of them when there are no
    more; else the first, the last and each metric's min and max row of each bucket between them
    (metrics by name, as many as fit two rows each in the bound; with none, evenly spaced rows)."""
    n = len(metrics_json)
    max_points = max(max_points, 2)
    if n <= max_points:
        return list(range(n))
    rows = [_numbers(text) for text in metrics_json]
    names = sorted({name for row in rows for name in row})[: (max_points - 2) // 2]
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
            present = [i for i in range(lo, hi) if name in rows[i]]
            if present:
                chosen.add(min(present, key=lambda i: rows[i][name]))
                chosen.add(max(present, key=lambda i: rows[i][name]))
    return sorted(chosen)
