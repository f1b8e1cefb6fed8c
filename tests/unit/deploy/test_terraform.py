"""deploy/terraform/aws: formatting, validation, variable checks and an apply/destroy against moto.

Needs a `terraform` binary; `validate` and `apply` also need the hashicorp/aws provider in a
local filesystem mirror (PEDL_TF_PLUGIN_MIRROR, default /opt/tf-plugins), and `apply` needs
moto's `moto_server`. Each test skips with the reason when something is missing.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from support.processes import on_a_free_port

ROOT = Path(__file__).resolve().parents[3]
MODULE = ROOT / "deploy" / "terraform" / "aws"
PASSWORD = "correct-horse-battery-staple"
PLAIN_PROVIDER = 'provider "aws" {\n  region = "us-east-1"\n}'


def terraform_binary() -> str:
    binary = shutil.which("terraform")
    if binary is None:
        pytest.skip("terraform is not on PATH")
    return binary


def plugin_mirror() -> Path:
    mirror = Path(os.environ.get("PEDL_TF_PLUGIN_MIRROR", "/opt/tf-plugins"))
    if not (mirror / "registry.terraform.io" / "hashicorp" / "aws").is_dir():
        pytest.skip(f"no hashicorp/aws provider in a local mirror at {mirror} (set PEDL_TF_PLUGIN_MIRROR)")
    return mirror


def run(args: list[str], cwd: Path, env: dict[str, str], check: bool = True) -> subprocess.CompletedProcess:
    result = subprocess.run(
        [terraform_binary(), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600
    )
    if check and result.returncode != 0:
        raise AssertionError(f"terraform {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}")
    return result


def terraform_env(tmp: Path) -> dict[str, str]:
    """Terraform's environment for a root module under `tmp`: providers from the local mirror only."""
    config = tmp / "terraformrc"
    config.write_text(
        f'provider_installation {{\n  filesystem_mirror {{\n    path = "{plugin_mirror()}"\n  }}\n}}\n'
    )
    return {
        **os.environ,
        "TF_CLI_CONFIG_FILE": str(config),
        "TF_IN_AUTOMATION": "1",
        "CHECKPOINT_DISABLE": "1",
        "TF_DATA_DIR": str(tmp / ".terraform"),
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
    }


@pytest.fixture(scope="module")
def workspace(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """An initialised root module directory, shared (init copies the large provider binary once).

    Terraform installs providers from the local mirror only, never from the network; each test
    rewrites main.tf (same module call, other inputs or provider settings: no re-init needed).
    """
    tmp = tmp_path_factory.mktemp("terraform")
    env = terraform_env(tmp)
    root = root_module(tmp / "root", PLAIN_PROVIDER)
    run(["init", "-input=false", "-no-color"], root, env)
    return root, env


def module_call(name: str, **inputs: object) -> str:
    """A call of deploy/terraform/aws named `name` with `inputs` (HCL-encoded as JSON)."""
    values = {
        "allowed_cidrs": ["203.0.113.0/24"],
        "scheduler_ami_id": "ami-0123456789abcdef0",
        "agent_ami_id": "ami-0123456789abcdef0",
        "db_password": PASSWORD,
        **inputs,
    }
    body = "\n".join(f"  {k} = {json.dumps(v)}" for k, v in values.items())
    return f'module "{name}" {{\n  source = "{MODULE}"\n{body}\n}}'


def root_module(directory: Path, provider: str, **inputs: object) -> Path:
    """A root module calling deploy/terraform/aws with `inputs`, and showing its outputs."""
    directory.mkdir(parents=True, exist_ok=True)
    outputs = "\n".join(
        f'output "{name}" {{\n  value = module.pedl.{name}\n}}'
        for name in ("scheduler_address", "checkpoint_bucket", "metrics_url", "agent_autoscaling_group")
    )
    (directory / "main.tf").write_text(f"{provider}\n{module_call('pedl', **inputs)}\n{outputs}\n")
    return directory


def test_the_module_is_formatted() -> None:
    result = run(["fmt", "-check", "-recursive", "-diff", str(MODULE)], ROOT, dict(os.environ), check=False)
    assert result.returncode == 0, f"run `terraform fmt -recursive deploy/terraform`:\n{result.stdout}"


def test_the_module_validates(workspace) -> None:
    root, tf_env = workspace
    root_module(root, PLAIN_PROVIDER)
    result = json.loads(run(["validate", "-json", "-no-color"], root, tf_env, check=False).stdout)
    assert result["valid"], result["diagnostics"]


BAD_INPUTS = [
    ({"agent_max_count": 0}, "agent_max_count must be a whole number from 1 to 100"),
    ({"agent_min_count": 101}, "agent_min_count must be a whole number from 0 to 100"),
    ({"agent_instance_types": []}, "agent_instance_types must hold at least one EC2 instance type"),
    ({"agent_instance_types": ["not a type"]}, "agent_instance_types must hold at least one EC2"),
    ({"allowed_cidrs": []}, "allowed_cidrs must hold at least one IPv4 CIDR block"),
    ({"db_password": "short"}, "db_password must be at least 16 characters"),
    ({"scheduler_ami_id": "ubuntu"}, "scheduler_ami_id must be an AMI id"),
    ({"vpc_cidr": "10.0.0.0/28"}, "vpc_cidr must be an IPv4 CIDR block of /22 or larger"),
]


@pytest.fixture(scope="module")
def bad_inputs_validated(tmp_path_factory) -> tuple[int, dict[str, list[dict]]]:
    """One `terraform validate` of a root module calling the module once per bad input (`bad_N`,
    each otherwise valid): its exit status, and its diagnostics by the module call they point at.

    One run, not one per input: each validate loads the AWS provider's schema (~5 s of CPU)."""
    tmp = tmp_path_factory.mktemp("terraform-bad-inputs")
    env = terraform_env(tmp)
    root = tmp / "root"
    root.mkdir()
    calls = [module_call(f"bad_{i}", **inputs) for i, (inputs, _) in enumerate(BAD_INPUTS)]
    (root / "main.tf").write_text("\n".join([PLAIN_PROVIDER, *calls]) + "\n")
    run(["init", "-input=false", "-no-color"], root, env)
    result = run(["validate", "-json", "-no-color"], root, env, check=False)
    by_call: dict[str, list[dict]] = {}
    for diagnostic in json.loads(result.stdout)["diagnostics"]:
        context = diagnostic.get("snippet", {}).get("context", "")
        by_call.setdefault(context, []).append(diagnostic)
    return result.returncode, by_call


@pytest.mark.parametrize(("index", "message"), [(i, message) for i, (_, message) in enumerate(BAD_INPUTS)])
def test_bad_variables_are_rejected_with_their_message(bad_inputs_validated, index, message) -> None:
    returncode, by_call = bad_inputs_validated
    assert returncode != 0
    errors = [d for d in by_call.get(f'module "bad_{index}"', []) if d["severity"] == "error"]
    assert errors, f"no error for {BAD_INPUTS[index][0]}: {by_call}"
    assert any(message in " ".join((d["summary"] + " " + d["detail"]).split()) for d in errors), errors


# ---- apply and destroy against a moto server ----------------------------------------------


def _start_moto(binary: str, log_path: Path, port: int) -> tuple[subprocess.Popen, str]:
    """moto_server on `port`, once it answers; killed, its log raised, if it exits or never does."""
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [binary, "-H", "127.0.0.1", "-p", str(port)],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"{url}/moto-api/", timeout=5)
                return process, url
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(log_path.read_text()) from None
                time.sleep(0.2)
    except BaseException:
        os.killpg(process.pid, 9)
        process.wait()
        raise


