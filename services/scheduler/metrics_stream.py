"""`GetMetrics`: a trial's or an experiment's steps and validations, stored rows first, then live.

The stored rows go in pages keyed by (trial, batches) on the tables' primary keys. Following, the
stream remembers the last batch count it sent of each trial and kind: a trial's new rows always lie
past it (steps and validations are stored once per batch count; a restarted trial training back to
where it was adds nothing), so each wake-up reads only the rows of trials that were still live, past
their own mark. Trial states are read before rows, so a trial seen ended gets one last read that
includes whatever its final transaction stored. With `max_points`, each trial's rows of a read are
regrouped whole across pages and cut to that bound (`pedl.downsample`) before they go out: a page of
1,000 curves gets what it can draw, not every row. The first read of such a stream takes each trial's
cut from `curve_cache` where the trial's rows are unchanged since it was made, else from the copy kept
in the database (`cut_curves`, so a scheduler start does not cut every trial again), and reads and
cuts only the other trials' rows.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass, field

from pedl import downsample
from pedl._metrics import BUILTIN_GROUPS, GROUP_NAME
from pedl.v1 import scheduler_pb2
from pedl_scheduler import curve_cache
from pedl_scheduler.storage.connection import Storage
from pedl_scheduler.storage.ops import cut_curves as cut_curve_ops
from pedl_scheduler.storage.ops import experiments as experiment_ops
from pedl_scheduler.storage.ops import results as result_ops
from pedl_scheduler.storage.ops.results import MetricRow

DEFAULT_PAGE, MAX_PAGE = 5000, 50_000
# Seconds between a follower's reads at most (a page redraws once a second anyway).
FOLLOW_INTERVAL = 0.5
# Trial ids per query: far under SQLite's bound-parameter limit.
ID_CHUNK = 500
KIND_NAMES = {
    scheduler_pb2.METRIC_KIND_TRAINING: ("training",),
    scheduler_pb2.METRIC_KIND_VALIDATION: ("validation",),
    scheduler_pb2.METRIC_KIND_UNSPECIFIED: ("training", "validation"),
}
_KIND_ENUM = {
    "training": scheduler_pb2.METRIC_KIND_TRAINING,
    "validation": scheduler_pb2.METRIC_KIND_VALIDATION,
}


class MetricsRequestError(ValueError):
    pass


@dataclass
class MetricsQuery:
    """What one `GetMetrics` call asks for, checked."""

    trial_id: int | None
    experiment_id: int | None
    from_batches: int
    page_size: int
    kinds: tuple[str, ...]
    follow: bool
    max_points: int = 0
    trial_ids: tuple[int, ...] = ()

    @classmethod
    def from_request(cls, request: scheduler_pb2.GetMetricsRequest) -> MetricsQuery:
        target = request.WhichOneof("target")
        if target is None:
            raise MetricsRequestError("name a trial_id or an experiment_id")
        if request.from_batches < 0 or request.page_size < 0:
            raise MetricsRequestError("from_batches and page_size must be >= 0")
        if request.kind not in KIND_NAMES:
            raise MetricsRequestError(f"unknown metric kind {request.kind}")
        if request.max_points < 0 or request.max_points == 1:
            raise MetricsRequestError(
                f"max_points must be 0 (all rows) or at least 2, not {request.max_points}"
            )
        group = request.group
        if group and (request.kind or group in BUILTIN_GROUPS or not GROUP_NAME.fullmatch(group)):
            raise MetricsRequestError(f"group must name a custom group, kind unset: not {group[:64]!r}")
        if request.trial_ids and target != "experiment_id":
            raise MetricsRequestError("trial_ids picks trials of an experiment: name its experiment_id")
        return cls(
            trial_id=request.trial_id if target == "trial_id" else None,
            experiment_id=request.experiment_id if target == "experiment_id" else None,
            from_batches=request.from_batches,
            page_size=min(request.page_size or DEFAULT_PAGE, MAX_PAGE),
            kinds=(request.group,) if request.group else KIND_NAMES[request.kind],
            follow=request.follow,
            max_points=request.max_points,
            trial_ids=tuple(sorted(set(request.trial_ids))),
        )


@dataclass
class _Cursor:
    """The last (batches) sent per trial and kind; trials still worth reading while following."""

    live: set[int] = field(default_factory=set)
    seen: set[int] = field(default_factory=set)
    last: dict[tuple[str, int], int] = field(default_factory=dict)


def _pages(rows: list[MetricRow], kind: str) -> list[scheduler_pb2.MetricSeries]:
    """Rows in (trial, batches) order as one column-wise series per trial."""
    series: list[scheduler_pb2.MetricSeries] = []
    current: scheduler_pb2.MetricSeries | None = None
    batches: list[int] = []
    metrics: list[str] = []
    times: list[str] = []
    runs: list[int] = []

    def close() -> None:
        if current is not None:
            current.total_batches.extend(batches)
            current.metrics_json.extend(metrics)
            current.end_time.extend(times)
            current.run_id.extend(runs)

    for trial_id, total_batches, metrics_json, end_time, run_id in rows:
        if current is None or current.trial_id != trial_id:
            close()
            current = scheduler_pb2.MetricSeries(
                trial_id=trial_id, kind=_KIND_ENUM.get(kind, scheduler_pb2.METRIC_KIND_UNSPECIFIED)
            )
            if kind not in _KIND_ENUM:
                current.group = kind  # a custom group's rows
            series.append(current)
            batches, metrics, times, runs = [], [], [], []
        batches.append(total_batches)
        metrics.append(metrics_json)
        times.append(end_time)
        runs.append(run_id)
    close()
    return series


def _read(
    db: Storage, query: MetricsQuery, kind: str, ids: list[int], cursor: _Cursor, since_marks: bool
) -> list[list[MetricRow]]:
    """Pages of `kind` rows of `ids`; past each trial's mark when `since_marks`."""
    pages: list[list[MetricRow]] = []
    for start in range(0, len(ids), ID_CHUNK):
        chunk = ids[start : start + ID_CHUNK]
        floor = query.from_batches
        if since_marks:
            marks = [cursor.last.get((kind, t), -1) for t in chunk]
            floor = max(floor, min(marks) + 1)
        after = (0, -1)
        while True:
            rows = result_ops.metric_rows(db, kind, chunk, floor, after, query.page_size)
            if since_marks:
                rows = [r for r in rows if r[1] > cursor.last.get((kind, r[0]), -1)]
            if rows:
                pages.append(rows)
                for r in rows:
                    cursor.last[(kind, r[0])] = r[1]
            if len(rows) < query.page_size:
                break
            after = (rows[-1][0], rows[-1][1])
    return pages


