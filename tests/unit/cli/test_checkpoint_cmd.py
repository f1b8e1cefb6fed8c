"""`pedl checkpoint list|download|delete` and pedl.experimental.client against an in-process fake
scheduler (with GetClusterInfo) and a fake checkpoint store served on the same port."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from concurrent import futures
from contextlib import contextmanager
from pathlib import Path

import grpc
import pytest

from pedl.cli import cmd_checkpoint
from pedl.cli.main import build_parser, main
from pedl.experimental import client as exp_client
from pedl.v1 import (
    checkpoint_store_pb2,
    checkpoint_store_pb2_grpc,
    common_pb2,
    scheduler_pb2,
    scheduler_pb2_grpc,
)

from .fake_scheduler import FakeScheduler, Script, trial, validation

COMPLETED = common_pb2.CHECKPOINT_STATE_COMPLETED
FILES = {"state.pt": b"weights" * 100, "sub/metadata.json": b'{"trial_class": "m:T"}'}


def stored_checkpoint(uuid: str, trial_id: int, batches: int) -> common_pb2.Checkpoint:
    files = [
        common_pb2.FileInfo(path=p, size=len(d), sha256=hashlib.sha256(d).hexdigest())
        for p, d in FILES.items()
    ]
    return common_pb2.Checkpoint(
        uuid=uuid,
        experiment_id=7,
        trial_id=trial_id,
        total_batches=batches,
        files=files,
        state=COMPLETED,
        total_size=sum(f.size for f in files),
        created_at="2024-05-01T12:00:00Z",
    )


class FakeStore(checkpoint_store_pb2_grpc.CheckpointStoreServiceServicer):
    def __init__(self, checkpoints: list[common_pb2.Checkpoint]) -> None:
        self.checkpoints = {c.uuid: c for c in checkpoints}
        self.deleted: list[str] = []

    def _find(self, uuid: str, context: grpc.ServicerContext) -> common_pb2.Checkpoint:
        if uuid not in self.checkpoints:
            context.abort(grpc.StatusCode.NOT_FOUND, f"checkpoint {uuid} not found")
        return self.checkpoints[uuid]

    def DownloadCheckpoint(self, request, context):  # type: ignore[no-untyped-def]  # noqa: N802
        checkpoint = self._find(request.uuid, context)
        yield checkpoint_store_pb2.DownloadCheckpointResponse(checkpoint=checkpoint)
        for info in checkpoint.files:
            chunk = checkpoint_store_pb2.FileChunk(
                path=info.path, offset=0, data=FILES[info.path], last=True, sha256=info.sha256
            )
            yield checkpoint_store_pb2.DownloadCheckpointResponse(chunk=chunk)

    def GetCheckpoint(self, request, context):  # type: ignore[no-untyped-def]  # noqa: N802
        return checkpoint_store_pb2.GetCheckpointResponse(checkpoint=self._find(request.uuid, context))

    def DeleteCheckpoint(self, request, context):  # type: ignore[no-untyped-def]  # noqa: N802
        self._find(request.uuid, context)
        del self.checkpoints[request.uuid]
        self.deleted.append(request.uuid)
        return checkpoint_store_pb2.DeleteCheckpointResponse()


class ClusterScheduler(FakeScheduler):
    """FakeScheduler plus GetClusterInfo naming `store_address`, and DeleteCheckpoints, which deletes
    through `store` unless the uuid is in `needed` (the real scheduler's checks are tested there)."""

    def __init__(self, script: Script, store: FakeStore) -> None:
        super().__init__(script)
        self.store_address = ""
        self.store = store
        self.needed: dict[str, str] = {}

    def DeleteCheckpoints(self, request, context):  # type: ignore[no-untyped-def]  # noqa: N802
        found = [self.store._find(uuid, context) for uuid in request.checkpoint_uuids]
        for uuid in request.checkpoint_uuids:
            if uuid in self.needed:
                context.abort(
                    grpc.StatusCode.FAILED_PRECONDITION,
                    f"checkpoint {uuid} cannot be deleted now: {self.needed[uuid]}",
                )
        for c in found:
            self.store.DeleteCheckpoint(checkpoint_store_pb2.DeleteCheckpointRequest(uuid=c.uuid), context)
        return scheduler_pb2.DeleteCheckpointsResponse(checkpoints=found)

    def GetClusterInfo(self, request, context):  # type: ignore[no-untyped-def]  # noqa: N802
        return scheduler_pb2.GetClusterInfoResponse(
            version="test", checkpoint_store_address=self.store_address
        )


@contextmanager
def serve(
    script: Script, store: FakeStore, store_address: str | None = None, needed: dict[str, str] | None = None
) -> Iterator[str]:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    scheduler = ClusterScheduler(script, store)
    scheduler.needed = dict(needed or {})
    scheduler_pb2_grpc.add_SchedulerServiceServicer_to_server(scheduler, server)
    checkpoint_store_pb2_grpc.add_CheckpointStoreServiceServicer_to_server(store, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    address = f"127.0.0.1:{port}"
    scheduler.store_address = address if store_address is None else store_address
    try:
        yield address
    finally:
        server.stop(0)


# Trial 3: checkpoints at 100 (error 0.4) and 200 (error 0.2, best); trial 4: at 100 (error 0.3) and
# at 150 with no validation there.
def experiment_script() -> tuple[Script, FakeStore]:
    ckpts = {
        3: [stored_checkpoint("c3-100", 3, 100), stored_checkpoint("c3-200", 3, 200)],
        4: [stored_checkpoint("c4-100", 4, 100), stored_checkpoint("c4-150", 4, 150)],
    }
    experiment = scheduler_pb2.GetExperimentResponse(
        experiment=scheduler_pb2.Experiment(
            id=7, state=common_pb2.EXPERIMENT_STATE_COMPLETED, searcher_metric="error", smaller_is_better=True
        ),
        trials=[
            trial(3, state=common_pb2.TRIAL_STATE_COMPLETED),
            trial(4, state=common_pb2.TRIAL_STATE_COMPLETED),
        ],
    )
    details = {
        3: scheduler_pb2.GetTrialResponse(
            trial=trial(3),
            validations=[validation(1, 100, error=0.4), validation(2, 200, error=0.2)],
            checkpoints=ckpts[3],
        ),
        4: scheduler_pb2.GetTrialResponse(
            trial=trial(4), validations=[validation(1, 100, error=0.3)], checkpoints=ckpts[4]
        ),
    }
    script = Script(experiments=[experiment], trials={k: [v] for k, v in details.items()})
    return script, FakeStore([c for cs in ckpts.values() for c in cs])


def run(*argv: str, store_address: str | None = None) -> tuple[int, FakeStore]:
    script, store = experiment_script()
    with serve(script, store, store_address) as address:
        return main(["--master", address, *argv]), store


def test_parser() -> None:
    args = build_parser().parse_args(["checkpoint", "download", "abc-1", "-o", "out"])
    assert (args.func, args.uuid, args.output_dir) == (cmd_checkpoint.download_checkpoint, "abc-1", "out")
    args = build_parser().parse_args(["checkpoint", "list", "7"])
    assert (args.func, args.experiment_id) == (cmd_checkpoint.list_checkpoints, 7)
    args = build_parser().parse_args(["checkpoint", "delete", "abc,def"])
    assert (args.func, args.uuids) == (cmd_checkpoint.delete_checkpoint, ["abc", "def"])


@pytest.mark.parametrize("bad", ["../etc", "", "a b", "/abs"])
def test_bad_uuids_are_usage_errors(bad: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        build_parser().parse_args(["checkpoint", "delete", bad])
    assert exit_info.value.code == 2
    assert "expected a checkpoint UUID" in capsys.readouterr().err


def test_list_shows_every_trials_checkpoints_with_the_metric(capsys: pytest.CaptureFixture[str]) -> None:
    code, _ = run("checkpoint", "list", "7")
    assert code == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["UUID", "TRIAL", "BATCHES", "STATE", "SIZE", "error", "CREATED"]
    rows = [line.split() for line in lines[2:]]
    created = ["2024-05-01", "12:00:00"]
    assert rows == [
        ["c3-100", "3", "100", "COMPLETED", "722", "B", "0.4", *created],
        ["c3-200", "3", "200", "COMPLETED", "722", "B", "0.2", *created],
        ["c4-100", "4", "100", "COMPLETED", "722", "B", "0.3", *created],
        ["c4-150", "4", "150", "COMPLETED", "722", "B", *created],  # no validation at batch 150
    ]


def test_list_of_an_experiment_without_checkpoints(capsys: pytest.CaptureFixture[str]) -> None:
    script = Script(
        experiments=[scheduler_pb2.GetExperimentResponse(experiment=scheduler_pb2.Experiment(id=7))]
    )
    with serve(script, FakeStore([])) as address:
        assert main(["--master", address, "checkpoint", "list", "7"]) == 0
    assert capsys.readouterr().out.strip() == "Experiment 7 has no checkpoints."


def test_list_of_an_unknown_experiment(capsys: pytest.CaptureFixture[str]) -> None:
    with serve(Script(), FakeStore([])) as address:
        assert main(["--master", address, "checkpoint", "list", "99"]) == 1
    assert capsys.readouterr().err.strip() == "error: experiment 99 not found"


def test_download_writes_the_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "out"
    code, _ = run("checkpoint", "download", "c3-200", "-o", str(target))
    assert code == 0
    assert (target / "state.pt").read_bytes() == FILES["state.pt"]
    assert (target / "sub" / "metadata.json").read_bytes() == FILES["sub/metadata.json"]
    out = capsys.readouterr().out.strip()
    assert out == f"Downloaded checkpoint c3-200 (trial 3, batches 200, 2 files, 722 B) to {target}"


def test_download_defaults_to_checkpoints_uuid(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert run("checkpoint", "download", "c4-100")[0] == 0
    assert (tmp_path / "checkpoints" / "c4-100" / "state.pt").exists()


def test_download_of_an_unknown_uuid(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _ = run("checkpoint", "download", "nope", "-o", str(tmp_path / "out"))
    assert code == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: checkpoint nope not found in the checkpoint store at 127.0.0.1:")
    assert not (tmp_path / "out").exists()


def test_download_into_a_non_empty_directory_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "keep.txt").write_text("mine")
    code, _ = run("checkpoint", "download", "c3-200", "-o", str(tmp_path))
    assert code == 2
    assert capsys.readouterr().err.strip() == (
        f"error: output directory {tmp_path} exists and is not an empty directory"
    )
    assert [p.name for p in tmp_path.iterdir()] == ["keep.txt"]


def test_explicit_store_address_skips_the_schedulers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], unused_address: str
) -> None:
    # The scheduler names an address nothing listens on; --checkpoint-store overrides it.
    script, store = experiment_script()
    with serve(script, store, store_address=unused_address) as address:
        argv = ["--master", address, "checkpoint", "download", "c3-100", "-o"]
        assert main([*argv, str(tmp_path / "a")]) == 1
        assert "unreachable" in capsys.readouterr().err
        assert main([*argv, str(tmp_path / "b"), "--checkpoint-store", address]) == 0
    assert (tmp_path / "b" / "state.pt").read_bytes() == FILES["state.pt"]


def test_delete_goes_through_the_scheduler(capsys: pytest.CaptureFixture[str]) -> None:
    code, store = run("checkpoint", "delete", "c4-150,c3-100")
    assert code == 0 and store.deleted == ["c4-150", "c3-100"]
    assert capsys.readouterr().out.splitlines() == [
        "Deleted checkpoint c4-150 (trial 4, batches 150)",
        "Deleted checkpoint c3-100 (trial 3, batches 100)",
    ]


def test_delete_the_scheduler_refuses_names_why(capsys: pytest.CaptureFixture[str]) -> None:
    script, store = experiment_script()
    why = "trial 4 is running and restarts from it after a failure"
    with serve(script, store, needed={"c4-150": why}) as address:
        assert main(["--master", address, "checkpoint", "delete", "c4-150"]) == 1
    assert capsys.readouterr().err.strip() == f"error: checkpoint c4-150 cannot be deleted now: {why}"
    assert store.deleted == []


def test_delete_of_an_unknown_uuid(capsys: pytest.CaptureFixture[str]) -> None:
    code, store = run("checkpoint", "delete", "nope")
    assert code == 1 and store.deleted == []
    assert "error: checkpoint nope not found" in capsys.readouterr().err


def test_scheduler_without_a_store(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _ = run("checkpoint", "download", "c4-150", "-o", str(tmp_path / "x"), store_address="")
    assert code == 1
    assert "names no checkpoint store" in capsys.readouterr().err


def test_scheduler_unreachable(capsys: pytest.CaptureFixture[str], unused_address: str) -> None:
    assert main(["--master", unused_address, "checkpoint", "delete", "x"]) == 1
    assert "cannot reach the pedl scheduler" in capsys.readouterr().err


# pedl.experimental.client against the same fakes.


def test_client_top_checkpoint_and_download(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    script, store = experiment_script()
    with serve(script, store) as address:
        monkeypatch.setenv("PEDL_MASTER", address)
        with exp_client.get_experiment(7) as experiment:
            assert experiment.state == "COMPLETED"
            assert experiment.wait(timeout=5) == "COMPLETED"
            assert [t.id for t in experiment.trials()] == [3, 4]
            top = experiment.top_checkpoint()
            assert (top.uuid, top.trial_id, top.total_batches) == ("c3-200", 3, 200)
            assert top.validation_metrics == {"error": 0.2}
            path = top.download(tmp_path / "best")
            assert Path(path) == (tmp_path / "best").absolute()
            assert (Path(path) / "state.pt").read_bytes() == FILES["state.pt"]
            checkpoints = experiment.trials()[1].checkpoints()
            assert [(c.uuid, c.validation_metrics) for c in checkpoints] == [
                ("c4-100", {"error": 0.3}),
                ("c4-150", None),
            ]
            monkeypatch.chdir(tmp_path)
            default = checkpoints[0].download()
            assert default == str((tmp_path / "checkpoints" / "c4-100").absolute())
            assert checkpoints[0].download() == default  # reused, not downloaded again


def test_client_larger_is_better(monkeypatch: pytest.MonkeyPatch) -> None:
    script, store = experiment_script()
    script.experiments[0].experiment.smaller_is_better = False
    with serve(script, store) as address:
        assert exp_client.get_experiment(7, master=address).top_checkpoint().uuid == "c3-100"


def test_client_without_validated_checkpoints() -> None:
    script, store = experiment_script()
    for details in script.trials.values():
        del details[0].validations[:]
    with serve(script, store) as address:
        experiment = exp_client.get_experiment(7, master=address)
        with pytest.raises(
            exp_client.ClientError, match="experiment 7 has no checkpoint taken at a validation"
        ):
            experiment.top_checkpoint()


def test_client_errors(unused_address: str) -> None:
    with serve(Script(), FakeStore([])) as address:
        with pytest.raises(exp_client.ClientError, match="^experiment 99 not found$"):
            exp_client.get_experiment(99, master=address)
    with pytest.raises(exp_client.ClientError, match="cannot reach the pedl scheduler"):
        exp_client.get_experiment(1, master=unused_address)
    with pytest.raises(exp_client.ClientError, match="master must be HOST:PORT"):
        exp_client.get_experiment(1, master="nohost")
    with pytest.raises(ValueError, match="experiment_id must be a positive integer"):
        exp_client.get_experiment(0)


def test_client_wait_times_out(monkeypatch: pytest.MonkeyPatch) -> None:
    script, store = experiment_script()
    script.experiments[0].experiment.state = common_pb2.EXPERIMENT_STATE_ACTIVE
    monkeypatch.setattr(exp_client, "POLL_SECONDS", 0.0)
    with serve(script, store) as address:
        with pytest.raises(TimeoutError, match="experiment 7 is still ACTIVE after 0 s"):
            exp_client.get_experiment(7, master=address).wait(timeout=0)


def test_master_resolution(monkeypatch: pytest.MonkeyPatch) -> None:
    assert exp_client.resolve_master() == "127.0.0.1:8080"
    monkeypatch.setenv("PEDL_MASTER", "grpc://h:9")
    assert exp_client.resolve_master() == "h:9"
    assert exp_client.resolve_master("x:1") == "x:1"
