"""`adaptive_asha`: asynchronous successive halving (Li et al., MLSys 2020) run in several brackets.

A bracket with R rungs validates trials at max_length / divisor^k (k = R-1 .. 0). When a trial
reports at a rung it goes on to the next rung if it ranks in the top 1/divisor of the results that
rung has seen so far; otherwise it is closed, freeing its slot for a promotion or a new trial.

Brackets follow Determined: `mode` aggressive runs one bracket of `max_rungs` rungs, standard the
brackets with (max_rungs-1)//2+1 .. max_rungs rungs, conservative 1 .. max_rungs; `bracket_rungs`
lists them explicitly. `max_rungs` is capped so the first rung is at least one batch and at least
one trial can reach the top. `max_trials` is split so each bracket gets about the same compute.

`stop_once: true` is Determined's stopping variant: a trial goes on while it ranks in the top
max(1, n/divisor) of its rung and, once closed, is never resumed. Without it (the default) this is
ASHA proper: whenever a slot is free, a stopped trial in the top n/divisor of its rung (checked top
rung first) is promoted before any new trial starts, so a trial closed early can be promoted once
enough worse results arrive. As in Determined, a promotion continues the same trial (`Resume`: same
trial id, from its latest checkpoint, at absolute lengths), so a search has at most `max_trials`
trials. A trial promotable when it reports simply goes on. If a bracket ends with nobody at its top
rung (trials exited early), its best stopped trial is resumed until one gets there, so every bracket
yields a fully trained model.

Under a concurrency limit (`pedl.searcher.concurrency`) on the open trials of all brackets together,
a freed slot goes to the bracket with the fewest open trials, so brackets progress evenly.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import asdict, dataclass, field
from typing import Any

from pedl.searcher._base import SearcherError, SearchMethod
from pedl.searcher._ops import Close, Create, Operation, Resume, Shutdown, ValidateAfter

# A rung entry is [config index, signed metric or None (exited: ranks last), promoted].
Entry = list[Any]


@dataclass
class BracketPlan:
    num_rungs: int
    max_trials: int


@dataclass
class _Config:
    """One sampled hyperparameter configuration, trained by one trial (a promotion resumes it).

    `request_id` is its trial's. Snapshots written before promotions resumed the same trial may have
    moved it to a newer request id; it names the config's latest trial either way."""

    index: int
    bracket: int
    hparams: dict[str, Any]
    seed: int
    request_id: str
    rung: int = 0  # the rung its trial trains toward (or last reported at, once stopped)
    live: bool = True  # its trial is open: created and not yet closed or exited
    closing: bool = False
    exited: bool = False


@dataclass
class _Bracket:
    rung_lengths: list[int]
    max_trials: int
    created: int = 0
    rungs: list[list[Entry]] = field(default_factory=list)


