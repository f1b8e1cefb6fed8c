"""The interface every search method implements."""

from __future__ import annotations

import random
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any

from pedl.config.hyperparameters import normalize_space, sample
from pedl.searcher._ops import Operation

# Early exits a trial's own code chose (Determined's EarlyExitReason names), as opposed to an error or
# a kill (reason ""): Determined's searchers never count them as failures.
EXITED_EARLY_BY_TRIAL = frozenset({"INVALID_HP", "USER_REQUESTED_STOP"})


class SearcherError(ValueError):
    """A searcher config the method cannot run."""


class SearchMethod(ABC):
    """One search algorithm. Subclasses keep all their state in `state_dict()`-able fields."""

    def __init__(self, config: Any, seed: int) -> None:
        self.config = config
        self.rng = random.Random(seed)
        self._next_request = 0
        self._space: dict[str, Any] | None = None
        self._room: Callable[[int], bool] | None = None

    def bound_by(self, room: Callable[[int], bool]) -> None:
        """Called by a wrapper that bounds open trials (`pedl.searcher.concurrency`)."""
        self._room = room

    def has_room(self, open_trials: int) -> bool:
        """Whether one more trial may start while `open_trials` are open. A method that chooses
        what to start when a slot frees asks before each start; others need not ask."""
        return self._room is None or self._room(open_trials)

    def sample_hparams(self) -> dict[str, Any]:
        """A random point of the config's space (normalized once, not per trial)."""
        if self._space is None:
            self._space = normalize_space(self.config.hyperparameters)
        return sample(self._space, self.rng, normalized=True)

    def new_request_id(self) -> str:
        self._next_request += 1
        return f"r{self._next_request}"

    def new_trial_seed(self) -> int:
        return self.rng.randrange(2**31)

    @abstractmethod
    def initial_operations(self) -> list[Operation]: ...

    def on_trial_created(self, request_id: str) -> list[Operation]:
        return []

    @abstractmethod
    def on_validation_completed(self, request_id: str, metric: float, length: int) -> list[Operation]: ...

    @abstractmethod
    def on_trial_closed(self, request_id: str) -> list[Operation]: ...

    @abstractmethod
    def on_trial_exited_early(self, request_id: str, reason: str = "") -> list[Operation]:
        """The trial ended before its length. `reason`: EXITED_EARLY_BY_TRIAL names when its own code
        ended it (Determined's INVALID_HP, USER_REQUESTED_STOP): no failure. "" when it errored or
        was killed."""

    def on_trial_revived(self, request_id: str) -> list[Operation]:
        """Takes back the early exit of a trial the infrastructure ended (`pedl experiment activate`
        of an experiment that ended ERROR through it): the trial is open again, as if it had never
        exited, and goes on from its latest checkpoint. SearcherError when this method cannot."""
        raise SearcherError(f"the {type(self).__name__} search cannot take a trial back after it exited")

    def resumable_requests(self) -> set[str]:
        """Request ids of ended trials a later `Create.checkpoint_from` may name: their latest
        checkpoints must stay (the scheduler refuses to delete them). None by default."""
        return set()

    @abstractmethod
    def progress(self) -> float:
        """Fraction of the search done, 0.0 to 1.0."""

    def snapshot(self) -> dict[str, Any]:
        return {
            "rng": _encode_rng(self.rng.getstate()),
            "next_request": self._next_request,
            "method": self.method_state(),
        }

    def restore(self, snapshot: dict[str, Any]) -> None:
        self.rng.setstate(_decode_rng(snapshot["rng"]))
        self._next_request = snapshot["next_request"]
        self.load_method_state(snapshot["method"])

    @abstractmethod
    def method_state(self) -> dict[str, Any]: ...

    @abstractmethod
    def load_method_state(self, state: dict[str, Any]) -> None: ...


def _encode_rng(state: tuple) -> list:
    version, internal, gauss = state
    return [version, list(internal), gauss]


def _decode_rng(state: list) -> tuple:
    version, internal, gauss = state
    return (version, tuple(internal), gauss)
