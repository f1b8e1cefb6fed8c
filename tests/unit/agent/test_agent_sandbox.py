"""The bubblewrap command line a harness runs under, and the --isolation flag."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from pedl_agent.config import parse_args
from pedl_agent.sandbox import Sandbox, default_isolation, make_sandbox

HAVE_BWRAP = shutil.which("bwrap") is not None


def _pairs(argv: list[str], flag: str) -> list[str]:
    return [argv[i + 1] for i, a in enumerate(argv) if a == flag]


def test_wrap_hides_the_agents_state_and_binds_only_this_run(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text("s" * 40)
    work = tmp_path / "work"
    trial = work / "trials" / "3-1"
    trial.mkdir(parents=True)
    sock = work / "sock" / "3-1.sock"
    sock.parent.mkdir()
    sandbox = Sandbox("/usr/bin/bwrap", hidden=(work, secret, tmp_path / "absent"), devices=("/dev/nvidia0",))
    argv = sandbox.wrap(["python", "-m", "pedl.harness"], trial, trial / "model_def", sock)
    assert argv[0] == "/usr/bin/bwrap" and argv[-4:] == ["--", "python", "-m", "pedl.harness"]
    assert argv[1:4] == ["--ro-bind", "/", "/"]
    assert str(work) in _pairs(argv, "--tmpfs")
    assert argv[argv.index(str(trial / ".tmp")) + 1] == "/tmp"  # shared by the run's ranks
    assert str(trial) in _pairs(argv, "--bind") and str(sock) in _pairs(argv, "--bind")
    assert argv[argv.index("/dev/null") + 1] == str(secret)  # a hidden file reads as empty
    assert "absent" not in " ".join(argv)
    assert "--unshare-pid" in argv and "--die-with-parent" in argv and "--unshare-net" not in argv
    assert _pairs(argv, "--dev-bind") == ["/dev/nvidia0"]
    assert _pairs(argv, "--chdir") == [str(trial / "model_def")]


def test_isolation_flag_defaults_to_bwrap_where_installed_and_refuses_others() -> None:
    assert parse_args([], environ={}).isolation == default_isolation()
    assert default_isolation() == ("bwrap" if HAVE_BWRAP else "none")
    assert parse_args(["--isolation", "none"], environ={}).isolation == "none"
    with pytest.raises(SystemExit):
        parse_args(["--isolation", "docker"], environ={})
    assert make_sandbox("none", [], False) is None


def test_bwrap_isolation_without_bwrap_is_refused_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(ValueError, match="--isolation bwrap: bubblewrap"):
        make_sandbox("bwrap", [], False)


@pytest.mark.skipif(not HAVE_BWRAP, reason="bubblewrap is not installed")
def test_a_sandboxed_process_sees_only_its_trial(tmp_path: Path) -> None:
    work = tmp_path / "work"
    trial = work / "trials" / "1-1"
    other = work / "trials" / "2-1"
    trial.mkdir(parents=True)
    other.mkdir(parents=True)
    (other / "private").write_text("other trial")
    sock = work / "sock" / "1-1.sock"
    sock.parent.mkdir()
    sock.write_text("")
    sandbox = make_sandbox("bwrap", [work], False)
    assert sandbox is not None
    script = (
        "import os, pathlib\n"
        "open('/tmp/scratch', 'w').write('t')\n"
        "open('/dev/shm/segment', 'w').write('s')\n"
        f"print(os.path.exists({str(other / 'private')!r}))\n"
        "open('mine', 'w').write('ok')\n"
        "print(os.getpid(), sorted(p for p in os.listdir('/proc') if p.isdigit()))\n"
        "try:\n    open('/etc/pedl-sandbox-probe', 'w')\nexcept OSError as e:\n    print('ro', e.errno)\n"
        f"try:\n    open({str(work / 'planted')!r}, 'w')\nexcept OSError as e:\n    print('ro', e.errno)\n"
    )
    out = subprocess.run(
        sandbox.wrap(["python3", "-c", script], trial, trial, sock),
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    assert out[0] == "False"
    assert (trial / "mine").read_text() == "ok"
    assert (trial / ".tmp" / "scratch").read_text() == "t"  # its /tmp lives in its trial dir
    shm = Sandbox.shm_dir(trial)
    assert shm is not None and (shm / "segment").read_text() == "s"
    sandbox.release(trial)
    assert not shm.exists()
    pid, seen = out[1].split(" ", 1)
    assert int(pid) <= 3 and seen == "['1', '2']"  # its own namespace: bwrap's init and itself
    assert out[2] == "ro 30"  # EROFS
    assert out[3] == "ro 30" and not (work / "planted").exists()  # the covered work dir is read-only too


@pytest.mark.skipif(not HAVE_BWRAP, reason="bubblewrap is not installed")
def test_a_harness_python_inside_a_hidden_path_is_refused_at_start(tmp_path: Path) -> None:
    python = tmp_path / "work" / "venv" / "bin" / "python"
    with pytest.raises(ValueError, match=r"hides .*work from trials, but the harness program .*python"):
        make_sandbox("bwrap", [tmp_path / "work"], False, harness_programs=[str(python)])
    assert make_sandbox("bwrap", [tmp_path / "work"], False, harness_programs=["/usr/bin/python3"])
