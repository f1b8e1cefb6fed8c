"""`pbt`: population-based training (Jaderberg et al., 2017) with truncation selection.

`population_size` trials train one round (`length_per_round`: config.max_length, in its length_unit) at a
time. When the whole population has reported a round, the bottom `truncate_fraction` is closed and
replaced by copies of the top fraction with explored hyperparameters; everyone else trains on.

A copy is created with `checkpoint_from` = its parent, so it starts from the parent's latest
checkpoint, weights and batch count, and its lengths continue the parent's: after round k every
member, old or new, is asked to validate at (k + 2) * length_per_round batches. The whole search
is num_rounds * length_per_round batches deep.

Explore follows Determined: each hyperparameter is resampled with `resample_probability`, else
int/double/log values are multiplied by 1 - or 1 + `perturb_factor` (even odds; ints round away
from the old value) and clamped to their bounds; categorical and const values are kept.
A trial that exits early ranks last in its round and is always replaced; if more members exit
than `truncate_fraction` covers, the best survivors are copied more than once.
"""

from __future__ import annotations

import copy
import math
from typing import Any

from pedl.config.hyperparameters import HP_TYPES, sample
from pedl.searcher._base import SearcherError, SearchMethod
from pedl.searcher._ops import Close, Create, Operation, Shutdown, ValidateAfter


