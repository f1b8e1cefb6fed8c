"""deploy/docker-compose.yml run as processes (no Docker here): each container is a network-namespace
host named as its service (compose's DNS is each host's /etc/hosts), running the service's command
with its environment and volumes (named volumes are directories mounted where the file says, shared
by the containers naming them; anonymous ones are per container), in compose's start order, each
waited for by its own health check. The agent service runs twice (`--scale agent=2`). Images this
project does not build are stood in for: PostgreSQL by a local server, MinIO by moto's S3 API,
`create-bucket` by creating the bucket it names.

The cluster comes up authenticated and with TLS from what `init` wrote; the admin logs in with that
password; a 2-slot trial spans both agent containers.
"""

from __future__ import annotations

import re
import stat
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from rig_support import rig_config, write_rig_model

from pedl.v1 import common_pb2, scheduler_pb2
from support.compose_file import ComposeService, services
from support.deploy_rig import DeployRig, agents_in, aws_client, deploy_rig, start_moto
from support.machines import VENV, Machine, boot, prepare
from support.netns import unavailable_reason
from support.postgres import PASSWORD as DB_PASSWORD
from support.postgres import PostgresUnavailable, postgres_server
from support.processes import _env, login
from tests.integration.test_cluster import logs, stub, submit, wait

pytestmark = pytest.mark.integration

_REASON = unavailable_reason()
if _REASON is not None:
    pytest.skip(_REASON, allow_module_level=True)

HEALTHCHECK = Path(__file__).resolve().parents[2] / "deploy" / "docker" / "healthcheck.py"
PEDL_SERVICES = ["init", "checkpoint-store", "scheduler", "webui"]
AGENTS = ["agent-1", "agent-2"]
# What deploy/.env holds for this run (the database password the local server was made with).
DOT_ENV = {"PEDL_DB_PASSWORD": DB_PASSWORD, "PEDL_S3_ACCESS_KEY": "testing", "PEDL_S3_SECRET_KEY": "testing"}


def _setup(rig: DeployRig, service: ComposeService, container: str) -> str:
    """/etc/hosts as compose's network resolves it, and the service's volumes mounted."""
    lines = [f"echo '{h.address} {name}' >> /etc/hosts" for name, h in rig.hosts.items()]
    lines.append(f"echo '{rig.hosts[AGENTS[0]].address} agent' >> /etc/hosts")
    for volume in service.volumes:
        source = (
            rig.workdir
            / "volumes"
            / (volume.source or f"{container}-{volume.target.strip('/').replace('/', '-')}")
        )
        source.mkdir(parents=True, exist_ok=True)
        lines += [f"mkdir -p {volume.target}", f"mount --bind {source} {volume.target}"]
        if volume.read_only:
            lines.append(f"mount -o remount,bind,ro {volume.target}")
    return "\n".join(lines) + "\n"


def _healthy(service: subprocess.Popen, machine: Machine, check: list[str], env: dict[str, str]) -> None:
    """Runs the service's health check inside its container (its namespaces) until it passes."""
    root = machine.host.root
    path = f"{env['PATH']}:{root / 'machine-bin'}"  # the image's python3 first
    argv = [
        "nsenter",
        "--target",
        str(service.pid),
        "--mount",
        "--net",
        "--uts",
        "env",
        f"PATH={path}",
        *check,
    ]
    deadline = time.monotonic() + 180
    while True:
        result = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
        if result.returncode == 0:
            return
        logs = "\n".join(p.read_text(errors="replace")[-3000:] for p in root.glob("*.log"))
        if service.poll() is not None or time.monotonic() > deadline:
            raise AssertionError(f"{machine.host.name} never became healthy: {result.stderr}\n{logs}")
        time.sleep(1)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DeployRig]:
    base = tmp_path_factory.mktemp("compose-deploy")
    try:
        pg_context = postgres_server()
        pg = pg_context.__enter__()
    except PostgresUnavailable as e:
        pytest.skip(str(e))
    names = ["postgres", "minio", *PEDL_SERVICES, *AGENTS, "client"]
    try:
        with deploy_rig(base / "hosts", block=4, names=names) as rig:
            yield from _up(rig, pg)
    finally:
        pg_context.__exit__(None, None, None)


