"""The Terraform deployment's instances, run as they would boot: deploy/terraform/aws/templates/*.tftpl
rendered with test values and run unchanged as root on network-namespace hosts (support.machines):
a scheduler instance, two agent instances, an AWS API (moto: SSM Parameter Store holding what
Terraform provisions, S3 for checkpoints) and PostgreSQL standing in for RDS. The cluster comes up
with TLS and the provisioned cluster secret, the admin logs in with the provisioned password, and a
2-slot trial spans both agent instances.

Stand-ins (support/machines.py): packages, pip, the metadata service and systemd; the instance role's
credentials are the test's moto keys in the boot environment.
"""

from __future__ import annotations

import re
import secrets
import stat
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from rig_support import rig_config, write_rig_model

from pedl.v1 import common_pb2, scheduler_pb2
from support.deploy_rig import DeployRig, agents_in, aws_client, deploy_rig, start_moto
from support.machines import Machine, boot, boot_and_wait, prepare
from support.netns import unavailable_reason
from support.postgres import PASSWORD as DB_PASSWORD
from support.postgres import PostgresUnavailable, postgres_server
from support.processes import _env, login
from tests.integration.test_cluster import logs, stub, submit, wait

pytestmark = pytest.mark.integration

_REASON = unavailable_reason()
if _REASON is not None:
    pytest.skip(_REASON, allow_module_level=True)

TEMPLATES = Path(__file__).resolve().parents[2] / "deploy" / "terraform" / "aws" / "templates"
COMPUTE = TEMPLATES.parent / "compute.tf"
NAME = "pedl"
PENDING = "pending: the scheduler writes its CA certificate here at first boot"
PUBLIC_IP = "203.0.113.7"


def render(template: Path, values: dict[str, object]) -> str:
    """Terraform's templatefile() for what these templates use: ${name} interpolation, $${ escapes."""
    text = template.read_text()
    assert "%{" not in text, f"{template.name}: template directives are not rendered by this test"
    rendered = re.sub(r"(?<!\$)\$\{(\w+)\}", lambda m: str(values[m[1]]), text)
    return rendered.replace("$${", "${")


def template_variables(template: str) -> set[str]:
    """The variables compute.tf passes to templatefile(TEMPLATE)."""
    block = re.search(
        rf'templatefile\("\$\{{path.module\}}/templates/{template}", \{{(.*?)\}}\)', COMPUTE.read_text(), re.S
    )
    assert block is not None, template
    return set(re.findall(r"^\s*(\w+)\s*=", block[1], re.M))


@pytest.fixture(scope="module")
def cluster(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[DeployRig, dict[str, Machine], dict[str, str]]]:
    base = tmp_path_factory.mktemp("terraform-deploy")
    try:
        pg_context = postgres_server()
        pg = pg_context.__enter__()
    except PostgresUnavailable as e:
        pytest.skip(str(e))
    names = ["aws", "db", "scheduler", "agent1", "agent2", "client"]
    try:
        with deploy_rig(base / "hosts", block=3, names=names) as rig:
            yield from _boot_cluster(rig, pg)
    finally:
        pg_context.__exit__(None, None, None)


def _boot_cluster(rig: DeployRig, pg) -> Iterator[tuple[DeployRig, dict[str, Machine], dict[str, str]]]:  # type: ignore[no-untyped-def]
    import psycopg

    with psycopg.connect(pg.url(), autocommit=True) as db:
        db.execute("CREATE DATABASE pedl")
    hosts = rig.hosts
    rig.expose(hosts["db"], 5432, f"127.0.0.1:{pg.port}")
    aws_inside, aws_outside = start_moto(rig, hosts["aws"])
    # What `terraform apply` provisions (secrets.tf, storage.tf): the secrets in Parameter Store.
    provisioned = {"cluster-secret": secrets.token_urlsafe(32), "admin-password": secrets.token_urlsafe(18)}
    ssm = aws_client("ssm", aws_outside)
    for name, value in {**provisioned, "db-password": DB_PASSWORD}.items():
        ssm.put_parameter(Name=f"/{NAME}/{name}", Value=value, Type="SecureString")
    ssm.put_parameter(Name=f"/{NAME}/tls-ca", Value=PENDING, Type="String")
    aws_client("s3", aws_outside).create_bucket(Bucket="pedl-checkpoints-test")

    common = {"pedl_package": "pedl[server]", "region": "us-east-1", "secret_name": f"/{NAME}/cluster-secret",
              "tls_ca_name": f"/{NAME}/tls-ca", "tls_ca_pending": PENDING}  # fmt: skip
    scheduler_values = {
        **common, "db_host": hosts["db"].address, "db_port": 5432, "db_password_name": f"/{NAME}/db-password",
        "bucket": "pedl-checkpoints-test", "public_ip": PUBLIC_IP, "admin_name": f"/{NAME}/admin-password",
    }  # fmt: skip
    agent_values = {
        **common, "torch_index_url": "https://download.pytorch.org/whl/cpu", "torch_requirement": "torch",
        "master": f"{hosts['scheduler'].address}:8080", "cpu_slots": 1,
    }  # fmt: skip
    scripts = {
        "scheduler": render(TEMPLATES / "scheduler.sh.tftpl", scheduler_values),
        "agent": render(TEMPLATES / "agent.sh.tftpl", agent_values),
    }
    # The role's credentials and the API endpoint (on EC2: the instance profile and AWS itself).
    aws_env = {
        "AWS_ENDPOINT_URL": aws_inside,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
    }
    machines: dict[str, Machine] = {}
    for name in ("scheduler", "agent1", "agent2"):
        host = hosts[name]
        machines[name] = prepare(
            host, {"meta-data/instance-id": f"i-{name}", "meta-data/local-ipv4": host.address}
        )
        (host.root / "user-data.sh").write_text(scripts["scheduler" if name == "scheduler" else "agent"])
        rig.log_sources.append(machines[name].logs)
    # Agents boot alongside the scheduler and wait for the CA certificate it publishes.
    agents = [
        boot(machines[n], ["bash", str(hosts[n].root / "user-data.sh")], aws_env)
        for n in ("agent1", "agent2")
    ]
    boot_and_wait(machines["scheduler"], ["bash", str(hosts["scheduler"].root / "user-data.sh")], aws_env)
    for name, process in zip(("agent1", "agent2"), agents, strict=True):
        assert process.wait(timeout=300) == 0, (hosts[name].root / "boot.log").read_text() + machines[
            name
        ].logs()

    rig.master = rig.forward(f"{hosts['scheduler'].address}:8080")
    ca = aws_client("ssm", aws_outside).get_parameter(Name=f"/{NAME}/tls-ca")["Parameter"]["Value"]
    (rig.workdir / "ca.pem").write_text(ca + "\n")
    # The operator reads the admin password from Parameter Store (`aws ssm get-parameter`).
    password = ssm.get_parameter(Name=f"/{NAME}/admin-password", WithDecryption=True)["Parameter"]["Value"]
    with _env(PEDL_TLS_CA=str(rig.workdir / "ca.pem")):
        rig.token = _login_when_up(rig, password)
        with _env(PEDL_TOKEN=rig.token):
            _wait_for_agents(rig, 2)
            yield rig, machines, {**provisioned, **scripts}


