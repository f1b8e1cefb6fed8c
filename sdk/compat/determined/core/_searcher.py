"""`core_context.searcher`: Determined's legacy searcher protocol (operations with a length).

Today's searchers need none of it: the script trains until it decides it is done, reporting
validation metrics (with the searcher's `time_metric` for ASHA), and stops when
`preempt.should_preempt()` says so. Searchers configured with a `max_length` still hand out
operations: train until `op.length`, report progress, then `op.report_completed(metric)`.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Iterator
from typing import Any

from determined.core._distributed import DistributedContext
from determined.core._link import Link


class Unit(enum.Enum):
    EPOCHS = "UNIT_EPOCHS"
    RECORDS = "UNIT_RECORDS"
    BATCHES = "UNIT_BATCHES"


class SearcherMode(enum.Enum):
    WorkersAskChief = "WORKERS_ASK_CHIEF"
    ChiefOnly = "CHIEF_ONLY"


class SearcherOperation:
    def __init__(self, link: Link, length: int, is_chief: bool) -> None:
        self._link = link
        self._length = length
        self._is_chief = is_chief
        self._completed = False

    @property
    def length(self) -> int:
        return self._length

    def _chief(self, what: str) -> None:
        if not self._is_chief:
            raise RuntimeError(f"SearcherOperation.{what} may only be called on the chief (rank 0)")
        if self._completed:
            raise RuntimeError(f"SearcherOperation.{what} called after report_completed")

    def report_progress(self, length: float) -> None:
        self._chief("report_progress")
        if isinstance(length, bool) or not isinstance(length, (int, float)) or length < 0:
            raise ValueError(f"report_progress: length must be a non-negative number, got {length!r}")
        self._link.call("operation_progress", length=float(length))

    def report_completed(self, searcher_metric: Any) -> None:
        self._chief("report_completed")
        if isinstance(searcher_metric, bool) or not isinstance(searcher_metric, (int, float)):
            item = getattr(searcher_metric, "item", None)
            searcher_metric = item() if callable(item) else searcher_metric
        if (
            isinstance(searcher_metric, bool)
            or not isinstance(searcher_metric, (int, float))
            or not math.isfinite(searcher_metric)
        ):
            raise ValueError(
                f"report_completed: searcher_metric must be a finite number, got {searcher_metric!r}"
            )
        self._link.call("operation_completed", length=self._length, searcher_metric=float(searcher_metric))
        self._completed = True


class SearcherContext:
    def __init__(self, link: Link, dist: DistributedContext, *, dummy: bool = False) -> None:
        self._link = link
        self._dist = dist
        self._dummy = dummy
        self._closed = False

    def close(self) -> None:
        self._closed = True

    def operations(
        self, searcher_mode: SearcherMode = SearcherMode.WorkersAskChief, auto_ack: bool = True
    ) -> Iterator[SearcherOperation]:
        if self._closed:
            raise RuntimeError("searcher.operations called after the core context was closed")
        if not isinstance(searcher_mode, SearcherMode):
            raise TypeError(f"operations: searcher_mode must be a SearcherMode, got {searcher_mode!r}")
        is_chief = self._dist.rank == 0
        if searcher_mode is SearcherMode.ChiefOnly and not is_chief:
            raise RuntimeError("searcher.operations with SearcherMode.ChiefOnly may only run on the chief")
        if self._dummy:
            op = SearcherOperation(self._link, 1, is_chief)
            yield op
            if is_chief and not op._completed:
                raise RuntimeError("the searcher operation ended without op.report_completed(metric)")
            return
        while True:
            length = self._link.call("next_operation") if is_chief else None
            if searcher_mode is SearcherMode.WorkersAskChief:
                length = self._dist.broadcast(length)
            if length is None:
                return
            op = SearcherOperation(self._link, int(length), is_chief)
            yield op
            if is_chief and not op._completed:
                raise RuntimeError(
                    f"the searcher operation of length {length} ended without op.report_completed(metric)"
                )

    def acquire_custom_searcher_operations(self) -> Any:
        raise RuntimeError(
            "custom searchers (acquire_custom_searcher_operations) are not offered by pedl; choose one of "
            "its searchers in the experiment config"
        )

    def get_configured_units(self) -> Unit | None:
        """The unit of the searcher's max_length as the config writes it (batches, records or epochs);
        None for a searcher whose trials decide their own length."""
        if self._dummy:
            return Unit.BATCHES
        units = self._link.call("configured_units")
        return None if units is None else Unit(units)
