"""UploadExperiment: the model definition arrives in parts and is joined in order; one over the
scheduler's limit is refused as soon as the parts pass it, naming the limit."""

from __future__ import annotations

import asyncio
import io
import tarfile
from pathlib import Path

import grpc
import pytest

from pedl.v1 import agent_pb2, common_pb2, scheduler_pb2
from pedl_scheduler.api import SchedulerApi
from pedl_scheduler.cluster import Cluster
from pedl_scheduler.experiments import ExperimentManager
from pedl_scheduler.storage import open_storage
from pedl_scheduler.storage.ops import experiments as experiment_ops

CONFIG = """
hyperparameters: {x: 1}
searcher: {name: single, metric: error, max_length: {batches: 20}}
"""


def _archive() -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        data = b"x = 1\n"
        info = tarfile.TarInfo("model_def.py")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


ARCHIVE = _archive()  # the scheduler refuses what is not a model-definition archive
LIMIT = 4096


class Aborted(Exception):
    pass


class Context:
    async def abort(self, code: grpc.StatusCode, details: str) -> None:
        raise Aborted(code, details)


async def parts(*chunks: bytes):  # type: ignore[no-untyped-def]
    for i, chunk in enumerate(chunks):
        head = {"config_yaml": CONFIG, "model_definition_name": "model"} if i == 0 else {}
        yield scheduler_pb2.UploadExperimentRequest(model_definition=chunk, **head)


def upload(tmp_path: Path, *chunks: bytes) -> bytes:
    async def main() -> bytes:
        cluster = Cluster()
        cluster.connect(agent_pb2.RegisterAgent(agent_id="a0", slots=[common_pb2.Slot(id="0")]))
        db = open_storage(str(tmp_path / "pedl.db"))
        try:
            manager = ExperimentManager(db, cluster, "127.0.0.1:1", model_definition_limit=LIMIT)
            api = SchedulerApi(manager, cluster, "cluster")
            response = await api.UploadExperiment(parts(*chunks), Context())
            return experiment_ops.model_definition(db, response.experiment.id)["model_definition"]
        finally:
            db.close()

    return asyncio.run(main())


def test_the_parts_are_joined_in_order(tmp_path: Path) -> None:
    a, b = len(ARCHIVE) // 3, 2 * len(ARCHIVE) // 3
    assert upload(tmp_path, ARCHIVE[:a], ARCHIVE[a:b], ARCHIVE[b:]) == ARCHIVE


def test_a_definition_over_the_limit_is_refused_naming_it(tmp_path: Path) -> None:
    with pytest.raises(Aborted) as refused:
        upload(tmp_path, ARCHIVE, b"e" * LIMIT, b"never read")
    code, details = refused.value.args
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "over the scheduler's limit of 0 MiB" in details
