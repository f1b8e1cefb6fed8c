"""`single`: one trial, trained to the searcher's max length (or, without one, until its Core API
script decides it is done)."""

from __future__ import annotations

from typing import Any

from pedl.searcher._base import EXITED_EARLY_BY_TRIAL, SearcherError, SearchMethod
from pedl.searcher._ops import Close, Create, Operation, Shutdown, ValidateAfter


class SingleSearch(SearchMethod):
    def __init__(self, config: Any, seed: int) -> None:
        super().__init__(config, seed)
        self.request_id: str | None = None
        self.done = False

    def initial_operations(self) -> list[Operation]:
        self.request_id = self.new_request_id()
        hparams = self.sample_hparams()
        ops: list[Operation] = [Create(self.request_id, hparams, self.new_trial_seed())]
        if self.config.max_length:
            ops.append(ValidateAfter(self.request_id, self.config.max_length))
        ops.append(Close(self.request_id))  # decided now: see `random`
        return ops

    def on_validation_completed(self, request_id: str, metric: float, length: int) -> list[Operation]:
        if length >= self.config.max_length:
            return [Close(request_id)]
        return []

    def on_trial_closed(self, request_id: str) -> list[Operation]:
        self.done = True
        return [Shutdown()]

    def on_trial_exited_early(self, request_id: str, reason: str = "") -> list[Operation]:
        # As Determined's: a trial that ended itself (INVALID_HP, USER_REQUESTED_STOP) fails no search.
        self.done = True
        return [Shutdown(failure=reason not in EXITED_EARLY_BY_TRIAL)]

    def on_trial_revived(self, request_id: str) -> list[Operation]:
        if request_id != self.request_id or not self.done:
            raise SearcherError(f"trial {request_id} is not one this search ended")
        self.done = False
        return []

    def progress(self) -> float:
        return 1.0 if self.done else 0.0

    def method_state(self) -> dict[str, Any]:
        return {"request_id": self.request_id, "done": self.done}

    def load_method_state(self, state: dict[str, Any]) -> None:
        self.request_id = state["request_id"]
        self.done = state["done"]
