"""Turns a trial's searcher targets into the next workload.

Pure and restartable: its whole state is a few integers, stored with the trial, so a
restarted scheduler or trial run picks up exactly where the last one stood. Workloads
carry absolute batch counts, never deltas.

`pipeline` lets the scheduler send the workloads that are already decided behind the one a
trial runs (the validation at a searcher target after the step that reaches it; checkpoint and
terminate of a closing or stopping trial), so the harness runs them back to back instead of
waiting a scheduler round trip for each. It is derived from `next_workload` alone, so local,
test and cluster mode sequence identically.

Searcher targets and the validation/checkpoint periods count batches, or records or epochs where only
the trial can convert them (`pedl.config.lengths`): by its `global_batch_size`, or by its training
data loader's length, which the harness reports at the trial's start (`learn_epoch_length`). Until
then nothing needing that length is sent. The searcher hears back in its own unit.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from enum import Enum
from typing import Any

from pedl.config.lengths import TrialLengths, trial_batch_size


class Kind(str, Enum):
    RUN_STEP = "RUN_STEP"
    COMPUTE_VALIDATION_METRICS = "COMPUTE_VALIDATION_METRICS"
    CHECKPOINT_MODEL = "CHECKPOINT_MODEL"
    TERMINATE = "TERMINATE"


@dataclass(frozen=True)
class Next:
    kind: Kind
    step_id: int
    total_batches: int


@dataclass
class TrialSequencer:
    batches_per_step: int
    min_validation_period: int = 0
    min_checkpoint_period: int = 0
    batches_trained: int = 0
    step_id: int = 0
    last_validation: int = -1
    last_checkpoint: int = -1
    # Lengths the searcher asked to be validated at, in order.
    targets: list[int] = field(default_factory=list)
    # The furthest length ever asked for: a run restarted from an older checkpoint trains back to it
    # even when the searcher has already heard the validation there.
    goal: int = 0
    closing: bool = False
    terminated: bool = False
    # Pause or preemption: checkpoint (if anything is unsaved), then exit, to resume later.
    stop_requested: bool = False
    # The trial's own code ended it before its length (Determined's EarlyExitReason name:
    # INVALID_HP, USER_REQUESTED_STOP): checkpoint, then exit for good. Survives a restart.
    early_exit: str = ""
    # Another trial will start from this one's state at `checkpoint_requested_at` batches (PBT
    # exploit, ASHA resume): save it there first, training back to it after a restart.
    checkpoint_requested: bool = False
    checkpoint_requested_at: int = 0
    # A Core API script under a searcher without a length: it trains, step after step, until it
    # exits on its own (`finish`).
    open_ended: bool = False
    # `perform_initial_validation: true`: validate the untrained model (at batch 0) first.
    initial_validation: bool = False
    # `checkpoint_policy: all`: a checkpoint follows every validation.
    checkpoint_after_validation: bool = False
    # `checkpoint_policy: best`: a checkpoint follows a validation better than every earlier one of
    # the experiment (the caller, who sees all its trials, says which: `best_validation_at`).
    checkpoint_after_best_validation: bool = False
    best_validation_at: int = -1
    # Units of `targets`/`goal` (the searcher's) and of the two periods: batches, records or epochs.
    target_unit: str = "batches"
    validation_period_unit: str = "batches"
    checkpoint_period_unit: str = "batches"
    # What converts them: the trial's global_batch_size, records_per_epoch, and its training data
    # loader's length in batches once the harness reported it (0: not yet).
    global_batch_size: int = 0
    records_per_epoch: int = 0
    epoch_batches: int = 0
    # The searcher's length at the target the last validation answered (what the searcher hears).
    answered_length: int = 0

    @classmethod
    def for_config(cls, config: Any, hparams: dict[str, Any] | None = None) -> TrialSequencer:
        """A new trial's sequencer for an ExperimentConfig (periods, initial validation, policy);
        `hparams`, the trial's, give the batch size that lengths in records or epochs convert by."""
        return cls(
            batches_per_step=config.batches_per_step,
            min_validation_period=config.min_validation_period.amount,
            min_checkpoint_period=config.min_checkpoint_period.amount,
            initial_validation=bool(config.raw.get("perform_initial_validation", False)),
            checkpoint_after_validation=config.checkpoint_policy == "all",
            checkpoint_after_best_validation=config.checkpoint_policy == "best",
            open_ended=config.max_length == 0,
            target_unit=config.length_unit,
            validation_period_unit=config.min_validation_period.unit,
            checkpoint_period_unit=config.min_checkpoint_period.unit,
            global_batch_size=trial_batch_size(hparams or {}),
            records_per_epoch=config.records_per_epoch or 0,
        )

    @property
    def lengths(self) -> TrialLengths:
        return TrialLengths(self.global_batch_size, self.records_per_epoch, self.epoch_batches)

    @property
    def needs_epoch_length(self) -> bool:
        """Some length is in epochs that only the harness's report of its data loader can measure."""
        units = (self.target_unit, self.validation_period_unit, self.checkpoint_period_unit)
        if units == ("batches", "batches", "batches"):
            return False
        lengths = self.lengths
        return not all(lengths.known(u) for u in units)

    @property
    def awaits_epoch_length(self) -> bool:
        """Training is due but waits for the harness's report of its epoch (a run that starts sends it)."""
        return self.needs_epoch_length and not self.terminated and bool(self.targets or self.goal)

    def learn_epoch_length(self, batches: int) -> None:
        """The harness measured the trial's epoch: its training data loader's length in batches."""
        if batches < 1:
            raise ValueError(f"an epoch of {batches} batches: the training data loader is empty")
        self.epoch_batches = batches

    def _target_batches(self, length: int) -> int:
        if self.target_unit == "batches":
            return length
        return self.lengths.to_batches(length, self.target_unit)

    def _period_batches(self, period: int, unit: str) -> int:
        return period if unit == "batches" else self.lengths.to_batches(period, unit)

    def add_target(self, length: int) -> None:
        """A searcher target, in the searcher's unit (`target_unit`)."""
        self.targets.append(length)
        self.goal = max(self.goal, length)

    def close(self) -> None:
        self.closing = True

    def request_stop(self) -> None:
        self.stop_requested = True

    def exit_early(self, reason: str) -> bool:
        """The trial asked to end now (`set_stop_requested(True)`, `report_early_exit`); True the
        first time. The first reason stands, as Determined keeps the first one reported."""
        if self.early_exit:
            return False
        self.early_exit = reason
        return True

    @property
    def exited_early(self) -> bool:
        """Terminated at the trial's own request, short of what the searcher asked of it."""
        return self.terminated and bool(self.early_exit) and not self.completed

    def request_checkpoint(self) -> None:
        """Asks for a checkpoint of the state as it stands now."""
        self.checkpoint_requested = True
        self.checkpoint_requested_at = self.batches_trained

    def requested_checkpoint_reached(self, total_batches: int) -> bool:
        return total_batches >= self.checkpoint_requested_at

    def next_workload(self) -> Next | None:
        """The workload to run now, or None while the trial waits on the searcher."""
        if self.terminated:
            return None
        b = self.batches_trained
        if (
            self.checkpoint_requested
            and self.requested_checkpoint_reached(b)
            and self.checkpoint_due_before_stop()
        ):
            return self._make(Kind.CHECKPOINT_MODEL)
        if self.stop_requested or self.early_exit:
            if self.checkpoint_due_before_stop():
                return self._make(Kind.CHECKPOINT_MODEL)
            return self._make(Kind.TERMINATE)
        if self.initial_validation and b == 0 and self.last_validation < 0 and (self.targets or self.goal):
            return self._make(Kind.COMPUTE_VALIDATION_METRICS)
        if self.needs_epoch_length:
            return None  # until the harness reports its training data loader's length
        if (
            self._checkpoint_follows_validation()
            and b > 0
            and self.last_validation == b != self.last_checkpoint
        ):
            return self._make(Kind.CHECKPOINT_MODEL)
        if self.open_ended:
            return Next(Kind.RUN_STEP, self.step_id + 1, b + self.batches_per_step)
        target = self._target_batches(self.targets[0]) if self.targets else 0
        if self.targets and b < target:
            validation_period = self._period_batches(self.min_validation_period, self.validation_period_unit)
            if self._due(validation_period, self.last_validation):
                return self._make(Kind.COMPUTE_VALIDATION_METRICS)
            checkpoint_period = self._period_batches(self.min_checkpoint_period, self.checkpoint_period_unit)
            if self._due(checkpoint_period, self.last_checkpoint):
                return self._make(Kind.CHECKPOINT_MODEL)
            return Next(Kind.RUN_STEP, self.step_id + 1, self._step_end(target))
        if self.targets:
            if self.last_validation != b:
                return self._make(Kind.COMPUTE_VALIDATION_METRICS)
            return None  # validated at the target; the searcher has not answered yet
        goal = self._target_batches(self.goal)
        if b < goal:
            return Next(Kind.RUN_STEP, self.step_id + 1, self._step_end(goal))
        if self.closing:
            if self.last_checkpoint != b and b > 0:
                return self._make(Kind.CHECKPOINT_MODEL)
            return self._make(Kind.TERMINATE)
        return None

    def _checkpoint_follows_validation(self) -> bool:
        best = self.checkpoint_after_best_validation and self.best_validation_at == self.last_validation
        return self.checkpoint_after_validation or best

    def pipeline(self, outstanding: list[Next]) -> list[Next]:
        """The workloads to send now, given those sent whose results have not come back.

        Assumes each outstanding workload completes as sent (workloads are absolute, so a result
        can only confirm it), and queues decided ones behind them. It stops at a validation that
        answers the searcher (its reply decides what follows, unless the searcher closed the trial
        already and this is its last target), at TERMINATE, and never queues a
        RUN_STEP behind anything: a queued step would delay a pause, preemption or checkpoint
        request by a whole step, and sparing one round trip per step is not worth that.
        """
        probe = self.clone()
        for w in outstanding:
            if not probe._assume_completed(w):
                return []
        out: list[Next] = []
        while (nxt := probe.next_workload()) is not None:
            if nxt.kind is Kind.RUN_STEP and (outstanding or out):
                break
            out.append(nxt)
            if not probe._assume_completed(nxt):
                break
        return out

    def _assume_completed(self, w: Next) -> bool:
        """Applies `w`'s expected completion; False when what follows it is not decided yet."""
        if w.kind is Kind.RUN_STEP:
            self.on_step_completed(w.step_id, w.total_batches)
        elif w.kind is Kind.COMPUTE_VALIDATION_METRICS:
            if (
                self.targets
                and w.total_batches >= self._target_batches(self.targets[0])
                and not self._last_target_of_closed()
            ):
                return False  # the searcher hears this one first
            self.on_validation_completed(w.total_batches)
            if self.checkpoint_after_best_validation and not self._same_next_if_best(w.total_batches):
                return False  # whether it is the best, and so checkpointed, is not known yet
        elif w.kind is Kind.CHECKPOINT_MODEL:
            self.on_checkpoint_completed(w.total_batches)
        else:
            self.on_terminate_sent()
            return False
        return True

    def _same_next_if_best(self, total_batches: int) -> bool:
        """Whether what follows the validation at `total_batches` is the same whether or not it is
        the best (at a closed trial's end the checkpoint comes either way)."""
        if_best = self.clone()
        if_best.best_validation_at = total_batches
        return if_best.next_workload() == self.next_workload()

    def _last_target_of_closed(self) -> bool:
        """The searcher closed the trial up front: what follows its last validation is decided."""
        return self.closing and len(self.targets) == 1

    @property
    def completed(self) -> bool:
        """Terminated because the searcher is done with it (not paused or preempted on the way)."""
        return (
            self.terminated
            and self.closing
            and not self.open_ended  # a script that has not finished was paused or preempted
            and not self.targets
            and not self.needs_epoch_length
            and self.batches_trained >= self._target_batches(self.goal)
        )

    def checkpoint_due_before_stop(self) -> bool:
        """Whether stopping now (pause, preemption) needs a checkpoint first."""
        return self.batches_trained > 0 and self.last_checkpoint != self.batches_trained

    def on_step_completed(self, step_id: int, total_batches: int) -> None:
        self.step_id = max(self.step_id, step_id)
        self.batches_trained = total_batches

    def on_validation_completed(self, total_batches: int, best: bool = False) -> bool:
        """Records the validation (`best`: better than every earlier one of the experiment); True when
        it answers the searcher's current target (`answered_length` is then what the searcher hears)."""
        self.last_validation = total_batches
        if best:
            self.best_validation_at = total_batches
        if self.targets and total_batches >= self._target_batches(self.targets[0]):
            target = self.targets.pop(0)
            self.answered_length = total_batches if self.target_unit == "batches" else target
            return True
        return False

    def on_checkpoint_completed(self, total_batches: int) -> None:
        self.last_checkpoint = total_batches
        if self.requested_checkpoint_reached(total_batches):
            self.checkpoint_requested = False

    def finish(self, total_batches: int) -> None:
        """The script exited on its own at `total_batches`: that is the trial's length. A searcher
        target it did not reach is answered by a validation there (its last validation metrics)."""
        self.open_ended = False
        self.batches_trained = total_batches
        self.goal = total_batches
        if self.targets:
            self.targets = [total_batches]

    def on_terminate_sent(self) -> None:
        self.terminated = True

    def restart_from(self, checkpoint_batches: int, checkpoint_step_id: int) -> None:
        """A new run resumes from a checkpoint: work after it will be redone."""
        self.batches_trained = checkpoint_batches
        self.step_id = checkpoint_step_id
        self.last_checkpoint = checkpoint_batches if checkpoint_batches > 0 else -1
        self.terminated = False
        self.stop_requested = False

    def reopen(self, checkpoint_batches: int, checkpoint_step_id: int) -> None:
        """The searcher takes back a trial it had closed (an ASHA promotion): a new run goes on from
        the trial's latest checkpoint toward the targets the searcher adds next."""
        self.closing = False
        self.early_exit = ""
        self.restart_from(checkpoint_batches, checkpoint_step_id)

    def _step_end(self, limit: int) -> int:
        """Steps end at `limit`, at a requested checkpoint a restarted run has to train back to, and
        at the end of a period in records or epochs (a validation "every epoch" comes at the epoch's end)."""
        end = min(self.batches_trained + self.batches_per_step, limit)
        if self.checkpoint_requested and self.batches_trained < self.checkpoint_requested_at:
            end = min(end, self.checkpoint_requested_at)
        for period, unit, last in (
            (self.min_validation_period, self.validation_period_unit, self.last_validation),
            (self.min_checkpoint_period, self.checkpoint_period_unit, self.last_checkpoint),
        ):
            if period and unit != "batches":
                boundary = max(last, 0) + self._period_batches(period, unit)
                if boundary > self.batches_trained:
                    end = min(end, boundary)
        return end

    def _due(self, period: int, last: int) -> bool:
        b = self.batches_trained
        return period > 0 and b > 0 and last != b and b - max(last, 0) >= period

    def _make(self, kind: Kind) -> Next:
        return Next(kind, self.step_id, self.batches_trained)

    def clone(self) -> TrialSequencer:
        twin = object.__new__(TrialSequencer)  # a plain field copy: pipeline() clones per dispatch
        twin.__dict__.update(self.__dict__)
        twin.targets = list(self.targets)
        return twin

    def to_dict(self) -> dict[str, Any]:
        # Not dataclasses.asdict: this runs for every step result, and asdict deep-copies generically.
        return {name: getattr(self, name) for name in _FIELDS} | {"targets": list(self.targets)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrialSequencer:
        return cls(**data)


_FIELDS = tuple(f.name for f in fields(TrialSequencer))
