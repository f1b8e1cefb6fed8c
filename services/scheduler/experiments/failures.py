"""When restarting a failed trial cannot help: its runs fail the same way before training anything.

A model definition that raises in `build_model` or `make_data_loaders` raises there on every run,
so `max_restarts` identical tracebacks only delay the ERROR. The harness reports where its error
arose in the user's code (`FailureSignature`: exception type and innermost model-definition frame)
and the agent adds whether the run had begun training. Infrastructure failures (a lost agent, a
store out of reach, a lost peer) carry no signature, so they never count, and a run that trained
may have failed on something a restart changes (data order, a resource), so it never counts either.
"""

from __future__ import annotations

from dataclasses import dataclass

from pedl.v1 import agent_pb2


@dataclass(frozen=True)
class RunFailure:
    exception_type: str
    location: str  # "file.py:LINE" inside the model definition
    trained: bool
    # The harness knows no restart can help (ranks that cannot reach each other): end at once.
    permanent: bool = False

    def describe(self) -> str:
        where = f" at {self.location}" if self.location else ""
        return f"{self.exception_type.removeprefix('builtins.')}{where}"


def run_failure(exited: agent_pb2.TrialExited) -> RunFailure | None:
    """The signature a failed run's exit carries; None when it carries none (or an incomplete one)."""
    if not exited.HasField("failure"):
        return None
    f = exited.failure
    if f.permanent and f.exception_type:
        return RunFailure(f.exception_type, f.location, f.trained, permanent=True)
    if not f.exception_type or not f.location:
        return None
    return RunFailure(f.exception_type, f.location, f.trained)


def fails_deterministically(previous: RunFailure | None, current: RunFailure | None) -> bool:
    """Whether two consecutive runs failed with the same error at the same place before training."""
    if previous is None or current is None or previous.trained or current.trained:
        return False
    return (previous.exception_type, previous.location) == (current.exception_type, current.location)


HARNESS_LINE = "pedl.harness: "


def cause_line(error: str) -> str:
    """The line of a trial's error that says why it failed, for the experiment's own error: the
    harness's one-line cause where it gave one (a model definition written for older libraries,
    pedl.harness.incompatibility), which other output on stderr may precede; else the first line."""
    lines = [line.strip() for line in error.strip().splitlines() if line.strip()]
    said = [line for line in lines if line.startswith(HARNESS_LINE)]
    return said[-1].removeprefix(HARNESS_LINE) if said else (lines[0] if lines else "")