def _read_experiment(
    db: Storage, query: MetricsQuery, kind: str, cursor: _Cursor
) -> Iterator[list[MetricRow]]:
    """Pages of `kind` rows of every trial of the experiment (its whole stored history)."""
    after = (0, -1)
    while True:
        rows = result_ops.experiment_metric_rows(
            db, kind, query.experiment_id or 0, query.from_batches, after, query.page_size
        )
        if rows:
            for r in rows:
                cursor.last[(kind, r[0])] = r[1]
            yield rows
        if len(rows) < query.page_size:
            return
        after = (rows[-1][0], rows[-1][1])


Rows = list[MetricRow]


def _bounded(pages: Iterable[Rows], max_points: int) -> Iterator[Rows]:
    """`pages` (rows in (trial, batches) order) with each trial's rows whole and cut to `max_points`;
    a trial whose rows run on into the next page waits for it."""
    held: Rows = []
    for rows in pages:
        rows = held + rows
        cut = len(rows)
        while cut and rows[cut - 1][0] == rows[-1][0]:
            cut -= 1
        done, held = rows[:cut], rows[cut:]
        if done:
            yield _cut(done, max_points)
    if held:
        yield _cut(held, max_points)


def _cut(rows: Rows, max_points: int) -> Rows:
    """Each trial's run of `rows` down to `max_points` (first, last, min and max kept)."""
    out: Rows = []
    start = 0
    for i in range(1, len(rows) + 1):
        if i == len(rows) or rows[i][0] != rows[start][0]:
            trial = rows[start:i]
            out.extend(trial[k] for k in downsample.keep([r[2] for r in trial], max_points))
            start = i
    return out


