"""Every benchmark's `--smoke` mode runs its real code path and prints its figure line, so none rots.

Asserts on the shape of each figure line (a ratio against the run's own baseline), never on values.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from support.slurm import unavailable_reason as slurm_unavailable

ROOT = Path(__file__).resolve().parents[2]
NUMBER = r"[0-9][0-9,]*\.?[0-9]*"


def smoke(script: str, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / script), "--smoke", *args],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, f"{script} --smoke exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def test_the_checkpoint_throughput_benchmark_runs_in_smoke_mode() -> None:
    out = smoke("checkpoint_throughput.py")
    assert "== 8 MiB checkpoint, best of 1, through SeaweedFS" in out
    for direction in ("up", "down"):
        assert re.search(rf"ratio pedl/boto3 +{direction} *: {NUMBER}  median {NUMBER}", out), out
        assert re.search(rf"ratio streamed/boto3 +{direction} *: {NUMBER}  median {NUMBER}", out), out
    assert re.search(rf"torch\.save \+ pedl upload \(S3\) +{NUMBER} s  \({NUMBER}x\)", out), out
    assert re.search(rf"ratio pedl/boto3 +restore: {NUMBER}  median {NUMBER}", out), out


def test_the_ddp_scaling_benchmark_runs_in_smoke_mode() -> None:
    out = smoke("ddp_scaling.py")
    assert re.search(rf"2 slots: +{NUMBER} samples/s \(gloo DDP\)  ratio 2/1 = {NUMBER}", out), out
    assert re.search(rf"overhead [+-]{NUMBER} ms/step \([+-]{NUMBER}%\)", out), out


def test_the_harness_throughput_benchmark_runs_in_smoke_mode() -> None:
    out = smoke("harness_throughput.py")
    assert re.search(rf"ratio harness/plain: +{NUMBER} best, {NUMBER} median", out), out


def test_the_scheduling_tick_benchmark_runs_in_smoke_mode() -> None:
    out = smoke("scheduling_tick.py")
    assert "of 500 ms" in out
    for state in ("idle cluster", "half full", "full, fair-share preemption"):
        row = rf"^{re.escape(state)} +\d+ +\d+ +\d+ +{NUMBER} +{NUMBER} +{NUMBER}%$"
        assert re.search(row, out, re.M), out


def test_the_search_bookkeeping_benchmark_runs_in_smoke_mode() -> None:
    out = smoke("search_bookkeeping.py")
    assert "24 trials of 100 ms on 4 slots (SQLite" in out
    assert re.search(rf"wall {NUMBER} s \(client saw {NUMBER} s\), ratio {NUMBER} ", out), out
    assert re.search(r"\d+ of 24 starts were handoffs", out), out


def test_the_search_quality_benchmark_runs_in_smoke_mode() -> None:
    out = smoke("search_quality.py")
    assert "ASHA's compute to reach the target, as a fraction of random search's" in out
    # Whether 4 short trials reach 0.05 depends on the draw: either figure line is the right shape.
    assert re.search(rf"error <= 0\.05: ({NUMBER} over 1 of 1 seeds|not reached by both searchers)", out), out


def test_the_login_storm_benchmark_runs_in_smoke_mode() -> None:
    out = smoke("login_storm.py")
    assert re.search(r"^== login storm: \d+ clients sending wrong logins", out, re.M), out
    for phase in ("idle", "storm, limits as deployed", "storm, every attempt hashed"):
        assert re.search(
            rf"^{re.escape(phase)} +p50 +{NUMBER} ms  p99 +{NUMBER} ms  \(\d+ calls\)", out, re.M
        ), out
    assert "goal: p99 under 50 ms during the storm" in out
    # Other users' right passwords go through a storm from their own address, and after it.
    assert re.search(rf"^others, idle \(baseline\) +p50 +{NUMBER} ms  p99 +{NUMBER} ms", out, re.M), out
    assert re.search(r"^others, during a 4 s storm .*\((\d+) of \1 logins succeeded;", out, re.M), out
    assert re.search(r"^others, after the storm: (\d+) of \1 logins succeeded$", out, re.M), out


def test_the_webui_page_benchmark_runs_in_smoke_mode() -> None:
    out = smoke("webui_page.py")
    if "webui_page: skipped" in out:
        import pytest

        pytest.skip(out.strip())
    # One view, driven in Chromium: the experiment page's summary, then its curves.
    assert "views of 5 trials x 5 validations (25 rows from 5 trials drawn) against 3 trials" in out, out
    for view in ("experiment page", "learning curves drawn"):
        assert re.search(rf"^  {view}: {NUMBER} s .*baseline {NUMBER} s, .*ratio {NUMBER}$", out, re.M), out


def test_the_short_trials_benchmark_runs_in_smoke_mode() -> None:
    out = smoke("short_trials.py", "--cli")
    assert "== 4 trials x 2 steps of 4 batches" in out
    assert re.search(rf"^2 slots: ideal {NUMBER} s \| pedl {NUMBER} s \({NUMBER}x\)", out, re.M), out
    # As a user runs it: `pedl cluster up`, then `pedl experiment create` to `pedl experiment wait`.
    cli = rf"^2 slots: ideal {NUMBER} s \| pedl CLI, fresh cluster {NUMBER} s \({NUMBER}x; `pedl cluster up`"
    assert re.search(cli, out, re.M), out
    # ... then the same search again on that cluster, warm, with its own phase medians.
    warm = rf"^2 slots: ideal {NUMBER} s \| pedl CLI, warm cluster {NUMBER} s \({NUMBER}x; the same search"
    assert re.search(warm, out, re.M), out
    assert "pedl per-trial phase medians, CLI warm search, 2 slots" in out, out
    # Ray Tune (its own environment, built by a full run) is left out of the smoke run, which says so.
    assert "Ray Tune: skipped (--smoke without --ray)" in out, out
    phases = ("slot held", "imports", "model definition loaded", "train step", "checkpoint upload", "exit")
    for phase in phases:
        assert re.search(rf"^  {phase} +{NUMBER}$", out, re.M), out


def test_the_list_scale_benchmark_runs_in_smoke_mode() -> None:
    out = smoke("list_scale.py")
    assert "== list scale: 1000 experiments, one of 100 trials" in out
    first_page = rf"^experiment list, first page \(\d+\) +median +{NUMBER} ms +\(goal < 200 ms\)"
    assert re.search(first_page, out, re.M), out
    assert re.search(rf"^experiment describe \(100 trials\) +median +{NUMBER} s +\(goal < 2 s\)", out, re.M)
    assert re.search(rf"^scheduler memory \(RSS\) +{NUMBER} MiB", out, re.M), out


def test_the_model_views_benchmark_runs_in_smoke_mode() -> None:
    out = smoke("model_views.py")
    assert "== a model definition of 100 files" in out
    assert re.search(rf"^before: un-gzip per run +{NUMBER} ms$", out, re.M), out
    copy = rf"^after, spawned run \(copy of the tree\) +{NUMBER} ms  ratio {NUMBER}$"
    assert re.search(copy, out, re.M), out
    # The overlay line where this machine can mount one (as root, or in a user namespace).
    overlay = re.search(rf"^after, forked run \(overlay\) +{NUMBER} ms  ratio {NUMBER}$", out, re.M)
    assert overlay or "overlay: not available here" in out, out


def test_the_cli_start_benchmark_runs_in_smoke_mode() -> None:
    out = smoke("cli_start.py")
    assert "CLI start, 2 interleaved rounds" in out, out
    for command in (
        "python -c pass",
        "pedl --help",
        "pedl version",
        "pedl experiment list",
        "pedl experiment create",
    ):
        line = (
            rf"^  {re.escape(command)} +median {NUMBER} s  best {NUMBER} s  cpu {NUMBER} s  "
            rf"{NUMBER}x python -c pass$"
        )
        assert re.search(line, out, re.M), out


def test_the_rest_api_benchmark_runs_in_smoke_mode() -> None:
    out = smoke("rest_api.py")
    assert "== REST API (pedl-webui) vs gRPC: 500 experiments" in out
    for row in ("experiments, first page", "trials page", "logs follow"):
        assert re.search(rf"^{row}.*REST +{NUMBER} .*ratio REST/gRPC +{NUMBER}", out, re.M), out


def test_the_slurm_short_trials_benchmark_runs_in_smoke_mode() -> None:
    reason = slurm_unavailable()
    if reason is not None:
        pytest.skip(f"real Slurm daemons are needed: {reason}")
    out = smoke("slurm_short_trials.py")
    assert "== 4 trials x 2 steps of 4 batches, 2 slots, one node" in out, out
    assert re.search(rf"^pedl agent: {NUMBER} s \({NUMBER}x ideal\)$", out, re.M), out
    assert re.search(rf"^Slurm pilot: {NUMBER} s \({NUMBER}x ideal\)$", out, re.M), out
    assert re.search(rf"^ratio Slurm/agent {NUMBER}$", out, re.M), out
