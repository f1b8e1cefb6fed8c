"""The whole cluster on TLS: scheduler, checkpoint store and agent stream; harnesses reach the
store over TLS too. Clients that trust another CA, or speak plaintext, are refused."""

from __future__ import annotations

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from test_cluster import stub, submit, wait

from pedl import _grpc
from pedl.v1 import checkpoint_store_pb2, checkpoint_store_pb2_grpc, common_pb2, scheduler_pb2
from support.models import tiny_config, write_tiny_model
from support.processes import local_cluster
from support.tls import make_ca, make_tls

pytestmark = pytest.mark.integration


def test_a_cluster_on_tls_trains_and_refuses_untrusting_clients(tmp_path) -> None:
    tls = make_tls(tmp_path / "pki")
    other_ca, _ = make_ca(tmp_path / "other-pki", "other")
    with local_cluster(tmp_path / "cluster", tls=tls) as cluster:
        try:
            exp_id = submit(cluster, write_tiny_model(tmp_path / "tiny"), tiny_config(max_batches=20))
            result = wait(cluster, exp_id)
            assert result.experiment.state == common_pb2.EXPERIMENT_STATE_COMPLETED
            detail = stub(cluster).GetTrial(scheduler_pb2.GetTrialRequest(trial_id=result.trials[0].id))
            assert detail.checkpoints, "the harness stored a checkpoint over TLS"

            for address in (cluster.master, cluster.store.address):
                for ch in (
                    _grpc.channel(address, tls_ca=str(other_ca)),
                    grpc.insecure_channel(address),
                ):
                    with ch, pytest.raises(grpc.RpcError) as info:
                        health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(), timeout=10)
                    assert info.value.code() == grpc.StatusCode.UNAVAILABLE
            with _grpc.channel(cluster.store.address) as ch:  # the right CA ($PEDL_TLS_CA)
                store = checkpoint_store_pb2_grpc.CheckpointStoreServiceStub(ch)
                listed = store.ListCheckpoints(checkpoint_store_pb2.ListCheckpointsRequest(), timeout=10)
            assert [c.uuid for c in listed.checkpoints] == [c.uuid for c in reversed(detail.checkpoints)]
        except BaseException:
            print(cluster.logs())
            raise
