"""The Terraform deployment's systemd units: every pedl service comes back after a crash."""

from __future__ import annotations

import re
from pathlib import Path

TEMPLATES = Path(__file__).resolve().parents[3] / "deploy" / "terraform" / "aws" / "templates"
HEREDOC = re.compile(r"cat > /etc/systemd/system/(\S+) <<'?UNIT'?\n(.*?)\nUNIT\n", re.S)


def _units() -> dict[str, dict[str, dict[str, str]]]:
    """unit file name -> section -> key -> value, from the heredocs the boot scripts write."""
    units: dict[str, dict[str, dict[str, str]]] = {}
    for template in TEMPLATES.glob("*.tftpl"):
        text = template.read_text()
        for name, body in HEREDOC.findall(text):
            sections: dict[str, dict[str, str]] = {}
            current: dict[str, str] = {}
            for line in body.splitlines():
                if line.startswith("["):
                    current = sections.setdefault(line.strip("[]"), {})
                elif "=" in line and not line.startswith("#"):
                    key, value = line.split("=", 1)
                    current[key] = value
            units[name] = sections
    return units


def test_every_service_restarts_on_failure_and_systemd_never_gives_up() -> None:
    units = _units()
    assert set(units) == {
        "pedl-agent.service",
        "pedl-scheduler.service",
        "pedl-checkpoint-store.service",
        "pedl-webui.service",
    }
    for name, sections in units.items():
        assert sections["Service"]["Restart"] == "on-failure", name
        assert float(sections["Service"]["RestartSec"]) > 0, name
        assert sections["Unit"]["StartLimitIntervalSec"] == "0", name
        assert sections["Install"]["WantedBy"] == "multi-user.target", name


def test_every_unit_is_enabled_at_boot() -> None:
    text = "\n".join(t.read_text() for t in TEMPLATES.glob("*.tftpl"))
    enabled = {u for line in re.findall(r"systemctl enable --now (.*)", text) for u in line.split()}
    assert enabled == set(_units())


def test_the_by_hand_units_restart_and_read_their_secret() -> None:
    """deploy/systemd (docs/DEPLOY.md): each restarts forever and names the cluster secret (and TLS)."""
    from support.fake_systemctl import parse_unit

    units = {p.name: parse_unit(p.read_text()) for p in (TEMPLATES.parents[2] / "systemd").glob("*.service")}
    assert set(units) == {"pedl-agent.service", "pedl-scheduler.service", "pedl-checkpoint-store.service",
                          "pedl-webui.service"}  # fmt: skip
    for name, unit in units.items():
        service = unit["Service"]
        assert service["Restart"] == ["on-failure"] and unit["Unit"]["StartLimitIntervalSec"] == ["0"], name
        (command,) = service["ExecStart"]
        if name != "pedl-webui.service":
            assert "--cluster-secret-file /etc/pedl/cluster-secret" in command, name
            assert "--tls-ca /etc/pedl/ca.pem" in command, name
