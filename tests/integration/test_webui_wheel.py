"""The web UI as an installed wheel serves its pages: pedl built as a wheel ships every static file
(without setuptools' "installing as data is deprecated" warning), and `pedl-webui` run from the
unpacked wheel, not from this checkout, answers /login and /static/ with them."""

from __future__ import annotations

import urllib.request
import zipfile
from pathlib import Path

import pytest

from support.processes import start, stop
from support.wheel import build_wheel

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
STATIC = ROOT / "services" / "webui" / "static"
RUN_FROM = (
    "import sys; sys.path.insert(0, sys.argv[1]); import pedl_webui; "
    "assert pedl_webui.__file__.startswith(sys.argv[1]), pedl_webui.__file__; "
    "from pedl_webui.main import main; sys.exit(main(sys.argv[2:]))"
)


def test_the_wheel_ships_and_serves_every_static_file(tmp_path: Path) -> None:
    wheel, output = build_wheel(tmp_path)
    assert "as data is deprecated" not in output and "is absent from the `packages`" not in output, output
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = {f"pedl_webui/static/{p.relative_to(STATIC)}" for p in STATIC.rglob("*") if p.is_file()}
    assert expected and expected <= names, sorted(expected - names)

    unpacked = tmp_path / "installed"
    zipfile.ZipFile(wheel).extractall(unpacked)
    port_file = tmp_path / "webui.port"
    # Static files and the login page need no scheduler; nothing listens at this --master.
    args = ["--master", "127.0.0.1:9", "--port", "0", "--port-file", str(port_file)]
    webui = start("webui", ["python", "-c", RUN_FROM, str(unpacked), *args], tmp_path, port_file)
    try:
        for path, marker in [
            ("/login", b"<form"),
            ("/static/common.js", b"use strict"),
            ("/static/vendor/uPlot.iife.min.js", b"uPlot"),
            ("/static/app.css", b"{"),
        ]:
            with urllib.request.urlopen(f"http://{webui.address}{path}", timeout=30) as response:
                assert response.status == 200 and marker in response.read(), path
    finally:
        stop(webui.process)