def _login_when_up(rig: DeployRig, password: str, timeout: float = 120) -> str:
    deadline = time.monotonic() + timeout
    while True:
        try:
            return login(rig.master, "admin", password)
        except Exception:
            if time.monotonic() > deadline:
                raise AssertionError(f"the admin could not log in:\n{rig.logs()}") from None
            time.sleep(1)


def _wait_for_agents(rig: DeployRig, count: int, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while len(stub(rig).ListAgents(scheduler_pb2.ListAgentsRequest(), timeout=10).agents) < count:
        assert time.monotonic() < deadline, f"agents did not register:\n{rig.logs()}"
        time.sleep(0.5)


def test_the_templates_take_exactly_the_values_terraform_passes() -> None:
    assert template_variables("scheduler.sh.tftpl") == set(
        re.findall(r"(?<!\$)\$\{(\w+)\}", (TEMPLATES / "scheduler.sh.tftpl").read_text())
    )
    assert template_variables("agent.sh.tftpl") == set(
        re.findall(r"(?<!\$)\$\{(\w+)\}", (TEMPLATES / "agent.sh.tftpl").read_text())
    )


def test_secrets_come_from_parameter_store_into_files_only_the_service_user_reads(cluster) -> None:
    rig, machines, provisioned = cluster
    for secret in (provisioned["cluster-secret"], provisioned["admin-password"]):
        assert secret not in provisioned["scheduler"] and secret not in provisioned["agent"]
    scheduler = machines["scheduler"]
    for name, machine in (
        ("cluster-secret", scheduler),
        ("admin-password", scheduler),
        ("cluster-secret", machines["agent1"]),
    ):
        path = machine.file(f"/etc/pedl/{name}")
        assert path.read_text().strip() == provisioned[name]
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, name
    assert stat.S_IMODE(scheduler.file("/etc/pedl/server.key").stat().st_mode) == 0o600


def test_calls_without_a_login_are_refused_and_plaintext_is_not_served(cluster) -> None:
    rig, _, _ = cluster
    from pedl import _grpc
    from pedl.v1 import scheduler_pb2_grpc

    with _env(PEDL_TOKEN=""), _grpc.channel(rig.master, token="") as channel:
        with pytest.raises(grpc.RpcError) as refused:
            scheduler_pb2_grpc.SchedulerServiceStub(channel).ListAgents(
                scheduler_pb2.ListAgentsRequest(), timeout=10
            )
    assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
    with grpc.insecure_channel(rig.master) as plain:
        with pytest.raises(grpc.RpcError):
            scheduler_pb2_grpc.SchedulerServiceStub(plain).ListAgents(
                scheduler_pb2.ListAgentsRequest(), timeout=5
            )


def test_a_two_slot_trial_spans_both_agent_instances_and_completes(cluster, tmp_path) -> None:
    rig, _, _ = cluster
    exp_id = submit(rig, write_rig_model(tmp_path / "model"), rig_config(max_batches=20, slots=2))
    result = wait(rig, exp_id, timeout=300)
    (trial,) = result.trials
    text = logs(rig, trial.id)
    assert result.experiment.state == common_pb2.EXPERIMENT_STATE_COMPLETED, text + rig.logs()
    assert agents_in(text) == {"i-agent1", "i-agent2"}, text
    assert stub(rig).GetTrial(scheduler_pb2.GetTrialRequest(trial_id=trial.id)).checkpoints, text
