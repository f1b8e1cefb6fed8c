"""A Trial author's `pedl` carries the client side of auth only: checking tokens, minting trial
tokens and the rules of who may do what ship in the server-only package `pedl_server_auth`."""

from __future__ import annotations

import ast
import runpy
import subprocess
import sys
from pathlib import Path
from unittest import mock

import pytest

ROOT = Path(__file__).resolve().parents[2]
SERVER_PACKAGES = ("pedl_server_auth", "pedl_scheduler", "pedl_checkpoint_store", "pedl_agent", "pedl_webui")


def _setup_packages() -> tuple[list[str], dict[str, str]]:
    """What `pip wheel .` packs: the packages and folders setup.py hands to setuptools."""
    with mock.patch("setuptools.setup") as setup:
        runpy.run_path(str(ROOT / "setup.py"))
    kwargs = setup.call_args.kwargs
    return kwargs["packages"], kwargs["package_dir"]


def test_the_server_side_of_auth_is_its_own_package_outside_pedl() -> None:
    packages, folders = _setup_packages()
    assert folders["pedl_server_auth"] == "services/server_auth"
    assert folders["pedl"] == "sdk/pedl"
    assert "pedl.auth" in packages and "pedl_server_auth" in packages
    shipped_in_pedl = {p.relative_to(ROOT / "sdk/pedl").as_posix() for p in (ROOT / "sdk/pedl").rglob("*.py")}
    for gone in ("_server_auth.py", "_trial_token.py", "_bearer.py", "auth.py"):
        assert gone not in shipped_in_pedl
    client = {"auth/login.py", "auth/token_store.py", "auth/bearer.py", "auth/credentials.py"}
    assert client <= shipped_in_pedl


def test_nothing_in_pedl_imports_server_code() -> None:
    offenders = []
    for path in (ROOT / "sdk/pedl").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names = [node.module]
            server = [n for n in names if n.split(".")[0] in SERVER_PACKAGES]
            offenders += [f"{path.relative_to(ROOT)}: {n}" for n in server]
    assert offenders == []


@pytest.mark.parametrize("module", ["pedl._server_auth", "pedl._trial_token", "pedl._bearer"])
def test_the_old_loose_modules_are_gone(module: str) -> None:
    with pytest.raises(ModuleNotFoundError):
        __import__(module)


def test_a_user_logs_in_through_the_paths_they_already_use() -> None:
    """`pedl.login.login` (scripts) and Determined's `client.login` reach the one login of pedl.auth."""
    code = (
        "import sys, pedl.auth, pedl.auth.login, pedl.login, pedl.harness, pedl.experimental.client\n"
        "from pedl.harness.compat import ensure_determined_importable\n"
        "ensure_determined_importable()\n"
        "from determined.experimental import client\n"
        "client.login('localhost:1')  # names the master; logs in only with user and password\n"
        "assert pedl.login.login is pedl.auth.login.login\n"
        "assert callable(pedl.auth.credential_for) and callable(pedl.auth.save_login)\n"
        f"print(sorted(m for m in sys.modules if m.split('.')[0] in {SERVER_PACKAGES!r}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", "a client import loaded server modules: " + out.stdout