class PBTSearch(SearchMethod):
    def __init__(self, config: Any, seed: int) -> None:
        super().__init__(config, seed)
        searcher = config.searcher
        self.population_size = searcher.population_size
        self.num_rounds = searcher.num_rounds
        self.round_length = config.max_length
        self.truncate_fraction = searcher.truncate_fraction
        self.resample_probability = searcher.resample_probability
        self.perturb_factor = searcher.perturb_factor
        self.sign = 1.0 if config.smaller_is_better else -1.0
        self.round = 0
        # One slot per population member, holding its current trial's request id.
        self.members: list[str] = []
        self.hparams: dict[str, dict[str, Any]] = {}  # of current members
        self.results: dict[str, float | None] = {}  # None: exited early (ranks last)
        self.open: list[str] = []
        self.finished = False
        self.shutdown = False
        self.failed = False

    def initial_operations(self) -> list[Operation]:
        ops: list[Operation] = []
        for _ in range(self.population_size):
            hparams = self.sample_hparams()
            self.members.append(self._create(hparams, None, ops))
        return ops

    def on_validation_completed(self, request_id: str, metric: float, length: int) -> list[Operation]:
        if request_id not in self.members or request_id in self.results or self.finished:
            return []
        if length < self._target():
            return []
        self.results[request_id] = None if math.isnan(metric) else self.sign * float(metric)
        return self._maybe_end_round()

    def on_trial_closed(self, request_id: str) -> list[Operation]:
        if request_id in self.open:
            self.open.remove(request_id)
        return self._maybe_shutdown()

    def on_trial_exited_early(self, request_id: str, reason: str = "") -> list[Operation]:
        if request_id not in self.open:
            return []
        self.open.remove(request_id)
        ops: list[Operation] = []
        if request_id in self.members and request_id not in self.results and not self.finished:
            self.results[request_id] = None
            ops = self._maybe_end_round()
        return ops + self._maybe_shutdown()

    def on_trial_revived(self, request_id: str) -> list[Operation]:
        # Only a member of the current round can come back: a later round already replaced it.
        exited = request_id in self.results and self.results[request_id] is None
        if request_id not in self.members or request_id in self.open or not exited:
            raise SearcherError(f"trial {request_id} is not a member of the last round this search ended")
        del self.results[request_id]
        self.open.append(request_id)
        self.finished = self.shutdown = self.failed = False  # the round ends again with its result
        return []

    def _target(self) -> int:
        return (self.round + 1) * self.round_length

    def _maybe_end_round(self) -> list[Operation]:
        if len(self.results) < len(self.members):
            return []
        ranked = sorted(
            range(len(self.members)),
            key=lambda i: _rank_key(self.results[self.members[i]], i),
        )
        survivors = [i for i in ranked if self.results[self.members[i]] is not None]
        ops: list[Operation] = []
        if self.round + 1 >= self.num_rounds or not survivors:
            self.finished = True
            self.failed = not survivors
            ops.extend(Close(m) for m in self.members if m in self.open)
            return ops + self._maybe_shutdown()
        exited = len(ranked) - len(survivors)
        replace = ranked[len(ranked) - max(int(self.truncate_fraction * len(ranked)), exited) :]
        parents = [survivors[k % len(survivors)] for k in range(len(replace))]
        self.round += 1
        self.results = {}
        ops.extend(Close(self.members[slot]) for slot in replace if self.members[slot] in self.open)
        continuing = [self.members[i] for i in range(len(self.members)) if i not in replace]
        replaced = [self.members[slot] for slot in replace]
        for slot, parent_slot in zip(replace, parents, strict=True):
            parent = self.members[parent_slot]
            hparams = self._explore(self.config.hyperparameters, self.hparams[parent])
            self.members[slot] = self._create(hparams, parent, ops)
        for request_id in replaced:
            del self.hparams[request_id]  # only members can become parents
        ops.extend(ValidateAfter(request_id, self._target()) for request_id in continuing)
        return ops

    def _create(self, hparams: dict[str, Any], parent: str | None, ops: list[Operation]) -> str:
        request_id = self.new_request_id()
        self.hparams[request_id] = hparams
        self.open.append(request_id)
        ops.append(Create(request_id, hparams, self.new_trial_seed(), checkpoint_from=parent))
        ops.append(ValidateAfter(request_id, self._target()))
        return request_id

    def _maybe_shutdown(self) -> list[Operation]:
        if self.finished and not self.open and not self.shutdown:
            self.shutdown = True
            return [Shutdown(failure=self.failed)]
        return []

    # ---- explore -----------------------------------------------------------------------------

    def _explore(self, space: dict[str, Any], values: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, leaf in space.items():
            if not _is_leaf(leaf):
                out[name] = self._explore(leaf, values[name])
            elif leaf["type"] == "const":
                out[name] = copy.deepcopy(leaf["val"])
            elif self.rng.random() < self.resample_probability:
                out[name] = sample({name: leaf}, self.rng)[name]
            else:
                out[name] = self._perturb(leaf, values[name])
        return out

    def _perturb(self, leaf: dict[str, Any], value: Any) -> Any:
        kind = leaf["type"]
        if kind == "categorical":
            return copy.deepcopy(value)
        decrease = self.rng.random() < 0.5
        factor = 1 - self.perturb_factor if decrease else 1 + self.perturb_factor
        if kind == "int":
            scaled = math.floor(value * factor) if decrease else math.ceil(value * factor)
            return min(max(int(scaled), leaf["minval"]), leaf["maxval"])
        lo, hi = leaf["minval"], leaf["maxval"]
        if kind == "log":
            lo, hi = float(leaf["base"]) ** lo, float(leaf["base"]) ** hi
        return float(min(max(value * factor, lo), hi))

    # ---- progress and snapshots --------------------------------------------------------------

    def progress(self) -> float:
        if self.shutdown:
            return 1.0
        done = self.round * self.population_size + len(self.results)
        return min(done / (self.num_rounds * self.population_size), 0.99)

    def method_state(self) -> dict[str, Any]:
        return {
            "round": self.round,
            "members": list(self.members),
            "hparams": copy.deepcopy(self.hparams),
            "results": dict(self.results),
            "open": list(self.open),
            "finished": self.finished,
            "shutdown": self.shutdown,
            "failed": self.failed,
        }

    def load_method_state(self, state: dict[str, Any]) -> None:
        self.round = state["round"]
        self.members = list(state["members"])
        self.hparams = copy.deepcopy(state["hparams"])
        self.results = dict(state["results"])
        self.open = list(state["open"])
        self.finished = state["finished"]
        self.shutdown = state["shutdown"]
        self.failed = state["failed"]


def _rank_key(result: float | None, slot: int) -> tuple[bool, float, int]:
    return (result is None, result if result is not None else 0.0, slot)


def _is_leaf(value: dict[str, Any]) -> bool:
    return isinstance(value.get("type"), str) and value["type"] in HP_TYPES
