"""The bubblewrap command line a harness runs under, and the --isolation flag."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pedl_agent.config import parse_args
from pedl_agent.sandbox import Sandbox, default_isolation, make_sandbox
from pedl_agent.trial_view import TrialUser

HAVE_BWRAP = shutil.which("bwrap") is not None


def _pairs(argv: list[str], flag: str) -> list[str]:
    return [argv[i + 1] for i, a in enumerate(argv) if a == flag]


def test_wrap_builds_an_allow_list_view_and_binds_only_this_run(tmp_path: Path) -> None:
    shared = tmp_path / "datasets"
    secret = shared / "secret"
    shared.mkdir()
    secret.write_text("s" * 40)
    work = tmp_path / "work"
    trial = work / "trials" / "3-1"
    trial.mkdir(parents=True)
    sock = work / "sock" / "3-1.sock"
    sock.parent.mkdir()
    venv = tmp_path / "clone" / ".venv"
    sandbox = Sandbox(
        "/usr/bin/bwrap",
        hidden=(work, secret, shared / "absent"),
        devices=("/dev/nvidia0",),
        shared=(shared,),
        python=(venv,),
    )
    argv = sandbox.wrap(["python", "-m", "pedl.harness"], trial, trial / "model_def", sock)
    assert argv[0] == "/usr/bin/bwrap" and argv[-4:] == ["--", "python", "-m", "pedl.harness"]
    sources = _pairs(argv, "--ro-bind")
    assert "/" not in sources and "/usr" in sources and "/etc/ssl" in sources
    assert not {"/etc", "/root", "/home", "/var", "/srv", "/etc/shadow", "/etc/passwd"} & set(sources)
    assert str(trial / ".pedl-etc" / "passwd") in _pairs(argv, "--ro-bind")  # a generated /etc/passwd
    # The environment after the run's own /tmp: a checkout under /tmp keeps its .venv (and only that).
    assert argv.index(str(venv)) > argv.index("/tmp")
    assert str(venv.parent) not in sources + _pairs(argv, "--bind")
    assert str(work) not in _pairs(argv, "--tmpfs")  # not in the view at all, nothing to cover
    assert argv[argv.index(str(trial / ".tmp")) + 1] == "/tmp"  # shared by the run's ranks
    assert str(trial) in _pairs(argv, "--bind") and str(sock) in _pairs(argv, "--bind")
    assert argv[argv.index("/dev/null") + 1] == str(secret)  # a hidden file in a shared dir reads empty
    assert "absent" not in " ".join(argv)
    assert "--unshare-pid" in argv and "--die-with-parent" in argv and "--unshare-net" not in argv
    assert _pairs(argv, "--dev-bind") == ["/dev/nvidia0"]
    assert _pairs(argv, "--chdir") == [str(trial / "model_def")]
    assert argv[argv.index("--remount-ro", len(argv) - 12) + 1] == "/"


def test_a_root_agents_trial_runs_as_its_user_with_no_capability(tmp_path: Path) -> None:
    trial = tmp_path / "trials" / "1-1"
    trial.mkdir(parents=True)
    user = TrialUser(1234, 4321, "alice", "lab")
    argv = Sandbox("/usr/bin/bwrap").wrap(["python"], trial, trial, tmp_path / "1-1.sock", user=user)
    tail = argv[argv.index("--") + 1 :]
    assert Path(tail[0]).name == "setpriv" and "--reuid=1234" in tail and "--regid=4321" in tail
    assert "--clear-groups" in tail and "--bounding-set=-all" in tail and tail[-1] == "python"
    assert set(_pairs(argv, "--cap-add")) == {"CAP_SETUID", "CAP_SETGID", "CAP_SETPCAP"}
    assert f"alice:x:1234:4321:pedl trial:{trial}:" in (trial / ".pedl-etc" / "passwd").read_text()
    assert "lab:x:4321:" in (trial / ".pedl-etc" / "group").read_text()


def test_trial_user_flag_takes_numbers_or_names_and_never_root() -> None:
    parsed = TrialUser.parse("1234:4321")
    assert (parsed.uid, parsed.gid) == (1234, 4321)
    assert TrialUser.parse("nobody").uid == 65534
    with pytest.raises(ValueError, match="never run as root"):
        TrialUser.parse("0")
    with pytest.raises(ValueError, match="no such user"):
        TrialUser.parse("no-such-user-here")
    assert parse_args(["--trial-user", "1234:4321"], environ={}).trial_user == parsed
    with pytest.raises(SystemExit):
        parse_args(["--trial-user", "root"], environ={})


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
        "import os\n"
        "open('/tmp/scratch', 'w').write('t')\n"
        "open('/dev/shm/segment', 'w').write('s')\n"
        f"print(os.path.exists({str(other / 'private')!r}))\n"
        "open('mine', 'w').write('ok')\n"
        "print(os.getpid(), sorted(p for p in os.listdir('/proc') if p.isdigit()))\n"
        "try:\n    open('/etc/pedl-sandbox-probe', 'w')\nexcept OSError as e:\n    print('ro', e.errno)\n"
        "print([p for p in ('/root', '/home', '/var/lib', '/srv', '/etc/shadow') if os.path.exists(p)])\n"
        "print(os.getuid(), open('/etc/passwd').read().count(':x:'))\n"
    )
    out = subprocess.run(
        sandbox.wrap(["/usr/bin/python3", "-c", script], trial, trial, sock),
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
    assert out[2] == "ro 30"  # EROFS: nothing of the view but its own paths is writable
    assert out[3] == "[]"  # the host's homes, state and shadow are not in its view
    uid, users = out[4].split()
    assert int(uid) != 0 and int(users) <= 3  # root, nobody, the run's own user: not the host's
    if os.geteuid() == 0:
        assert (trial / "mine").stat().st_uid == int(uid) == 65534  # a root agent's default user


@pytest.mark.skipif(not HAVE_BWRAP, reason="bubblewrap is not installed")
def test_a_python_environment_under_tmp_runs_in_the_sandbox_and_its_checkout_stays_out(
    tmp_path: Path,
) -> None:
    """A checkout under /tmp with its .venv inside: the run's private /tmp must not hide the .venv,
    and the rest of the checkout is not in the view."""
    clone = tmp_path / "clone"
    (clone / "secret.txt").parent.mkdir(parents=True)
    (clone / "secret.txt").write_text("not for trials")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(clone / ".venv")], check=True)
    python = clone / ".venv" / "bin" / "python"
    trial = tmp_path / "work" / "trials" / "1-1"
    trial.mkdir(parents=True)
    sock = tmp_path / "work" / "sock" / "1-1.sock"
    sock.parent.mkdir()
    sock.write_text("")
    sandbox = make_sandbox("bwrap", [tmp_path / "work"], False, harness_programs=[str(python)])
    assert sandbox is not None and clone / ".venv" in sandbox.python
    script = f"import os, sys; print(sys.prefix, os.path.exists({str(clone / 'secret.txt')!r}))"
    done = subprocess.run(
        sandbox.wrap([str(python), "-c", script], trial, trial, sock), capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [str(clone / ".venv"), "False"]


@pytest.mark.skipif(not HAVE_BWRAP, reason="bubblewrap is not installed")
def test_a_harness_python_inside_a_hidden_path_is_refused_at_start(tmp_path: Path) -> None:
    python = tmp_path / "work" / "venv" / "bin" / "python"
    with pytest.raises(ValueError, match=r"hides .*work from trials, but the harness program .*python"):
        make_sandbox("bwrap", [tmp_path / "work"], False, harness_programs=[str(python)])
    assert make_sandbox("bwrap", [tmp_path / "work"], False, harness_programs=["/usr/bin/python3"])
