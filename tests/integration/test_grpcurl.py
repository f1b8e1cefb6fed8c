"""Operators inspect every service with the real grpcurl: reflection, health, one RPC."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from support.processes import local_cluster

pytestmark = pytest.mark.integration
GRPCURL = str(Path(sys.executable).parent / "grpcurl")


def grpcurl(*args: str) -> str:
    result = subprocess.run([GRPCURL, "-plaintext", *args], capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_grpcurl_lists_and_calls_every_service(tmp_path) -> None:
    with local_cluster(tmp_path / "cluster") as cluster:
        listed = grpcurl(cluster.master, "list")
        for service in ("pedl.v1.SchedulerService", "pedl.v1.AgentLinkService", "grpc.health.v1.Health"):
            assert service in listed
        auth = ["-H", f"authorization: Bearer {cluster.token}"]  # as the README shows
        agents = json.loads(grpcurl(*auth, cluster.master, "pedl.v1.SchedulerService/ListAgents"))
        assert agents["agents"][0]["id"] == "agent0"
        health = json.loads(grpcurl("-d", '{"service": ""}', cluster.master, "grpc.health.v1.Health/Check"))
        assert health["status"] == "SERVING"

        listed = grpcurl(cluster.store.address, "list")
        assert "pedl.v1.CheckpointStoreService" in listed
        assert (
            json.loads(
                grpcurl(*auth, cluster.store.address, "pedl.v1.CheckpointStoreService/ListCheckpoints")
            )
            == {}
        )
        health = json.loads(
            grpcurl(
                "-d",
                '{"service": "pedl.v1.CheckpointStoreService"}',
                cluster.store.address,
                "grpc.health.v1.Health/Check",
            )
        )
        assert health["status"] == "SERVING"
