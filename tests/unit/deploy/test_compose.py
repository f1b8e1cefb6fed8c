"""deploy/docker-compose.yml and the Dockerfile: the services are wired together, and every
command line is one the real pedl parsers accept (no Docker daemon needed)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from pedl_agent.config import parse_args as parse_agent_args
from pedl_checkpoint_store.config import parse_config as parse_store_config
from pedl_scheduler.main import parse_args as parse_scheduler_args
from support.compose_file import interpolate

DEPLOY = Path(__file__).resolve().parents[3] / "deploy"
COMPOSE = DEPLOY / "docker-compose.yml"


@pytest.fixture(scope="module")
def services() -> dict:
    return yaml.safe_load(interpolate(COMPOSE.read_text()))["services"]


def test_the_cluster_has_its_five_parts_and_dependencies_exist(services) -> None:
    assert {"postgres", "minio", "create-bucket", "checkpoint-store", "scheduler", "agent"} <= set(services)
    assert services["postgres"]["image"] == "postgres:15"
    for name, service in services.items():
        for dependency in service.get("depends_on", {}):
            assert dependency in services, f"{name} depends on unknown service {dependency}"


def test_build_targets_exist_in_the_dockerfile(services) -> None:
    stages = set(re.findall(r"^FROM \S+ AS (\S+)$", (DEPLOY / "docker" / "Dockerfile").read_text(), re.M))
    for name, service in services.items():
        if "build" in service:
            assert service["build"]["target"] in stages, name
            assert (DEPLOY / service["build"]["context"] / service["build"]["dockerfile"]).is_file()


def test_published_ports_are_loopback_only(services) -> None:
    for name, service in services.items():
        for port in service.get("ports", []):
            assert port.startswith("127.0.0.1:"), f"{name} publishes {port} beyond this host"


def test_the_scheduler_uses_postgres_and_serves_metrics(services) -> None:
    args = parse_scheduler_args(services["scheduler"]["command"][1:])
    assert args.db == "postgresql://pedl:pedl-dev-password@postgres:5432/pedl"
    user = services["postgres"]["environment"]
    assert (user["POSTGRES_USER"], user["POSTGRES_PASSWORD"], user["POSTGRES_DB"]) == (
        "pedl",
        "pedl-dev-password",
        "pedl",
    )
    store_port = services["checkpoint-store"]["command"][
        services["checkpoint-store"]["command"].index("--port") + 1
    ]
    assert args.checkpoint_store == f"checkpoint-store:{store_port}"
    assert (args.host, args.port, args.metrics_host, args.metrics_port) == ("0.0.0.0", 8080, "0.0.0.0", 9464)
    assert "127.0.0.1:9464:9464" in services["scheduler"]["ports"]


def test_the_checkpoint_store_uses_the_minio_bucket(services) -> None:
    store = services["checkpoint-store"]
    config = parse_store_config(store["command"][1:], env={})
    assert config.storage == "s3" and config.s3 is not None
    assert set(config.s3.values()) >= {"pedl-checkpoints", "http://minio:9000"}
    assert "mc mb --ignore-existing pedl/pedl-checkpoints" in services["create-bucket"]["entrypoint"][-1]
    minio = services["minio"]["environment"]
    assert store["environment"]["AWS_ACCESS_KEY_ID"] == minio["MINIO_ROOT_USER"]
    assert store["environment"]["AWS_SECRET_ACCESS_KEY"] == minio["MINIO_ROOT_PASSWORD"]


def test_the_agent_connects_to_the_scheduler(services, monkeypatch) -> None:
    # The agent checks an address against its own interfaces only where it runs.
    import pedl_agent.config

    monkeypatch.setattr(pedl_agent.config, "check_address", lambda address, interfaces=None: address)
    # The files under /etc/pedl exist only in the secrets volume (test_compose_deploy runs them).
    command = services["agent"]["command"][1:]
    files = {i for i, a in enumerate(command) if a in ("--cluster-secret-file", "--tls-ca")}
    argv = [a for i, a in enumerate(command) if i not in files and i - 1 not in files]
    config = parse_agent_args(argv, environ={})
    assert config.master == f"scheduler:{parse_scheduler_args(services['scheduler']['command'][1:]).port}"


def test_docker_compose_accepts_the_file() -> None:
    docker = shutil.which("docker")
    if docker is None:
        pytest.skip("docker is not on PATH")
    if subprocess.run([docker, "compose", "version"], capture_output=True).returncode != 0:
        pytest.skip("the docker compose plugin is not installed")
    result = subprocess.run(
        [docker, "compose", "-f", str(COMPOSE), "config", "--quiet"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr


def test_no_pedl_service_starts_without_the_secret_init_made(services) -> None:
    init = services["init"]["command"]
    assert init[:4] == ["pedl-scheduler", "init", "--home", "/etc/pedl"]
    assert {"scheduler", "checkpoint-store"} <= {init[i + 1] for i, a in enumerate(init) if a == "--tls-host"}
    for name in ("checkpoint-store", "scheduler", "agent"):
        command = services[name]["command"]
        assert command[command.index("--cluster-secret-file") + 1] == "/etc/pedl/cluster-secret", name
        assert command[command.index("--tls-ca") + 1] == "/etc/pedl/ca.pem", name
        assert "pedl-secrets:/etc/pedl:ro" in services[name]["volumes"], name
    store_needs = services["checkpoint-store"]["depends_on"]["init"]["condition"]
    assert store_needs == "service_completed_successfully"
