"""`max_concurrent_trials`: a wrapper that bounds the open trials of any search method.

Search methods decide what to try; this wrapper decides how many run at once, as Ray Tune's
`ConcurrencyLimiter` does around any searcher. A method that picks *which* trial to start when a
slot frees (ASHA promotes a stopped trial before it samples a new one, and balances brackets) asks
`has_room(open_trials)` before each start; the wrapper answers it from the limit. A method that
does not ask (PBT, a custom one) has the Creates beyond the limit held here, with the operations
that follow them, and released oldest first as trials close or exit. Either way the scheduler
never holds more than the limit, and the held operations travel in the snapshot, so a restart
(kill -9, then snapshot plus journal replay) resumes with the same trials waiting.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from pedl.searcher._base import SearchMethod
from pedl.searcher._ops import Close, Create, Operation, Resume, Shutdown, ValidateAfter

_OP_TYPES: dict[str, type] = {
    "Create": Create,
    "Resume": Resume,
    "ValidateAfter": ValidateAfter,
    "Close": Close,
}


def limit_concurrency(method: SearchMethod, config: Any) -> SearchMethod:
    """`method` bounded by the config's `searcher.max_concurrent_trials` (0 or absent: no limit)."""
    limit = config.searcher.max_concurrent_trials
    return ConcurrencyLimiter(method, limit) if limit > 0 else method


class ConcurrencyLimiter(SearchMethod):
    """At most `limit` trials open at once; everything else is the wrapped method's own."""

    def __init__(self, method: SearchMethod, limit: int) -> None:
        if limit <= 0:
            raise ValueError(f"a concurrency limit must be at least 1, got {limit}")
        # No SearchMethod.__init__: the random generator and request ids are the method's.
        self.method = method
        self.config = method.config
        self.limit = limit
        self.live: dict[str, None] = {}  # released trials not yet closed or exited (ordered set)
        self.held: dict[str, list[Operation]] = {}  # per request id, in creation order
        method.bound_by(self._method_has_room)

    def _method_has_room(self, open_trials: int) -> bool:
        return open_trials < self.limit

    # ---- events: the method's answer, with Creates beyond the limit held back ------------------

    def initial_operations(self) -> list[Operation]:
        return self._pass(self.method.initial_operations())

    def on_trial_created(self, request_id: str) -> list[Operation]:
        return self._pass(self.method.on_trial_created(request_id))

    def on_validation_completed(self, request_id: str, metric: float, length: int) -> list[Operation]:
        return self._pass(self.method.on_validation_completed(request_id, metric, length))

    def on_trial_closed(self, request_id: str) -> list[Operation]:
        self.live.pop(request_id, None)
        return self._pass(self.method.on_trial_closed(request_id))

    def on_trial_exited_early(self, request_id: str, reason: str = "") -> list[Operation]:
        self.live.pop(request_id, None)
        return self._pass(self.method.on_trial_exited_early(request_id, reason))

    def on_trial_revived(self, request_id: str) -> list[Operation]:
        self.live[request_id] = None  # open again: it counts against the limit
        return self._pass(self.method.on_trial_revived(request_id))

    def progress(self) -> float:
        return self.method.progress()

    def resumable_requests(self) -> set[str]:
        # The method's: held trials have no checkpoint yet, so only its stopped trials count.
        return self.method.resumable_requests()

    def __getattr__(self, name: str) -> Any:
        """Whatever else the scheduler asks of a search method (its length unit, its rungs) is the
        wrapped method's."""
        if name == "method":  # not yet set (copy, unpickling): no recursion
            raise AttributeError(name)
        return getattr(self.method, name)

    def _pass(self, ops: list[Operation]) -> list[Operation]:
        out: list[Operation] = []
        for op in ops:
            if isinstance(op, Shutdown):
                out.append(op)
            elif (
                isinstance(op, (Create, Resume))
                and op.request_id not in self.held
                and len(self.live) < self.limit
            ):
                self.live[op.request_id] = None  # a resumed trial is open again: it counts too
                out.append(op)
            elif isinstance(op, (Create, Resume)) or op.request_id in self.held:
                self.held.setdefault(op.request_id, []).append(op)
            else:
                out.append(op)
        while self.held and len(self.live) < self.limit:
            request_id = next(iter(self.held))
            self.live[request_id] = None
            out.extend(self.held.pop(request_id))
        return out

    # ---- snapshots: the method's, plus what is held here ---------------------------------------

    def snapshot(self) -> dict[str, Any]:
        snapshot = self.method.snapshot()
        snapshot["limiter"] = {
            "live": list(self.live),
            "held": [[rid, [_encode(op) for op in ops]] for rid, ops in self.held.items()],
        }
        return snapshot

    def restore(self, snapshot: dict[str, Any]) -> None:
        self.method.restore(snapshot)
        state = snapshot.get("limiter", {})  # absent in snapshots written before this wrapper
        self.live = dict.fromkeys(state.get("live", ()))
        self.held = {rid: [_decode(op) for op in ops] for rid, ops in state.get("held", ())}

    def method_state(self) -> dict[str, Any]:
        return self.method.method_state()

    def load_method_state(self, state: dict[str, Any]) -> None:
        self.method.load_method_state(state)


def _encode(op: Operation) -> dict[str, Any]:
    return {"op": type(op).__name__, **asdict(op)}


def _decode(data: dict[str, Any]) -> Operation:
    fields = dict(data)
    return _OP_TYPES[fields.pop("op")](**fields)