def mode_brackets(mode: str, max_rungs: int) -> list[int]:
    """Rungs per bracket for a `mode`, most rungs (most early stopping) first."""
    if mode == "aggressive":
        rungs = [max_rungs]
    elif mode == "standard":
        rungs = list(range((max_rungs - 1) // 2 + 1, max_rungs + 1))
    elif mode == "conservative":
        rungs = list(range(1, max_rungs + 1))
    else:
        raise SearcherError(f"searcher.mode: unknown mode {mode!r}")
    return sorted(rungs, reverse=True)


def rungs_fitting(amount: float, divisor: float) -> int:
    """floor(log_divisor(amount)) + 1, without floating-point log error at exact powers."""
    rungs = 1
    while divisor**rungs <= amount:
        rungs += 1
    return rungs


def rung_lengths(max_length: int, divisor: float, num_rungs: int) -> list[int]:
    """Strictly increasing rung lengths ending at max_length (duplicates would validate twice)."""
    lengths = {max(int(max_length / divisor ** (num_rungs - 1 - k)), 1) for k in range(num_rungs)}
    return sorted(lengths)


def expected_batches_per_trial(lengths: list[int], divisor: float) -> float:
    """Batches one configuration costs on average when 1/divisor of each rung goes on."""
    total, previous = 0.0, 0
    for k, length in enumerate(lengths):
        total += (length - previous) / divisor**k
        previous = length
    return total


class ASHASearch(SearchMethod):
    def __init__(self, config: Any, seed: int) -> None:
        super().__init__(config, seed)
        searcher = config.searcher
        self.divisor = searcher.divisor
        self.stop_once = searcher.stop_once
        self.rescue_stragglers = not self.stop_once
        self.sign = 1.0 if config.smaller_is_better else -1.0
        max_length = config.max_length
        self.brackets = [
            _Bracket(rung_lengths(max_length, self.divisor, plan.num_rungs), plan.max_trials)
            for plan in self.plan_brackets()
        ]
        for bracket in self.brackets:
            bracket.rungs = [[] for _ in bracket.rung_lengths]
        self.expected_batches = sum(
            b.max_trials * expected_batches_per_trial(b.rung_lengths, self.divisor) for b in self.brackets
        )
        self.configs: list[_Config] = []
        self.by_request: dict[str, int] = {}
        self.batches_done = 0
        self.shutdown = False

    def plan_brackets(self) -> list[BracketPlan]:
        """Determined's `adaptive_asha`: rungs from mode or bracket_rungs, trials for equal compute."""
        searcher = self.config.searcher
        max_trials = searcher.max_trials or 0
        if searcher.bracket_rungs:
            brackets = sorted(searcher.bracket_rungs, reverse=True)
        else:
            max_rungs = min(
                searcher.max_rungs,
                rungs_fitting(self.config.max_length, self.divisor),
                rungs_fitting(max_trials, self.divisor),
            )
            brackets = mode_brackets(searcher.mode, max_rungs)
        brackets = brackets[:max_trials]
        weights = [self.divisor ** (r - 1) / r for r in brackets]
        trials = [max(int(w / sum(weights) * max_trials), 1) for w in weights]
        trials[0] += max(max_trials - sum(trials), 0)
        return [BracketPlan(r, n) for r, n in zip(brackets, trials, strict=True)]

    # ---- events ----------------------------------------------------------------------------

    def initial_operations(self) -> list[Operation]:
        return self._fill()

    def on_validation_completed(self, request_id: str, metric: float, length: int) -> list[Operation]:
        config = self._live_config(request_id)
        if config is None or config.closing:
            return []
        bracket = self.brackets[config.bracket]
        if length < bracket.rung_lengths[config.rung]:
            return []
        previous = bracket.rung_lengths[config.rung - 1] if config.rung else 0
        self.batches_done += bracket.rung_lengths[config.rung] - previous
        signed = None if math.isnan(metric) else self.sign * float(metric)
        ops: list[Operation] = []
        if self._record(config, signed):
            config.rung += 1
            ops.extend(self._train_to_rung(config))
        else:
            config.closing = True
            ops.append(Close(config.request_id))
        return ops + self._fill()

    def on_trial_closed(self, request_id: str) -> list[Operation]:
        config = self._live_config(request_id)
        if config is None:
            return []
        config.live = config.closing = False
        return self._fill()

    def on_trial_exited_early(self, request_id: str, reason: str = "") -> list[Operation]:
        config = self._live_config(request_id)
        if config is None:
            return []
        if not config.closing:
            self._record(config, None)  # ranks last in the rung it was training toward
        config.live = config.closing = False
        config.exited = True  # its checkpoint cannot be trusted: never resume it
        return self._fill()

    def _live_config(self, request_id: str) -> _Config | None:
        index = self.by_request.get(request_id)
        if index is None:
            return None
        config = self.configs[index]
        return config if config.live and config.request_id == request_id else None

    def on_trial_revived(self, request_id: str) -> list[Operation]:
        index = self.by_request.get(request_id)
        config = None if index is None else self.configs[index]
        if config is None or config.live or not config.exited or config.request_id != request_id:
            raise SearcherError(f"trial {request_id} is not one this search ended")
        # An exit while training toward a rung left a last-ranked result there: take it back, so the
        # trial's real result ranks when it gets there. An exit while closing left none to take back.
        entries = self.brackets[config.bracket].rungs[config.rung]
        placeholder = next((e for e in entries if e[0] == config.index and e[1] is None), None)
        if placeholder is not None:
            entries.remove(placeholder)
        config.live, config.exited, config.closing = True, False, placeholder is None
        self.shutdown = False
        return []

    # ---- ranking -----------------------------------------------------------------------------

    def _record(self, config: _Config, metric: float | None) -> bool:
        """Add a result to the config's rung; True when its trial goes straight on to the next rung."""
        bracket = self.brackets[config.bracket]
        entries = bracket.rungs[config.rung]
        position = _insert(entries, [config.index, metric, False])
        if config.rung == len(bracket.rung_lengths) - 1 or metric is None:
            return False
        keep = int(len(entries) / self.divisor)
        if self.stop_once:
            keep = max(keep, 1)
        entries[position][2] = position < keep
        return position < keep

    def _promotion(self, bracket: _Bracket, open_trials: int) -> tuple[int, int] | None:
        """(config, rung) of a stopped trial to resume: ASHA looks for promotions top rung first."""
        if self.stop_once:
            return None
        top = len(bracket.rung_lengths) - 1
        for rung in range(top - 1, -1, -1):
            entries = bracket.rungs[rung]
            for entry in entries[: int(len(entries) / self.divisor)]:
                if self._resumable(entry):
                    return entry[0], rung
        # A finished bracket with no result at its top rung resumes its best stopped trial.
        if (
            self.rescue_stragglers
            and open_trials == 0
            and bracket.created >= bracket.max_trials
            and not any(entry[1] is not None for entry in bracket.rungs[top])
        ):
            for rung in range(top - 1, -1, -1):
                for entry in bracket.rungs[rung]:
                    if self._resumable(entry):
                        return entry[0], rung
        return None

    def _resumable(self, entry: Entry) -> bool:
        config = self.configs[entry[0]]
        return not entry[2] and entry[1] is not None and not config.live and not config.exited

    def resumable_requests(self) -> set[str]:
        """Stopped trials ASHA may still promote (any unpromoted result below its bracket's top rung)."""
        if self.stop_once or self.shutdown:
            return set()
        return {
            self.configs[entry[0]].request_id
            for bracket in self.brackets
            for rung in bracket.rungs[:-1]
            for entry in rung
            if self._resumable(entry)
        }

    # ---- starting trials ---------------------------------------------------------------------

    def _fill(self) -> list[Operation]:
        ops: list[Operation] = []
        open_trials = [0] * len(self.brackets)
        for config in self.configs:
            if config.live:
                open_trials[config.bracket] += 1
        while self.has_room(sum(open_trials)):
            ready = [b for b in range(len(self.brackets)) if self._has_work(b, open_trials[b])]
            if not ready:
                break
            b = min(ready, key=lambda i: (open_trials[i], i))
            self._start(b, open_trials[b], ops)
            open_trials[b] += 1
        if not self.shutdown and not any(open_trials):
            if not any(self._has_work(b, 0) for b in range(len(self.brackets))):
                self.shutdown = True
                ops.append(Shutdown())
        return ops

    def _has_work(self, b: int, open_trials: int) -> bool:
        bracket = self.brackets[b]
        return bracket.created < bracket.max_trials or self._promotion(bracket, open_trials) is not None

    def _start(self, b: int, open_trials: int, ops: list[Operation]) -> None:
        bracket = self.brackets[b]
        promotion = self._promotion(bracket, open_trials)
        if promotion is not None:
            index, rung = promotion
            config = self.configs[index]
            for entry in bracket.rungs[rung]:
                if entry[0] == index:
                    entry[2] = True
            config.rung = rung + 1
            config.live = True
            ops.append(Resume(config.request_id))
        else:
            hparams = self.sample_hparams()
            request_id = self.new_request_id()
            config = _Config(len(self.configs), b, hparams, self.new_trial_seed(), request_id)
            self.configs.append(config)
            self.by_request[request_id] = config.index
            bracket.created += 1
            ops.append(Create(request_id, hparams, config.seed))
        ops.extend(self._train_to_rung(config))

    def _train_to_rung(self, config: _Config) -> list[Operation]:
        """Train to the config's rung; a trial bound for the top rung is closed at once, since its
        result there promotes nothing (the scheduler then sends its last workloads together)."""
        rungs = self.brackets[config.bracket].rung_lengths
        ops: list[Operation] = [ValidateAfter(config.request_id, rungs[config.rung])]
        if config.rung == len(rungs) - 1:
            ops.append(Close(config.request_id))
        return ops

    # ---- progress and snapshots --------------------------------------------------------------

    def progress(self) -> float:
        if self.shutdown:
            return 1.0
        if self.expected_batches <= 0:
            return 0.0
        return min(self.batches_done / self.expected_batches, 0.99)

    def method_state(self) -> dict[str, Any]:
        return {
            "configs": [asdict(c) for c in self.configs],
            "brackets": [asdict(b) for b in self.brackets],
            "by_request": dict(self.by_request),
            "batches_done": self.batches_done,
            "shutdown": self.shutdown,
        }

    def load_method_state(self, state: dict[str, Any]) -> None:
        self.configs = [_Config(**c) for c in state["configs"]]
        self.brackets = [_Bracket(**b) for b in state["brackets"]]
        self.by_request = dict(state["by_request"])
        self.batches_done = state["batches_done"]
        self.shutdown = state["shutdown"]


def _key(entry: Entry) -> tuple[bool, float]:
    return (entry[1] is None, entry[1] if entry[1] is not None else 0.0)


def _insert(entries: list[Entry], entry: Entry) -> int:
    """Insert keeping best-first order, after equal results (earlier ones win ties)."""
    position = bisect.bisect_right([_key(e) for e in entries], _key(entry))
    entries.insert(position, entry)
    return position


class AsyncHalvingSearch(ASHASearch):
    """Determined's `async_halving`: ASHA in one bracket of `num_rungs` rungs, all `max_trials` in it."""

    def plan_brackets(self) -> list[BracketPlan]:
        searcher = self.config.searcher
        return [BracketPlan(searcher.num_rungs or 0, searcher.max_trials or 0)]