def _up(rig: DeployRig, pg) -> Iterator[DeployRig]:  # type: ignore[no-untyped-def]
    import psycopg

    spec = services(DOT_ENV)
    postgres = spec["postgres"].environment
    with psycopg.connect(pg.url(), autocommit=True) as db:
        db.execute(f"CREATE DATABASE {postgres['POSTGRES_DB']} OWNER {postgres['POSTGRES_USER']}")
    rig.expose(rig.hosts["postgres"], 5432, f"127.0.0.1:{pg.port}")
    _, s3_outside = start_moto(rig, rig.hosts["minio"], port=9000)
    bucket = re.search(r"mc mb --ignore-existing pedl/(\S+)", spec["create-bucket"].command[-1])
    assert bucket is not None
    aws_client("s3", s3_outside).create_bucket(Bucket=bucket[1])

    base_env = {"PATH": f"{VENV / 'bin'}:/usr/local/bin:/usr/bin:/bin"}
    machines: dict[str, Machine] = {}
    for container in [*PEDL_SERVICES, *AGENTS]:
        service = spec["agent" if container in AGENTS else container]
        host = rig.hosts[container]
        machine = machines[container] = prepare(host, setup=_setup(rig, service, container))
        (host.root / "machine-bin" / "pedl-healthcheck").symlink_to(HEALTHCHECK)
        rig.log_sources.append(lambda h=host: "\n".join(
            f"==== {h.name}: {p.name}\n{p.read_text(errors='replace')[-4000:]}" for p in h.root.glob("*.log")
        ))  # fmt: skip
        env = {**base_env, **service.environment}
        process = boot(machine, service.command, env, log_name=f"{service.name}.log")
        rig.processes.append(process)
        if container == "init":
            assert process.wait(timeout=120) == 0, (host.root / "init.log").read_text()
        elif service.healthcheck:
            _healthy(process, machine, service.healthcheck, env)

    secrets = rig.workdir / "volumes" / "pedl-secrets"
    rig.master = rig.forward(f"{rig.hosts['scheduler'].address}:8080")
    with _env(PEDL_TLS_CA=str(secrets / "ca.pem")):
        # As `docker compose run --rm init cat /etc/pedl/admin-password` shows it.
        rig.token = login(rig.master, "admin", (secrets / "admin-password").read_text().strip())
        with _env(PEDL_TOKEN=rig.token):
            deadline = time.monotonic() + 120
            while len(stub(rig).ListAgents(scheduler_pb2.ListAgentsRequest(), timeout=10).agents) < len(
                AGENTS
            ):
                assert time.monotonic() < deadline, f"agents did not register:\n{rig.logs()}"
                time.sleep(0.5)
            yield rig


def test_init_wrote_the_secrets_once_into_the_volume_mode_0600(cluster) -> None:
    secrets = cluster.workdir / "volumes" / "pedl-secrets"
    for name in ("cluster-secret", "admin-password", "server.key"):
        assert stat.S_IMODE((secrets / name).stat().st_mode) == 0o600, name
    # Running `init` again (the next `docker compose up`) keeps them.
    before = (secrets / "cluster-secret").read_text()
    again = subprocess.run(
        [str(VENV / "bin" / "pedl-scheduler"), "init", "--home", str(secrets), "--tls-host", "scheduler"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert again.returncode == 0 and "kept the files" in again.stdout, again.stderr
    assert (secrets / "cluster-secret").read_text() == before


def test_agents_register_under_their_container_hostnames(cluster) -> None:
    agents = stub(cluster).ListAgents(scheduler_pb2.ListAgentsRequest(), timeout=30).agents
    assert {a.id: a.address for a in agents} == {n: cluster.hosts[n].address for n in AGENTS}


def test_a_two_slot_trial_spans_both_agent_containers_and_completes(cluster, tmp_path) -> None:
    exp_id = submit(cluster, write_rig_model(tmp_path / "model"), rig_config(max_batches=20, slots=2))
    result = wait(cluster, exp_id, timeout=300)
    (trial,) = result.trials
    text = logs(cluster, trial.id)
    assert result.experiment.state == common_pb2.EXPERIMENT_STATE_COMPLETED, text + cluster.logs()
    assert agents_in(text) == set(AGENTS), text
    assert stub(cluster).GetTrial(scheduler_pb2.GetTrialRequest(trial_id=trial.id)).checkpoints, text
