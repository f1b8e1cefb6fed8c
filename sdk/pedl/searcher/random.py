"""`random`: `max_trials` independent samples of the space, each trained to the max length.

Under a concurrency limit (`pedl.searcher.concurrency`) the next trial is created when an open one
closes or exits.
A trial that exits early counts toward `max_trials` and is not replaced, so a trial that always
fails cannot keep the search alive forever; except, as in Determined, one whose code reported its
hyperparameters invalid (INVALID_HP): a new sample takes its place (`grid`'s points are not resampled).

Each trial's whole life is known when it is created (train to the max length, validate, close),
so `Close` goes out with `Create`, as in Determined: the scheduler can then send a trial's final
validation, checkpoint and terminate together instead of waiting to hear the validation first.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pedl.searcher._base import SearcherError, SearchMethod
from pedl.searcher._ops import Close, Create, Operation, Shutdown, ValidateAfter


class RandomSearch(SearchMethod):
    # An INVALID_HP trial is replaced by a new sample (Determined's random; not its grid).
    replaces_invalid_hp = True

    def __init__(self, config: Any, seed: int) -> None:
        super().__init__(config, seed)
        self.max_trials: int = self._total_trials()
        self.created = 0
        self.open: dict[str, None] = {}  # request ids in creation order (an ordered set)
        self.finished = 0
        self.shutdown = False

    def _total_trials(self) -> int:
        return self.config.searcher.max_trials or 0

    def _next_hparams(self) -> dict[str, Any]:
        """The hyperparameters of trial number `self.created` (0-based)."""
        return self.sample_hparams()

    def initial_operations(self) -> list[Operation]:
        return self._fill()

    def on_validation_completed(self, request_id: str, metric: float, length: int) -> list[Operation]:
        # Every trial is closed when it is created; closing again is harmless and covers trials
        # an older version created without it.
        if length >= self.config.max_length:
            return [Close(request_id)]
        return []

    def on_trial_closed(self, request_id: str) -> list[Operation]:
        return self._finish(request_id)

    def on_trial_exited_early(self, request_id: str, reason: str = "") -> list[Operation]:
        if reason == "INVALID_HP" and self.replaces_invalid_hp and request_id in self.open:
            del self.open[request_id]
            self.created -= 1  # not one of max_trials: _fill samples another in its place
            return self._fill()
        return self._finish(request_id)

    def on_trial_revived(self, request_id: str) -> list[Operation]:
        if request_id in self.open or not 0 < _number(request_id) <= self._next_request:
            raise SearcherError(f"trial {request_id} is not one this search ended")
        self.open[request_id] = None
        self.finished -= 1
        self.shutdown = False  # its trial's close ends the search again
        return []

    def _finish(self, request_id: str) -> list[Operation]:
        if request_id not in self.open:
            return []
        del self.open[request_id]
        self.finished += 1
        return self._fill()

    def _fill(self) -> list[Operation]:
        ops: list[Operation] = []
        while self.created < self.max_trials and self.has_room(len(self.open)):
            hparams = self._next_hparams()
            request_id = self.new_request_id()
            self.created += 1
            self.open[request_id] = None
            ops.append(Create(request_id, hparams, self.new_trial_seed()))
            if self.config.max_length:  # without a length, the trial's script decides
                ops.append(ValidateAfter(request_id, self.config.max_length))
            ops.append(Close(request_id))
        if not self.open and self.created >= self.max_trials and not self.shutdown:
            self.shutdown = True
            ops.append(Shutdown())
        return ops

    def progress(self) -> float:
        if self.shutdown:
            return 1.0
        return self.finished / self.max_trials if self.max_trials else 0.0

    def method_state(self) -> dict[str, Any]:
        # A search without a concurrency limit holds every trial open from the start: runs of
        # consecutive request ids keep the snapshot small (and so written with each event).
        return {
            "created": self.created,
            "open_runs": _runs(self.open),
            "finished": self.finished,
            "shutdown": self.shutdown,
        }

    def load_method_state(self, state: dict[str, Any]) -> None:
        self.created = state["created"]
        if "open_runs" in state:
            runs = state["open_runs"]
            self.open = {f"r{n}": None for first, count in runs for n in range(first, first + count)}
        else:
            self.open = dict.fromkeys(state["open"])  # a snapshot written before runs
        self.finished = state["finished"]
        self.shutdown = state["shutdown"]


def _number(request_id: str) -> int:
    return int(request_id[1:]) if request_id[1:].isdigit() else 0


def _runs(request_ids: Iterable[str]) -> list[list[int]]:
    """[first, count] for each run of consecutive ids ("r7", "r8", "r9" -> [7, 3]), in order."""
    runs: list[list[int]] = []
    for request_id in request_ids:
        n = int(request_id[1:])
        if runs and runs[-1][0] + runs[-1][1] == n:
            runs[-1][1] += 1
        else:
            runs.append([n, 1])
    return runs
