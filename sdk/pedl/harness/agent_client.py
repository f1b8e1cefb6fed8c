"""The harness's side of HarnessService (served by the agent on a Unix socket) and the store."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import grpc

from pedl import _grpc
from pedl.harness import timeline
from pedl.harness.store_retry import budget_from_env, unreachable, with_store_retries
from pedl.v1 import agent_pb2, common_pb2, harness_pb2, harness_pb2_grpc

T = TypeVar("T")

# How long to wait for the agent's socket to accept the first call.
CONNECT_TIMEOUT_S = 60.0
# A failure report is not worth delaying the harness's exit for long.
REPORT_TIMEOUT_S = 5.0


class AgentWorkloadSource:
    """A `WorkloadSource` backed by the agent's HarnessService."""

    def __init__(self, socket_path: str) -> None:
        self._channel = _grpc.channel(f"unix://{socket_path}")
        self._stub = harness_pb2_grpc.HarnessServiceStub(self._channel)

    def trial_info(self) -> harness_pb2.GetTrialInfoResponse:
        return self._stub.GetTrialInfo(
            harness_pb2.GetTrialInfoRequest(), timeout=CONNECT_TIMEOUT_S, wait_for_ready=True
        )

    # After the first call, the agent is known to be up: failing fast (instead of waiting for the
    # socket to come back) makes a harness whose agent died exit instead of lingering.
    def next_workload(self) -> common_pb2.Workload:
        return self._stub.NextWorkload(harness_pb2.NextWorkloadRequest()).workload

    def complete(self, result: common_pb2.WorkloadResult) -> None:
        self._stub.CompleteWorkload(
            harness_pb2.CompleteWorkloadRequest(result=result, timeline=timeline.drain())
        )

    def report_epoch_length(self, batches: int) -> None:
        """Tells the scheduler (through the agent) the trial's epoch in batches, before any workload."""
        self._stub.ReportEpochLength(harness_pb2.ReportEpochLengthRequest(batches=batches))

    def report_failure(self, failure: agent_pb2.FailureSignature) -> None:
        """Tells the agent where the error the harness exits with arose; best effort (the exit and
        its stderr are the report that always reaches the scheduler)."""
        try:
            self._stub.ReportFailure(
                harness_pb2.ReportFailureRequest(failure=failure), timeout=REPORT_TIMEOUT_S
            )
        except grpc.RpcError:
            pass

    def close(self) -> None:
        self._channel.close()


class StoreCheckpoints:
    """A `CheckpointStorage` backed by the checkpoint store service; every call waits out an outage of
    the store within the retry budget (`pedl.harness.store_retry`)."""

    def __init__(
        self,
        address: str,
        experiment_id: int,
        trial_id: int,
        storage: dict[str, Any] | None = None,
        retry_budget_s: float | None = None,
    ) -> None:
        self._address = address
        self._retry_budget_s = budget_from_env() if retry_budget_s is None else retry_budget_s
        # The experiment's checkpoint_storage config; None for the store's default.
        self._storage = storage
        self._experiment_id = experiment_id
        self._trial_id = trial_id
        self._client: Any = None

    def _store_client(self) -> Any:
        if not self._address:
            raise RuntimeError("the trial has no checkpoint_store_address, so checkpoints cannot be stored")
        if self._client is None:
            from pedl.checkpoints import CheckpointStoreClient

            self._client = CheckpointStoreClient(self._address)
        return self._client

    def store(
        self,
        directory: Path,
        total_batches: int,
        uuid: str = "",
        extra_metadata: dict[str, str] | None = None,
    ) -> common_pb2.Checkpoint:
        """`uuid`: one chosen beforehand (a Core API script's storage_id); else the store picks one."""
        metadata = {**checkpoint_metadata(directory), **(extra_metadata or {})}
        return self._retrying(
            lambda: self._store_client().upload(
                directory,
                experiment_id=self._experiment_id,
                trial_id=self._trial_id,
                total_batches=total_batches,
                metadata=metadata,
                storage=self._storage,
                uuid=uuid,
            ),
            f"uploading the checkpoint at batch {total_batches}",
        )

    def get(self, uuid: str) -> common_pb2.Checkpoint:
        return self._retrying(lambda: self._store_client().get(uuid), f"reading checkpoint {uuid}")

    def fetch(self, uuid: str, directory: Path) -> None:
        self._retrying(lambda: self._store_client().download(uuid, directory), f"restoring checkpoint {uuid}")

    def store_tensorboard_files(self, files: list[tuple[str, Path, int]]) -> int:
        """Stores the trial's own TensorBoard files (relative path, file, bytes to send)."""
        from pedl.checkpoints import tensorboard

        return self._retrying(
            lambda: tensorboard.upload(
                self._store_client(), self._experiment_id, self._trial_id, files, self._storage
            ),
            f"uploading {len(files)} TensorBoard file(s)",
        )

    def _retrying(self, call: Callable[[], T], what: str) -> T:
        def attempt() -> T:
            try:
                return call()
            except Exception as e:
                if unreachable(e):
                    self.close()  # a fresh channel next time, not one in gRPC's reconnect backoff
                raise

        return with_store_retries(attempt, what, self._retry_budget_s, on_retry=_say)

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None


def _say(line: str) -> None:
    """To the trial's log (the agent relays stderr), so `pedl trial logs` shows why it waits."""
    print(f"pedl.harness: waiting for the checkpoint store: {line}", file=sys.stderr, flush=True)


def checkpoint_metadata(directory: Path) -> dict[str, str]:
    """The scalar fields of the checkpoint's metadata.json, as the store's string map."""
    file = directory / "metadata.json"
    if not file.is_file():
        return {}
    data = json.loads(file.read_text())
    return {k: str(v) for k, v in data.items() if isinstance(v, (str, int, float, bool))}
