"""The Core API link is gRPC (CoreApiService): a script's calls reach the harness's handlers with
their values intact, refusals come back as the harness's words, and a caller without the key the
script's environment holds is turned away."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pedl.harness.compat import ensure_determined_importable
from pedl.harness.core_api_server import CoreApiServer
from pedl.harness.core_api_wire import RPCS, SERVICE

ensure_determined_importable()

from determined.core._link import CoreApiError, HarnessLink  # noqa: E402


def _refuse(**_: Any) -> None:
    raise ValueError("checkpoint.delete: a trial's checkpoints are deleted by the experiment's GC")


def test_every_call_name_has_an_rpc_and_every_rpc_a_call() -> None:
    assert sorted(RPCS.values()) == sorted(m.name for m in SERVICE.methods)


def test_calls_answers_and_refusals_cross_the_socket(tmp_path: Path) -> None:
    seen: list[tuple[str, dict[str, Any]]] = []

    def record(name: str, answer: Any) -> Any:
        def handler(**kwargs: Any) -> Any:
            seen.append((name, kwargs))
            return answer

        return handler

    handlers = {
        "report": record("report", None),
        "checkpoint_begin": record("begin", {"storage_id": "u-1", "path": "/tmp/u-1"}),
        "checkpoint_commit": record("commit", "u-1"),
        "checkpoint_metadata": record("metadata", {"steps_completed": 5, "nested": {"a": [1, 2.5]}}),
        "should_preempt": record("preempt", True),
        "next_operation": record("next", None),
        "configured_units": record("units", "UNIT_BATCHES"),
        "tensorboard_upload": record("tb", 2),
        "checkpoint_delete": _refuse,
    }
    server = CoreApiServer(tmp_path / "core.sock", handlers)
    link = HarnessLink(str(server.socket_path), server.key)
    try:
        assert (
            link.call("report", group="training", steps_completed=3, metrics={"loss": 1, "acc": 0.5}) is None
        )
        assert seen[-1] == (
            "report",
            {"group": "training", "steps_completed": 3, "metrics": {"loss": 1, "acc": 0.5}},
        )
        assert link.call("checkpoint_begin") == {"storage_id": "u-1", "path": "/tmp/u-1"}
        assert link.call("checkpoint_commit", storage_id="u-1", path="/tmp/u-1", metadata={"k": 7}) == "u-1"
        assert seen[-1][1]["metadata"] == {"k": 7}
        metadata = link.call("checkpoint_metadata", storage_id="u-1")
        assert metadata == {"steps_completed": 5, "nested": {"a": [1, 2.5]}}
        assert isinstance(metadata["steps_completed"], int)  # JSON on the wire: ints stay ints
        assert link.call("should_preempt") is True
        assert link.call("next_operation") is None
        assert link.call("configured_units") == "UNIT_BATCHES"
        assert link.call("tensorboard_upload", files=[["/w/tb/e1", "e1"]]) == 2
        assert seen[-1] == ("tb", {"files": [["/w/tb/e1", "e1"]]})
        with pytest.raises(CoreApiError, match="deleted by the experiment's GC"):
            link.call("checkpoint_delete", storage_id="u-1")
        with pytest.raises(CoreApiError, match="unknown Core API call 'no_such_call'"):
            link.call("no_such_call")
        with pytest.raises(CoreApiError, match="unknown Core API call 'progress'"):
            link.call("progress", progress=0.5)  # a call the harness has no handler for
    finally:
        link.close()
        server.close()


def test_a_caller_without_the_key_is_refused(tmp_path: Path) -> None:
    calls: list[str] = []
    server = CoreApiServer(tmp_path / "core.sock", {"should_preempt": lambda: calls.append("x") or False})
    intruder = HarnessLink(str(server.socket_path), b"not the key")
    try:
        with pytest.raises(CoreApiError, match="Core API key is missing or wrong"):
            intruder.call("should_preempt")
        assert calls == []
    finally:
        intruder.close()
        server.close()
    assert not server.socket_path.exists()
