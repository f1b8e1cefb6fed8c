"""`pedl-agent --trial-pids-limit`: which mechanism bounds a trial's processes on which host (a pids cgroup
of its own on cgroup v1 or v2; RLIMIT_NPROC only where it cannot starve another trial; else none, said in
the trial's log), and, where this machine lets the test write cgroups, a real one that stops a fork bomb
and is gone with all of it afterwards."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pedl_agent import pids_cgroup
from pedl_agent.config import parse_args
from pedl_agent.pids_cgroup import (
    AGENT_LEAF,
    CGROUP_ROOT,
    NONE,
    RLIMIT,
    V1,
    V2,
    PidsPlan,
    ProcessLimit,
    TrialCgroups,
    choose,
    enter_argv,
    members,
    own_cgroup,
    refused_forks,
    refused_line,
    remove,
)

HYBRID = "9:name=systemd:/\n8:pids:/agents/a1\n4:memory:/x\n0::/agents/a1\n"
PURE_V2 = "0::/system.slice/pedl-agent.service\n"


def _v1_host(root: Path) -> None:
    (root / "pids" / "agents" / "a1").mkdir(parents=True)
    (root / "pids" / "cgroup.procs").write_text("")


def _v2_host(root: Path, controllers: str = "cpu memory pids") -> Path:
    own = root / "system.slice" / "pedl-agent.service"
    own.mkdir(parents=True)
    (root / "cgroup.controllers").write_text(controllers + "\n")
    (own / "cgroup.controllers").write_text(controllers + "\n")
    return own


def test_own_cgroup_reads_the_v1_controller_line_and_the_v2_line() -> None:
    assert own_cgroup(HYBRID, "pids") == "/agents/a1" and own_cgroup(HYBRID, "") == "/agents/a1"
    assert (
        own_cgroup(PURE_V2, "pids") is None and own_cgroup(PURE_V2, "") == "/system.slice/pedl-agent.service"
    )
    assert own_cgroup("1:cpu,cpuacct:/a\n", "cpuacct") == "/a"


def test_a_writable_v1_pids_hierarchy_is_used_first(tmp_path: Path) -> None:
    _v1_host(tmp_path)
    plan = choose(4096, HYBRID, slots=4, trials_as_root=False, root=tmp_path)
    assert plan == PidsPlan(V1, 4096, tmp_path / "pids" / "agents" / "a1")
    assert (
        plan.rlimit == 0 and plan.trial_line() == ""
    )  # the cgroup bounds it: the harness leaves RLIMIT_NPROC


def test_pure_cgroup_v2_with_the_pids_controller_is_used(tmp_path: Path) -> None:
    own = _v2_host(tmp_path)
    assert choose(100, PURE_V2, 2, False, root=tmp_path) == PidsPlan(V2, 100, own)


def test_read_only_cgroups_fall_back_to_rlimit_on_one_slot_and_to_none_on_more(tmp_path: Path) -> None:
    _v2_host(tmp_path)
    read_only = choose(64, PURE_V2, 1, False, root=tmp_path, writable=lambda p: False)
    assert read_only.mechanism == RLIMIT and read_only.rlimit == 64
    line = read_only.trial_line()
    assert "RLIMIT_NPROC" in line and "--trial-pids-limit" in line and "is not writable" in line
    shared = choose(64, PURE_V2, 3, False, root=tmp_path, writable=lambda p: False)
    assert shared.mechanism == NONE and shared.rlimit == 0
    assert "no process limit applies to this trial" in shared.trial_line()
    assert "starve" in shared.trial_line() and "3 slots" in shared.trial_line()


def test_no_pids_controller_and_root_trials_get_none_with_the_reason(tmp_path: Path) -> None:
    _v2_host(tmp_path, controllers="cpu memory")
    plan = choose(64, PURE_V2, 1, trials_as_root=True, root=tmp_path)
    assert plan.mechanism == NONE and "no pids controller" in plan.why_not_cgroup
    assert "root" in plan.trial_line()
    bare = choose(64, "", 1, False, root=tmp_path / "nothing")
    assert bare.mechanism == RLIMIT and "no cgroup pids controller is mounted" in bare.trial_line()


def test_zero_asks_for_no_limit_and_says_nothing(tmp_path: Path) -> None:
    _v1_host(tmp_path)
    plan = choose(0, HYBRID, 1, False, root=tmp_path)
    assert plan.mechanism == NONE and plan.rlimit == 0 and plan.trial_line() == ""


def test_the_flag_defaults_to_8192_and_refuses_negatives(tmp_path: Path, capsys) -> None:
    assert parse_args(["--work-dir", str(tmp_path)], environ={}).trial_pids_limit == 8192
    with pytest.raises(SystemExit):
        parse_args(["--work-dir", str(tmp_path), "--trial-pids-limit", "-1"], environ={})
    assert "--trial-pids-limit must be 0 (no limit) or more" in capsys.readouterr().err


def test_a_run_without_a_cgroup_gets_its_trial_line(tmp_path: Path) -> None:
    limit = ProcessLimit(PidsPlan(NONE, 64, None, "no cgroup pids controller is mounted"))
    cgroup, line = limit.make("7-1")
    assert cgroup is None and "no process limit applies" in line
    assert enter_argv(None, ["python"]) == ["python"]


def test_refused_forks_are_read_from_pids_events_and_named_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "pids.events").write_text("max 37\n")
    assert refused_forks(tmp_path) == 37 and refused_forks(tmp_path / "gone") == 0
    line = refused_line(37, 128)
    assert "process limit of 128" in line and "37 of its forks" in line and "--trial-pids-limit" in line


def test_on_v2_an_agent_holding_its_cgroup_moves_into_a_leaf_to_hand_pids_down(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """cgroup v2 refuses (EBUSY) to hand a controller down from a cgroup holding processes (a systemd
    unit's, a container's root): the agent moves into a leaf of its directory first."""
    own = _v2_host(tmp_path)
    cgroups = TrialCgroups(choose(64, PURE_V2, 2, False, root=tmp_path))
    leaf = cgroups.home / AGENT_LEAF
    enabled: list[Path] = []

    def enable(cgroup: Path) -> None:
        if cgroup == own and not (leaf / "cgroup.procs").exists():
            raise OSError(errno.EBUSY, "Device or resource busy")
        enabled.append(cgroup)

    monkeypatch.setattr(pids_cgroup, "_enable_pids", enable)
    assert cgroups.setup() == ""
    assert (leaf / "cgroup.procs").read_text().strip() == str(os.getpid())
    assert enabled == [own, cgroups.home]
    (cgroups.home / "3-1").mkdir()
    cgroups.close()  # the runs' cgroups go; the agent's own leaf stays while it lives
    assert leaf.is_dir() and not (cgroups.home / "3-1").exists()


def test_on_v2_a_cgroup_that_cannot_hand_pids_down_falls_back_with_the_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    own = _v2_host(tmp_path)
    cgroups = TrialCgroups(choose(64, PURE_V2, 2, False, root=tmp_path))

    def enable(cgroup: Path) -> None:
        raise OSError(errno.EBUSY, "Device or resource busy")

    monkeypatch.setattr(pids_cgroup, "_enable_pids", enable)
    why = cgroups.setup()
    assert "cannot make" in why and "Device or resource busy" in why
    assert (own / "cgroup.procs").read_text().strip() == str(os.getpid())  # moved back


def _v1_writable() -> bool:
    own = own_cgroup(Path("/proc/self/cgroup").read_text(), "pids") if sys.platform == "linux" else None
    parent = CGROUP_ROOT / "pids" / (own or "").lstrip("/")
    return own is not None and (parent / "cgroup.procs").exists() and os.access(parent, os.W_OK)


BOMB = """
import os, time
born = 0
try:
    while born < 200:
        if os.fork() == 0:
            time.sleep(60)
            os._exit(0)
        born += 1
    print("unbounded")
