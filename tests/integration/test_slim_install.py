"""`pip install pedl` is the user's install: pedl's wheel installed into a fresh virtual environment
(no system packages; pip fetches the dependencies, quickly from its cache) holds none of the
services' libraries, and every user-facing module (pedl.*, pedl's determined.*) imports there. A
module may fail only for a framework the user chooses to install (torch, TensorFlow, TensorBoard,
pandas), never for a server dependency. `pedl --help` and `pedl version` run from it."""

from __future__ import annotations

import json
import subprocess
import venv
from pathlib import Path

import pytest

from support.wheel import build_wheel

pytestmark = pytest.mark.integration

# Distributions of `pedl[server]` (and what they bring) that the slim install must not have.
SERVER_DISTRIBUTIONS = (
    "sqlalchemy", "alembic", "psycopg", "psycopg-binary", "boto3", "botocore", "s3transfer",
    "prometheus-client", "grpcio-reflection",
)  # fmt: skip
# What a user installs for a framework's trial API; a module that needs one is not a server module.
FRAMEWORKS = ("torch", "tensorflow", "keras", "tensorboard", "pandas", "tf_keras")

# Run inside the fresh environment: imports every module of pedl and determined, prints a report.
PROBE = r"""
import importlib, importlib.metadata as md, json, pkgutil, sys
from pedl.harness.compat import ensure_determined_importable
ensure_determined_importable()
import determined, pedl
report = {"installed": sorted(d.metadata["Name"].lower() for d in md.distributions()),
          "ok": [], "missing": {}, "failed": {}, "determined_at": determined.__file__}
for package in (pedl, determined):
    for module in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
        if module.name.startswith("pedl._compat"):
            continue
        try:
            importlib.import_module(module.name)
            report["ok"].append(module.name)
        except ModuleNotFoundError as e:
            report["missing"][module.name] = (e.name or "").split(".")[0]
        except Exception as e:
            report["failed"][module.name] = repr(e)
print(json.dumps(report))
"""


@pytest.fixture(scope="module")
def slim_env(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("slim")
    wheel, _ = build_wheel(tmp)
    env_dir = tmp / "venv"
    venv.create(env_dir, with_pip=True, system_site_packages=False)
    install = subprocess.run(
        [str(env_dir / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check",
         str(wheel)],
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert install.returncode == 0, install.stdout[-3000:] + install.stderr[-3000:]
    return env_dir


def test_pip_install_pedl_brings_no_server_dependency(slim_env: Path) -> None:
    done = subprocess.run(
        [str(slim_env / "bin" / "python"), "-c", PROBE],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=slim_env,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.splitlines()[-1])
    assert not set(SERVER_DISTRIBUTIONS) & set(report["installed"]), report["installed"]
    assert "/site-packages/pedl/_compat/determined/" in report["determined_at"], report["determined_at"]
    assert report["failed"] == {}, report["failed"]
    not_frameworks = {m: dep for m, dep in report["missing"].items() if dep not in FRAMEWORKS}
    assert not_frameworks == {}, not_frameworks
    # The trial APIs, the harness, the CLI and the SDK themselves import in the slim install.
    for module in (
        "pedl.cli.main",
        "pedl.harness.main",
        "pedl.experimental",
        "determined.core",
        "pedl.simple",
    ):
        assert module in report["ok"], (module, report["missing"].get(module))


def test_the_slim_install_runs_the_cli(slim_env: Path, tmp_path: Path) -> None:
    env = {"PATH": f"{slim_env / 'bin'}:/usr/bin:/bin", "PEDL_HOME": str(tmp_path)}
    helped = subprocess.run(["pedl", "--help"], capture_output=True, text=True, env=env, timeout=120)
    assert helped.returncode == 0 and "manage experiments" in helped.stdout, helped.stderr
    # No scheduler listens here: the CLI says so in one line after printing its own version.
    version = subprocess.run(
        ["pedl", "-m", "127.0.0.1:9", "version"], capture_output=True, text=True, env=env, timeout=120
    )
    assert version.stdout.startswith("client: 0.1.0"), version.stdout
    assert version.stderr.startswith("error: cannot reach the pedl scheduler at 127.0.0.1:9"), version.stderr
    assert "Traceback" not in version.stderr