def _cut_read(db: Storage, query: MetricsQuery, kind: str, ids: list[int], cursor: _Cursor) -> Iterator[Rows]:
    """The first read of a bounded stream (from batch 0): each trial's cut as `_bounded` makes it,
    kept where the trial's mark is unchanged since it was made (in memory, else in the database, as
    an earlier scheduler left it), else read, cut and kept in both; in pages of about
    `query.page_size` rows, in (trial, batches) order."""
    cache = curve_cache.of(db)
    marks = result_ops.metric_marks(db, kind, ids)
    cut: dict[int, Rows] = {}
    for trial_id, mark in marks.items():
        kept = cache.get(kind, trial_id, query.max_points, mark)
        if kept is not None:
            cut[trial_id] = kept
    missing = [t for t in marks if t not in cut]
    for trial_id, (mark, rows) in cut_curve_ops.stored(db, kind, query.max_points, missing).items():
        if mark == marks[trial_id]:
            cut[trial_id] = rows
            cache.put(kind, trial_id, query.max_points, mark, rows)
    for trial_id in cut:
        cursor.last[(kind, trial_id)] = marks[trial_id][1]
    stale = [t for t in marks if t not in cut]
    if stale:
        whole = query.experiment_id is not None and not query.trial_ids and len(stale) == len(marks)
        pages = (
            _read_experiment(db, query, kind, cursor)
            if whole
            else _read(db, query, kind, sorted(stale), cursor, False)
        )
        fresh: dict[int, cut_curve_ops.Cut] = {}
        for rows in _whole_trials(pages):
            trial_id, mark = rows[0][0], (len(rows), rows[-1][1])
            cut[trial_id] = [rows[k] for k in downsample.keep([r[2] for r in rows], query.max_points)]
            cache.put(kind, trial_id, query.max_points, mark, cut[trial_id])
            fresh[trial_id] = (mark, cut[trial_id])
        cut_curve_ops.store(db, kind, query.max_points, fresh)
    page: Rows = []
    for trial_id in sorted(cut):
        page.extend(cut[trial_id])
        if len(page) >= query.page_size:
            yield page
            page = []
    if page:
        yield page


def _whole_trials(pages: Iterable[Rows]) -> Iterator[Rows]:
    """Each trial's rows of `pages` (in (trial, batches) order) as one list, across page ends."""
    held: Rows = []
    for rows in pages:
        for row in rows:
            if held and row[0] != held[0][0]:
                yield held
                held = []
            held.append(row)
    if held:
        yield held


async def stream(
    db: Storage,
    query: MetricsQuery,
    wait_for_change: Callable[[], Awaitable[None]],
    min_interval: float = FOLLOW_INTERVAL,
) -> AsyncIterator[scheduler_pb2.GetMetricsResponse]:
    """The stored rows, then (following) new ones until the target ends. Raises LookupError for an
    unknown trial or experiment. Following reads at most once per `min_interval` seconds, so a
    trial reporting many results a second costs a follower a few reads, not one per commit."""
    cursor = _Cursor()
    states = _states(db, query)
    if not states and query.trial_id is not None:
        raise LookupError(f"trial {query.trial_id} not found")
    if query.experiment_id is not None and experiment_ops.experiment_state(db, query.experiment_id) is None:
        raise LookupError(f"experiment {query.experiment_id} not found")
    if query.trial_ids and len(states) < len(query.trial_ids):
        stranger = min(set(query.trial_ids) - set(states))
        raise LookupError(f"trial {stranger} is not a trial of experiment {query.experiment_id}")
    first = True
    while True:
        ids = sorted(states) if first else sorted((cursor.live & set(states)) | (set(states) - cursor.seen))
        for kind in query.kinds:
            pages: Iterable[list[MetricRow]]
            if first and query.max_points and not query.from_batches:
                pages = _cut_read(db, query, kind, ids, cursor)
            elif first and query.experiment_id is not None and not query.trial_ids:
                pages = _read_experiment(db, query, kind, cursor)
            else:
                pages = _read(db, query, kind, ids, cursor, since_marks=not first)
            if query.max_points and not (first and not query.from_batches):
                pages = _bounded(pages, query.max_points)
            for rows in pages:
                yield scheduler_pb2.GetMetricsResponse(series=_pages(rows, kind))
                await asyncio.sleep(0)  # a long history does not hold the event loop in one go
        if first:
            yield scheduler_pb2.GetMetricsResponse(caught_up=True)
        cursor.seen = set(states)
        cursor.live = {t for t, state in states.items() if not result_ops.is_terminal(state)}
        if not query.follow or _ended(db, query, cursor):
            return
        first = False
        read_at = time.monotonic()
        await wait_for_change()
        await asyncio.sleep(max(0.0, read_at + min_interval - time.monotonic()))
        states = _states(db, query)


def _states(db: Storage, query: MetricsQuery) -> dict[int, str]:
    if query.trial_id is not None:
        return result_ops.trial_states(db, trial_id=query.trial_id)
    states = result_ops.trial_states(db, experiment_id=query.experiment_id)
    if query.trial_ids:
        return {t: states[t] for t in query.trial_ids if t in states}
    return states


def _ended(db: Storage, query: MetricsQuery, cursor: _Cursor) -> bool:
    """Nothing more can arrive: the trial(s) asked for ended, or the experiment ended (it makes no more
    trials)."""
    if cursor.live:
        return False
    if query.trial_id is not None or query.trial_ids:
        return True  # the trials asked for ended; an experiment's new trials are not among them
    assert query.experiment_id is not None, "a metrics query names a trial or an experiment"
    return result_ops.is_terminal(experiment_ops.experiment_state(db, query.experiment_id))