except BlockingIOError:
    print(f"EAGAIN after {born}", flush=True)
time.sleep(60)
"""


@pytest.mark.skipif(not _v1_writable(), reason="needs a writable cgroup v1 pids hierarchy (root)")
def test_a_real_pids_cgroup_stops_a_fork_bomb_and_goes_with_all_of_it() -> None:
    plan = choose(16, Path("/proc/self/cgroup").read_text(), 1, False)
    assert plan.mechanism == V1
    cgroups = TrialCgroups(plan)
    assert cgroups.setup() == ""
    try:
        cgroup = cgroups.make("1-1")
        assert (cgroup / "pids.max").read_text().strip() == "16"
        argv = enter_argv(cgroup, [sys.executable, "-c", BOMB])
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, start_new_session=True)
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("EAGAIN after "), line
        assert int(line.split()[-1]) < 16
        assert refused_forks(cgroup) >= 1
        bomb = members(cgroup)
        assert proc.pid in bomb and len(bomb) >= 2
        assert remove(cgroup)
        proc.wait(timeout=30)
        assert not cgroup.exists()
        for pid in bomb:  # reaped (the shell's) or reparented and reaped by init: gone either way
            assert not Path(f"/proc/{pid}").exists() or "zombie" in _state(pid) or pid == proc.pid
    finally:
        cgroups.close()
    assert not cgroups.home.exists()


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/status").read_text().split("State:")[1].splitlines()[0].lower()
    except (OSError, IndexError):
        return "zombie"
