"""resources.agent_label on a real cluster of two agents, one started with `pedl-agent --label big`."""

from __future__ import annotations

import os
import subprocess

import grpc
import pytest
from test_cluster import stub, submit, wait

from pedl.v1 import common_pb2, scheduler_pb2
from support.models import tiny_config, write_tiny_model
from support.processes import BIN, local_cluster, wait_for_agents

pytestmark = pytest.mark.integration


def test_a_labelled_experiment_runs_on_the_labelled_agent_and_others_on_the_rest(tmp_path) -> None:
    with local_cluster(tmp_path / "cluster") as cluster:
        cluster.start_agent(1, 1, ["--label", "big"])
        wait_for_agents(cluster, 2)
        listed = subprocess.run(
            [str(BIN / "pedl"), "agent", "list"],
            env={**os.environ, "PEDL_MASTER": cluster.master},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert listed.returncode == 0, listed.stderr
        header, *rows = listed.stdout.splitlines()
        assert "LABEL" in header
        assert any(r.startswith("agent1") and " big " in f" {r} " for r in rows), listed.stdout

        model = write_tiny_model(tmp_path / "tiny")
        placed = {}
        for label in ("big", None):
            extra = f"resources:\n  agent_label: {label}\n" if label else ""
            result = wait(cluster, submit(cluster, model, tiny_config(max_batches=20, extra=extra)))
            assert result.experiment.state == common_pb2.EXPERIMENT_STATE_COMPLETED, cluster.logs()
            (trial,) = result.trials
            placed[label] = trial.id
        logs = cluster.logs()
        assert f'"agent_id": "agent1", "trial_id": {placed["big"]},' in logs, logs
        assert f'"agent_id": "agent0", "trial_id": {placed[None]},' in logs, logs

        before = len(stub(cluster).ListExperiments(scheduler_pb2.ListExperimentsRequest()).experiments)
        with pytest.raises(grpc.RpcError) as info:
            submit(cluster, model, tiny_config(extra="resources:\n  agent_label: tpu\n"))
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "resources.agent_label 'tpu': no connected agent" in (info.value.details() or "")
        after = len(stub(cluster).ListExperiments(scheduler_pb2.ListExperimentsRequest()).experiments)
        assert after == before
