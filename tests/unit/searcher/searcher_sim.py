"""A simulated scheduler and trial runner for searcher tests: applies operations as the scheduler does.

Trials "train" by jumping to their next target and report `objective(trial)` (it reads the trial's
hparams, trained length and `root`, the first trial of its checkpoint lineage); which open
trial moves next is drawn from a seeded rng, so results arrive out of order as on a real cluster.
A trial created with `checkpoint_from` starts at its parent's trained length; a resumed one (an ASHA
promotion) goes on from where it was closed.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pedl.searcher import Close, Create, Operation, Resume, SearchMethod, Shutdown, ValidateAfter

Objective = Callable[["SimTrial"], float]


@dataclass
class SimTrial:
    request_id: str
    hparams: dict[str, Any]
    seed: int
    checkpoint_from: str | None
    root: str = ""
    trained: int = 0
    start: int = 0
    targets: list[int] = field(default_factory=list)
    validations: list[tuple[int, float]] = field(default_factory=list)
    closing: bool = False
    state: str = "ACTIVE"  # ACTIVE, COMPLETED, ERROR
    resumes: int = 0  # times the searcher opened it again after closing it


class Simulator:
    def __init__(
        self,
        searcher: SearchMethod,
        objective: Objective,
        *,
        seed: int = 0,
        fails: Callable[[SimTrial], bool] = lambda trial: False,
    ) -> None:
        self.searcher = searcher
        self.objective = objective
        self.rng = random.Random(seed)
        self.fails = fails
        self.trials: dict[str, SimTrial] = {}
        self.log: list[Operation] = []
        # Everything in order: ("op", operation) and ("report", request_id, length, metric).
        self.timeline: list[tuple[Any, ...]] = []
        self.shutdown: Shutdown | None = None
        self.max_open = 0
        self.events = 0

    @property
    def open_trials(self) -> list[SimTrial]:
        return [t for t in self.trials.values() if t.state == "ACTIVE"]

    def start(self) -> None:
        self.apply(self.searcher.initial_operations())

    def apply(self, ops: list[Operation]) -> None:
        pending = list(ops)
        while pending:
            op = pending.pop(0)
            self.log.append(op)
            self.timeline.append(("op", op))
            if isinstance(op, Create):
                assert op.request_id not in self.trials, f"duplicate request id {op.request_id}"
                trial = SimTrial(op.request_id, op.hparams, op.seed, op.checkpoint_from, root=op.request_id)
                if op.checkpoint_from is not None:
                    parent = self.trials[op.checkpoint_from]
                    trial.trained = trial.start = parent.trained
                    trial.root = parent.root
                self.trials[op.request_id] = trial
                pending.extend(self.searcher.on_trial_created(op.request_id))
            elif isinstance(op, Resume):
                trial = self.trials[op.request_id]
                assert trial.state == "COMPLETED", f"{op} of a trial that is {trial.state}"
                trial.state, trial.closing = "ACTIVE", False
                trial.resumes += 1
            elif isinstance(op, ValidateAfter):
                trial = self.trials[op.request_id]
                assert trial.state == "ACTIVE" and not trial.closing, f"ValidateAfter on a closed {op}"
                assert op.length > trial.trained, f"{op} is not past {trial.trained}"
                trial.targets.append(op.length)
            elif isinstance(op, Close):
                self.trials[op.request_id].closing = True
            elif isinstance(op, Shutdown):
                self.shutdown = op
        self.max_open = max(self.max_open, len(self.open_trials))

    def step(self) -> bool:
        """Advance one open trial by one event; False when nothing can move."""
        movable = [t for t in self.open_trials if t.targets or t.closing]
        if not movable:
            return False
        trial = movable[self.rng.randrange(len(movable))]
        self.events += 1
        if trial.targets and self.fails(trial):
            trial.state = "ERROR"
            self.apply(self.searcher.on_trial_exited_early(trial.request_id))
        elif trial.targets:
            trial.trained = trial.targets.pop(0)
            metric = self.objective(trial)
            trial.validations.append((trial.trained, metric))
            self.timeline.append(("report", trial.request_id, trial.trained, metric))
            self.apply(self.searcher.on_validation_completed(trial.request_id, metric, trial.trained))
        else:
            trial.state = "COMPLETED"
            self.apply(self.searcher.on_trial_closed(trial.request_id))
        return True

    def run(self, max_events: int = 100_000) -> Simulator:
        """Run to the end; fails if the searcher leaves the experiment hanging."""
        if not self.log:
            self.start()
        while self.events < max_events and self.step():
            pass
        assert self.events < max_events, "the search did not end"
        assert self.shutdown is not None, "no trial can move but the searcher has not shut down"
        assert not self.open_trials, "the searcher shut down with trials still open"
        return self

    def run_events(self, count: int) -> None:
        if not self.log:
            self.start()
        for _ in range(count):
            if not self.step():
                return

    def swap_in_restored(self, make: Callable[[], SearchMethod]) -> None:
        """Replace the searcher with a fresh one restored from a JSON round trip of its snapshot."""
        snapshot = json.loads(json.dumps(self.searcher.snapshot()))
        fresh = make()
        fresh.restore(snapshot)
        self.searcher = fresh

    def created(self) -> list[Create]:
        return [op for op in self.log if isinstance(op, Create)]

    def batches(self) -> int:
        return sum(t.trained - t.start for t in self.trials.values())
