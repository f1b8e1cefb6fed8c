"""A Slurm cluster over several machines: slurmctld and the scheduler on one network-namespace host,
a slurmd on each of three others; a 2-slot gang runs in one pilot job spanning two Slurm nodes."""

from __future__ import annotations

import re
import shlex
import shutil
from collections.abc import Iterator

import pytest
from rig_support import rig_config, write_rig_model

from pedl.v1 import common_pb2
from support import slurm as slurm_support
from support.netns import SCHEDULER_PORT, Rig, multihost_rig, unavailable_reason
from support.processes import BIN
from tests.integration.test_cluster import logs, submit, wait

pytestmark = pytest.mark.integration
_REASON = unavailable_reason() or slurm_support.unavailable_reason()
if _REASON is not None:
    pytest.skip(_REASON, allow_module_level=True)

NODES = ["host1", "host2", "host3"]


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    base = tmp_path_factory.mktemp("slurm-rig")
    shared = base / "shared"  # what a Slurm cluster's shared file system holds: the cluster secret
    shared.mkdir()

    def start_slurm(r: Rig) -> None:
        slurm_support.on_rig(r, NODES, cpus=2)
        shutil.copy2(r.hosts["server"].root / "cluster-secret", shared / "secret")

    server_address = f"198.18.0.{16 * 11 + 1}"
    agent = [str(BIN / "pedl-agent"), "--cluster-secret-file", str(shared / "secret")]
    args = [
        "--resource-pool", "hpc=slurm:pedl",
        "--slurm-agent-command", shlex.join(agent),
        "--slurm-master", f"{server_address}:{SCHEDULER_PORT}",
        "--slurm-poll", "0.5",
        "--slurm-exit-when-idle", "3",
        "--slurm-output-dir", str(shared / "jobs"),
    ]  # fmt: skip
    with multihost_rig(
        base / "hosts", block=11, agents=len(NODES), before_scheduler=start_slurm, scheduler_args=args,
        start_agents=False,
    ) as r:  # fmt: skip
        assert r.hosts["server"].address == server_address
        yield r


def test_a_two_slot_gang_spans_two_slurm_nodes_in_one_pilot_job(rig: Rig, tmp_path) -> None:
    config = rig_config(max_batches=20, slots=2).replace("resources:\n", "resources:\n  resource_pool: hpc\n")
    config += "slurm:\n  slots_per_node: 1\n"
    exp_id = submit(rig, write_rig_model(tmp_path / "model"), config)
    result = wait(rig, exp_id, timeout=240)
    assert result.experiment.state == common_pb2.EXPERIMENT_STATE_COMPLETED, rig.logs()
    (trial,) = result.trials
    text = logs(rig, trial.id)
    agents = set(re.findall(r"agent (slurm-\d+-host\d) \(slots", text))
    assert len(agents) == 2, (agents, text[-3000:])
    assert len({a.split("-")[1] for a in agents}) == 1  # one job, two nodes
