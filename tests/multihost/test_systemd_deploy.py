"""docs/DEPLOY.md's "Several machines by hand", run as written on network-namespace machines
(support.machines): the scheduler's machine installs pedl, makes the secrets and TLS files with
`pedl-scheduler init`, and starts deploy/systemd's scheduler, checkpoint store and web UI units; each
of two agent machines gets the cluster secret and the CA certificate copied to it and starts the agent
unit. The units' ExecStart lines run as systemd would run them (support/fake_systemctl.py). The admin
logs in with the password init wrote; a 2-slot trial spans both agent machines.

The command blocks below are the ones DEPLOY.md shows (a test checks they are there, word for word).
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from rig_support import rig_config, write_rig_model

from pedl.v1 import common_pb2, scheduler_pb2
from support.deploy_rig import DeployRig, agents_in, deploy_rig
from support.machines import Machine, boot_and_wait, prepare
from support.netns import unavailable_reason
from support.processes import _env, login
from tests.integration.test_cluster import logs, stub, submit, wait

pytestmark = pytest.mark.integration

_REASON = unavailable_reason()
if _REASON is not None:
    pytest.skip(_REASON, allow_module_level=True)

ROOT = Path(__file__).resolve().parents[2]
UNITS = ROOT / "deploy" / "systemd"
DEPLOY_MD = ROOT / "docs" / "DEPLOY.md"
DOC_ADDRESS = "10.0.0.1"
WHEEL = "pedl-0.1.0-py3-none-any.whl"

SERVER_STEPS = f"""useradd --system --create-home --home-dir /var/lib/pedl pedl
python3 -m venv /opt/pedl/venv
/opt/pedl/venv/bin/pip install "./{WHEEL}[server]"
install -d -m 0750 /etc/pedl
/opt/pedl/venv/bin/pedl-scheduler init --home /etc/pedl --tls-host {DOC_ADDRESS} --tls-host 127.0.0.1
chown -R pedl:pedl /etc/pedl
printf 'PEDL_SCHEDULER_ADDRESS={DOC_ADDRESS}\\nPEDL_DB=/var/lib/pedl/pedl.db\\n' > /etc/pedl/pedl.env
cp pedl-checkpoint-store.service pedl-scheduler.service pedl-webui.service /etc/systemd/system/
systemctl daemon-reload
systemctl enable --now pedl-checkpoint-store pedl-scheduler pedl-webui
"""

AGENT_STEPS = f"""useradd --system --create-home --home-dir /var/lib/pedl pedl
python3 -m venv /opt/pedl/venv
/opt/pedl/venv/bin/pip install "./{WHEEL}" torch
install -d -m 0755 -o pedl -g pedl /etc/pedl
install -m 0600 -o pedl -g pedl cluster-secret /etc/pedl/cluster-secret
install -m 0644 ca.pem /etc/pedl/ca.pem
printf 'PEDL_SCHEDULER_ADDRESS={DOC_ADDRESS}\\nPEDL_AGENT_SLOTS=1\\n' > /etc/pedl/pedl.env
cp pedl-agent.service /etc/systemd/system/
systemctl daemon-reload
systemctl enable --now pedl-agent
"""


def _stage(machine: Machine, steps: str, address: str, files: list[Path]) -> Path:
    """The operator's working directory on the machine: the units and files copied there, the steps."""
    stage = machine.host.root / "stage"
    stage.mkdir(exist_ok=True)
    for source in files:
        shutil.copy2(source, stage / source.name)
    script = stage / "steps.sh"
    script.write_text(f"set -euo pipefail\ncd {stage}\n" + steps.replace(DOC_ADDRESS, address))
    return script


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DeployRig]:
    base = tmp_path_factory.mktemp("systemd-deploy")
    with deploy_rig(base / "hosts", block=5, names=["server", "host1", "host2", "client"]) as rig:
        server_host = rig.hosts["server"]
        server = prepare(server_host)
        rig.log_sources.append(server.logs)
        units = sorted(UNITS.glob("*.service"))
        boot_and_wait(server, ["bash", str(_stage(server, SERVER_STEPS, server_host.address, units))], {})
        copied = [server.file("/etc/pedl/cluster-secret"), server.file("/etc/pedl/ca.pem")]  # scp
        for name in ("host1", "host2"):
            agent = prepare(rig.hosts[name])
            rig.log_sources.append(agent.logs)
            script = _stage(agent, AGENT_STEPS, server_host.address, [*units, *copied])
            boot_and_wait(agent, ["bash", str(script)], {})
        rig.master = rig.forward(f"{server_host.address}:8080")
        with _env(PEDL_TLS_CA=str(copied[1])):
            password = server.file("/etc/pedl/admin-password").read_text().strip()
            deadline = time.monotonic() + 120
            while True:
                try:
                    rig.token = login(rig.master, "admin", password)
                    break
                except Exception:
                    assert time.monotonic() < deadline, f"the admin could not log in:\n{rig.logs()}"
                    time.sleep(1)
            with _env(PEDL_TOKEN=rig.token):
                while len(stub(rig).ListAgents(scheduler_pb2.ListAgentsRequest(), timeout=10).agents) < 2:
                    assert time.monotonic() < deadline, f"agents did not register:\n{rig.logs()}"
                    time.sleep(0.5)
                yield rig


def test_deploy_md_shows_these_steps_word_for_word() -> None:
    text = DEPLOY_MD.read_text()
    for steps in (SERVER_STEPS, AGENT_STEPS):
        assert steps.strip() in text


def test_a_two_slot_trial_spans_both_agent_machines_and_completes(cluster, tmp_path) -> None:
    agents = stub(cluster).ListAgents(scheduler_pb2.ListAgentsRequest(), timeout=30).agents
    assert {a.id: a.address for a in agents} == {n: cluster.hosts[n].address for n in ("host1", "host2")}
    exp_id = submit(cluster, write_rig_model(tmp_path / "model"), rig_config(max_batches=20, slots=2))
    result = wait(cluster, exp_id, timeout=300)
    (trial,) = result.trials
    text = logs(cluster, trial.id)
    assert result.experiment.state == common_pb2.EXPERIMENT_STATE_COMPLETED, text + cluster.logs()
    assert agents_in(text) == {"host1", "host2"}, text
