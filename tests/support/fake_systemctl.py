"""`systemctl` on a test host that has no systemd: starts units from their unit files as systemd would.

`enable --now UNIT...` / `start UNIT...` read /etc/systemd/system/UNIT (EnvironmentFile=, Environment=,
ExecStart= with $VAR/${VAR} taken from that environment, WorkingDirectory=, Restart=, RestartSec=) and
start a supervisor per unit that runs ExecStart, restarting it after RestartSec when Restart= says so;
output goes to /var/log/UNIT.log. `daemon-reload` does nothing. Services run as the caller (root on a
test host) with User='s home as HOME. Everything it starts stays in the caller's namespaces, so the test
ends it by killing the namespace's processes.
"""

from __future__ import annotations

import os
import pwd
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

UNIT_DIR = Path("/etc/systemd/system")
LOG_DIR = Path("/var/log")


def parse_unit(text: str) -> dict[str, dict[str, list[str]]]:
    """section -> key -> values (a key may repeat, as Environment= and EnvironmentFile= do)."""
    sections: dict[str, dict[str, list[str]]] = {}
    current: dict[str, list[str]] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            current = sections.setdefault(line.strip("[]"), {})
        elif "=" in line:
            key, value = line.split("=", 1)
            current.setdefault(key.strip(), []).append(value.strip())
    return sections


def environment_file(path: Path) -> dict[str, str]:
    values: dict[str, str] = {}
    for line in path.read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#") and "=" in line:
            key, value = line.split("=", 1)
            values[key.strip()] = value.strip().strip('"')
    return values


def unit_environment(service: dict[str, list[str]], base: dict[str, str]) -> dict[str, str]:
    env = dict(base)
    for user in service.get("User", []):
        env["HOME"] = pwd.getpwnam(user).pw_dir
        env["USER"] = user
    for entry in service.get("Environment", []):
        for word in shlex.split(entry):
            key, _, value = word.partition("=")
            env[key] = value
    for name in service.get("EnvironmentFile", []):
        optional = name.startswith("-")
        path = Path(name.lstrip("-"))
        if path.exists() or not optional:
            env.update(environment_file(path))
    return env


def exec_start(service: dict[str, list[str]], env: dict[str, str]) -> list[str]:
    """ExecStart's argv with $VAR and ${VAR} replaced from the unit's environment, as systemd does."""
    (line,) = service["ExecStart"]
    expand = re.compile(r"\$\{(\w+)\}|\$(\w+)")
    return [expand.sub(lambda m: env.get(m[1] or m[2], ""), word) for word in shlex.split(line)]


def supervise(name: str) -> None:
    service = parse_unit((UNIT_DIR / name).read_text())["Service"]
    restart = service.get("Restart", ["no"])[0]
    delay = float(service.get("RestartSec", ["0.1"])[0])
    cwd = service.get("WorkingDirectory", [None])[0]
    while True:
        env = unit_environment(service, dict(os.environ))
        code = subprocess.call(exec_start(service, env), env=env, cwd=cwd)
        print(f"fake-systemd: {name} exited with {code}", flush=True)
        if restart == "no" or (restart == "on-failure" and code == 0):
            return
        time.sleep(delay)


def start(name: str) -> None:
    if not (UNIT_DIR / name).exists():
        sys.exit(f"Failed to start {name}: Unit {name} not found.")
    LOG_DIR.mkdir(parents=True, exist_ok=True)
    with open(LOG_DIR / f"{name}.log", "ab") as log:
        subprocess.Popen(
            [sys.executable, __file__, "__supervise", name],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def main(argv: list[str]) -> None:
    if argv[:1] == ["__supervise"]:
        supervise(argv[1])
        return
    command, rest = argv[0], argv[1:]
    units = [u if "." in u else f"{u}.service" for u in rest if not u.startswith("-")]
    if command == "daemon-reload":
        return
    if command == "enable" and "--now" not in rest:
        return
    if command in ("enable", "start", "restart"):
        for unit in units:
            start(unit)
        return
    sys.exit(f"fake systemctl: {command} is not emulated")


if __name__ == "__main__":
    main(sys.argv[1:])