@pytest.fixture
def moto(tmp_path):
    binary = shutil.which("moto_server")
    if binary is None:
        pytest.skip("moto_server is not on PATH (pip install 'moto[server]')")
    # On a new port should another process take the picked one before moto binds it.
    process, url = on_a_free_port(lambda port: _start_moto(binary, tmp_path / "moto.log", port))
    try:
        yield url
    finally:
        os.killpg(process.pid, 9)
        process.wait(timeout=10)


def aws_client(service: str, url: str):  # type: ignore[no-untyped-def]
    import boto3

    return boto3.client(
        service,
        endpoint_url=url,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )


def moto_ami(url: str) -> str:
    return aws_client("ec2", url).describe_images(Owners=["amazon"])["Images"][0]["ImageId"]


# ~40 resources, each polled until ready: minutes on a busy machine. Most of it is the AWS
# provider's own fixed waits (an RDS instance: 60 s before the first poll on create and on
# delete), not CPU, so scripts/test runs it beside its two workers (mostly_waits).
@pytest.mark.mostly_waits
@pytest.mark.timeout(900)
def test_apply_and_destroy_against_moto(workspace, moto) -> None:
    services = ("ec2", "s3", "rds", "iam", "autoscaling", "ssm", "sts", "secretsmanager")
    endpoints = "\n".join(f'    {s} = "{moto}"' for s in services)
    provider = (
        'provider "aws" {\n  region = "us-east-1"\n  access_key = "testing"\n  secret_key = "testing"\n'
        "  skip_credentials_validation = true\n  skip_requesting_account_id = true\n"
        "  skip_metadata_api_check = true\n  s3_use_path_style = true\n"
        f"  endpoints {{\n{endpoints}\n  }}\n}}"
    )
    ami = moto_ami(moto)
    root, env = workspace
    root_module(
        root,
        provider,
        scheduler_ami_id=ami,
        agent_ami_id=ami,
        agent_instance_types=["g5.xlarge", "g4dn.xlarge"],
        agent_desired_count=2,
        db_deletion_protection=False,
        checkpoint_bucket_force_destroy=True,
    )
    try:
        run(["apply", "-auto-approve", "-input=false", "-no-color"], root, env)
        outputs = json.loads(run(["output", "-json"], root, env).stdout)
        host, _, port = outputs["scheduler_address"]["value"].rpartition(":")
        assert host and port == "8080"
        assert outputs["metrics_url"]["value"] == f"http://{host}:9464/metrics"
        assert outputs["checkpoint_bucket"]["value"].startswith("pedl-checkpoints-")
        assert outputs["agent_autoscaling_group"]["value"] == "pedl-agents"
        # The provisioned secrets are in Parameter Store, and neither is in Terraform's state.
        ssm = aws_client("ssm", moto)
        stored = {
            name: ssm.get_parameter(Name=f"/pedl/{name}", WithDecryption=True)["Parameter"]["Value"]
            for name in ("cluster-secret", "admin-password")
        }
        assert len(stored["cluster-secret"]) >= 32 and len(stored["admin-password"]) >= 16
        # The raw state (what `show` renders from), read without loading the provider (~4 s).
        state = run(["state", "pull"], root, env).stdout
        assert json.loads(state)["resources"]
        assert all(value not in state for value in stored.values())
    finally:
        run(["destroy", "-auto-approve", "-input=false", "-no-color"], root, env)
    assert json.loads(run(["state", "pull"], root, env).stdout)["resources"] == []
