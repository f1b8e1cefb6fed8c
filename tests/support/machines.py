"""Boots a deployment's script on a rig host (support.netns) as a fresh machine would run it.

The script runs as root, unchanged, in its own mount namespace where /etc, /var and /opt are
overlays: what it writes there (users, /etc/pedl, unit files, /opt/pedl, logs) lands in the host's
`disk/` directory, never on the test machine. What a cloud image or the network would provide is
stood in for by a few commands first on PATH: `apt-get`/`dnf` (packages are already here),
`python3 -m venv` (a venv whose packages are the test's own, with a `pip` that installs nothing),
`curl` to the instance metadata service (answers from the host's metadata), and `systemctl`
(support/fake_systemctl.py, which starts units from their unit files). Everything else the script
runs, it runs for real: useradd, install, chown, pedl-scheduler init, boto3 against the AWS API
(moto on another host), the services themselves.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from support.netns import Host

VENV = Path(sys.executable).parent.parent
FAKE_SYSTEMCTL = Path(__file__).with_name("fake_systemctl.py")
OVERLAID = ("etc", "var", "opt")

_BOOT = """set -e
# Never rename the test machine: the hostname is set only in a UTS namespace of the machine's own.
[ "$(readlink /proc/self/ns/uts)" != "$(readlink /proc/1/ns/uts)" ] || {{ echo "no UTS ns" >&2; exit 1; }}
hostname {name}
for d in {dirs}; do
  mkdir -p "{root}/disk/$d" "{root}/overlay-work/$d"
  mount -t overlay overlay -o "lowerdir=/$d,upperdir={root}/disk/$d,workdir={root}/overlay-work/$d" "/$d"
done
if [ -f {root}/setup.sh ]; then . {root}/setup.sh; fi
cd /
exec "$@"
"""

_PACKAGES = '#!/bin/sh\necho "$(basename "$0") $*: (test machine) the packages are already installed"\n'

_CURL = """#!/bin/bash
# The instance metadata service (IMDSv2) as the host's metadata; any other URL goes to the real curl.
for arg in "$@"; do
  case "$arg" in
    http://169.254.169.254/latest/api/token) echo test-imds-token; exit 0 ;;
    http://169.254.169.254/latest/*) cat "{imds}/${{arg#http://169.254.169.254/latest/}}"; exit ;;
  esac
done
exec /usr/bin/curl "$@"
"""

_PYTHON3 = """#!/bin/bash
# `python3 -m venv DIR`: a venv holding the test's packages (pip there installs nothing).
if [ "$1" = -m ] && [ "$2" = venv ]; then
  dir="${{@: -1}}"
  mkdir -p "$dir/bin"
  cp {venv}/pyvenv.cfg "$dir/pyvenv.cfg"
  ln -sfn {venv}/lib "$dir/lib"
  ln -sfn lib "$dir/lib64"
  for f in {venv}/bin/*; do
    case "$(basename "$f")" in pip*|activate*|Activate*) ;; *) ln -sf "$f" "$dir/bin/" ;; esac
  done
  printf '#!/bin/sh\\necho "pip $*: (test machine) pedl is already in this venv"\\n' > "$dir/bin/pip"
  chmod +x "$dir/bin/pip"
  exit 0
fi
exec {python} "$@"
"""


@dataclass
class Machine:
    host: Host

    @property
    def disk(self) -> Path:
        return self.host.root / "disk"

    def file(self, absolute: str) -> Path:
        """Where a file the machine wrote at `absolute` (under /etc, /var or /opt) lies."""
        return self.disk / absolute.lstrip("/")

    def log(self, name: str = "pedl-user-data.log") -> str:
        path = self.file(f"/var/log/{name}")
        return path.read_text(errors="replace") if path.exists() else ""

    def logs(self) -> str:
        folder = self.file("/var/log")
        names = sorted(p.name for p in folder.glob("*.log")) if folder.is_dir() else []
        return "\n".join(f"==== {self.host.name}: {n}\n{self.log(n)[-4000:]}" for n in names)


def _write(path: Path, text: str) -> None:
    path.write_text(text)
    path.chmod(0o755)


def prepare(host: Host, metadata: dict[str, str] | None = None, setup: str = "") -> Machine:
    """The host's stand-ins for the image and the metadata service; `metadata` maps
    `meta-data/instance-id`-style paths to values; `setup` is shell run as root after the overlays
    are mounted (e.g. /etc/hosts lines, volume mounts)."""
    (host.root / "setup.sh").write_text(setup)
    bin_dir, imds = host.root / "machine-bin", host.root / "imds"
    bin_dir.mkdir(parents=True, exist_ok=True)
    for path, value in (metadata or {}).items():
        (imds / path).parent.mkdir(parents=True, exist_ok=True)
        (imds / path).write_text(value)
    _write(bin_dir / "apt-get", _PACKAGES)
    _write(bin_dir / "dnf", _PACKAGES)
    _write(bin_dir / "curl", _CURL.format(imds=imds))
    _write(bin_dir / "python", f'#!/bin/sh\nexec {sys.executable} "$@"\n')
    _write(bin_dir / "systemctl", f'#!/bin/sh\nexec {sys.executable} {FAKE_SYSTEMCTL} "$@"\n')
    real_python = shutil.which("python3", path="/usr/bin:/usr/local/bin") or sys.executable
    _write(bin_dir / "python3", _PYTHON3.format(venv=VENV, python=real_python))
    _write(host.root / "boot.sh", _BOOT.format(dirs=" ".join(OVERLAID), root=host.root, name=host.name))
    return Machine(host)


def boot(
    machine: Machine, argv: list[str], env: dict[str, str], log_name: str = "boot.log"
) -> subprocess.Popen:
    """Starts `argv` (e.g. bash user-data.sh) as root on the machine; wait on the process it returns."""
    host = machine.host
    environment = {
        "PATH": f"{host.root / 'machine-bin'}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "HOME": "/root",
        "LANG": "C.UTF-8",
        **env,
    }
    with open(host.root / log_name, "ab") as log:
        return subprocess.Popen(
            host.command(
                [
                    "unshare",
                    "--mount",
                    "--uts",
                    "--propagation",
                    "private",
                    "bash",
                    str(host.root / "boot.sh"),
                    *argv,
                ]
            ),
            stdout=log,
            stderr=subprocess.STDOUT,
            env=environment,
            start_new_session=True,
            cwd=host.root,
        )


def boot_and_wait(machine: Machine, argv: list[str], env: dict[str, str], timeout: float = 300) -> None:
    process = boot(machine, argv, env)
    try:
        code = process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, 9)
        code = -9
    if code != 0:
        boot_log = (machine.host.root / "boot.log").read_text(errors="replace")
        raise RuntimeError(
            f"{machine.host.name}: {argv} exited with {code}:\n{boot_log[-4000:]}\n{machine.logs()}"
        )
