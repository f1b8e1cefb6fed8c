"""Disk hygiene on an agent: sizes and durations as operators write them, what a trial directory
occupies, directories removed when runs end (failed ones kept a while), and a capped, bounded log."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from pedl.v1 import agent_pb2
from pedl_agent.config import parse_args
from pedl_agent.disk import REMOVE_AFTER, TrialDirs, parse_duration, parse_size, usage_bytes, watch_usage
from pedl_agent.load_limit import watch_load
from pedl_agent.log_relay import LogRelay


def test_sizes_and_durations_parse_as_written_and_bad_ones_name_the_flag(tmp_path: Path, capsys) -> None:
    assert parse_size("20G") == 20 * 1024**3 and parse_size("1.5MiB") == 1536 * 1024 and parse_size("0") == 0
    assert parse_duration("24h") == 86400 and parse_duration("30m") == 1800 and parse_duration("90") == 90
    cfg = parse_args(
        ["--work-dir", str(tmp_path), "--trial-disk-limit", "2G", "--keep-failed-trial-dirs", "1h"],
        environ={},
    )
    assert (cfg.trial_disk_limit_bytes, cfg.keep_failed_trial_dirs_seconds) == (2 * 1024**3, 3600)
    assert cfg.trial_log_limit_bytes == 1024**3  # the default cap
    # A hung import ends in minutes, not the hour it held a slot before (#37.4).
    assert cfg.trial_load_timeout_seconds == 15 * 60
    with pytest.raises(SystemExit):
        parse_args(["--work-dir", str(tmp_path), "--trial-disk-limit", "lots"], environ={})
    assert "--trial-disk-limit: 'lots' is not a size such as 20G" in capsys.readouterr().err


def test_usage_counts_allocated_bytes_hardlinks_once_and_not_symlink_targets(tmp_path: Path) -> None:
    trial = tmp_path / "trial"
    (trial / "sub").mkdir(parents=True)
    (trial / "sub" / "data").write_bytes(os.urandom(1 << 20))
    os.link(trial / "sub" / "data", trial / "again")
    with open(trial / "sparse", "wb") as f:
        f.truncate(10 * 1024**3)  # 10 GiB apparent, nothing allocated
    outside = tmp_path / "outside"
    outside.write_bytes(os.urandom(4 << 20))
    (trial / "link").symlink_to(outside)
    used = usage_bytes(trial)
    assert 1 << 20 <= used < 2 << 20


def test_watch_reports_once_the_limit_is_passed(tmp_path: Path) -> None:
    seen: list[int] = []

    async def scenario() -> None:
        task = asyncio.ensure_future(watch_usage(tmp_path, 512 * 1024, seen.append, poll_seconds=0.01))
        await asyncio.sleep(0.05)
        assert not seen
        (tmp_path / "big").write_bytes(os.urandom(1 << 20))
        await asyncio.wait_for(task, 5)

    asyncio.run(scenario())
    assert len(seen) == 1 and seen[0] >= 1 << 20


def test_finished_runs_go_failed_ones_stay_until_due_and_leftovers_count_as_failed(tmp_path: Path) -> None:
    root = tmp_path / "trials"
    done, failed, leftover, live = (root / name for name in ("1-1", "2-1", "3-1", "4-1"))
    for d in (done, failed, leftover, live):
        (d / "nested").mkdir(parents=True)
        (d / "nested" / "f").write_text("x")
    os.chmod(done / "nested", 0o000)  # a trial that locked its own files
    dirs = TrialDirs(root, keep_failed=3600)
    dirs.finish(done, failed=False)
    dirs.finish(failed, failed=True, now=1000)
    assert not done.exists() and (failed / REMOVE_AFTER).read_text().strip() == "4600"
    assert dirs.sweep([live], now=2000) == []
    assert failed.exists() and (leftover / REMOVE_AFTER).is_file() and not (live / REMOVE_AFTER).exists()
    assert dirs.sweep([live], now=10**10) == [failed, leftover]
    assert sorted(p.name for p in root.iterdir()) == ["4-1"]
    TrialDirs(root, keep_failed=0).finish(live, failed=True)
    assert not live.exists()


def test_log_volume_cap_drops_the_rest_and_says_so_once_and_the_file_is_bounded(tmp_path: Path) -> None:
    sent: list[agent_pb2.ConnectRequest] = []
    log = tmp_path / "trial.log"

    async def scenario() -> None:
        relay = LogRelay(1, 1, sent.append, log, flush_lines=10, limit_bytes=1000, file_bytes=600)
        for i in range(100):
            relay.add("stdout", f"line {i:03} " + "x" * 40)  # 50 bytes each with the newline
        relay.add("pedl", "an agent notice is never dropped")
        relay.close()

    asyncio.run(scenario())
    lines = [line for m in sent for line in m.trial_logs.lines]
    stdout = [line.message for line in lines if line.source == "stdout"]
    assert len(stdout) == 20 and stdout[-1].startswith("line 019")
    notices = [line.message for line in lines if line.source == "pedl"]
    assert notices[-1] == (
        "pedl: dropped 80 lines (4000 bytes) of this run's output past the agent's per-trial log limit "
        "of 1000 bytes (pedl-agent --trial-log-limit)"
    )
    assert len(notices) == 2
    assert log.stat().st_size <= 600 and (tmp_path / "trial.log.1").stat().st_size <= 600
    assert "dropped 80 lines" in log.read_text()


def test_a_run_that_does_not_load_in_time_is_reported_once_and_one_that_loads_is_not() -> None:
    reasons: list[str] = []

    async def scenario() -> None:
        loaded = asyncio.Event()
        await watch_load(loaded, 0.05, reasons.append)
        loaded.set()
        await watch_load(loaded, 0.05, reasons.append)

    asyncio.run(scenario())
    assert len(reasons) == 1 and "within 0.05 s" in reasons[0] and "--trial-load-timeout" in reasons[0]


def test_a_runs_dev_shm_counts_with_its_directory(tmp_path: Path) -> None:
    """What a run writes into its /dev/shm (RAM) counts against its disk limit too."""
    trial, shm = tmp_path / "trial", tmp_path / "shm"
    trial.mkdir()
    shm.mkdir()
    (trial / "half").write_bytes(os.urandom(384 * 1024))
    seen: list[int] = []

    async def scenario() -> None:
        task = asyncio.ensure_future(watch_usage([trial, shm], 512 * 1024, seen.append, poll_seconds=0.01))
        await asyncio.sleep(0.05)
        assert not seen
        (shm / "segment").write_bytes(os.urandom(384 * 1024))
        await asyncio.wait_for(task, 5)

    asyncio.run(scenario())
    assert len(seen) == 1 and seen[0] >= 768 * 1024
