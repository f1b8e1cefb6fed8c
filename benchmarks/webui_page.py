"""The web UI's experiment page in headless Chromium: how soon it is interactive with a large search,
and what a page left open on a live experiment costs the scheduler.

1. Builds a SQLite database holding one experiment of N trials x V validations and a baseline one of
   10 trials (5 in --smoke), starts `pedl-scheduler` and `pedl-webui` on it, and loads each view of
   both in Chromium. Each figure is the page's own clock (performance.now(), from navigation start)
   when the view is drawn, printed as a ratio against the same view of the baseline experiment in
   the same run (and beside the 1 s target): the experiment page (its summary painted: trials
   table, best metrics and hyperparameter charts, `body[data-ready]`; JavaScript is single-threaded,
   so the page takes input from then on), its learning curves (streamed after the summary, each
   trial's cut by the scheduler, then drawn), hyperparameter importance, the plots (contour and
   slices drawn; and the contour redrawn for a new pick of hyperparameters, in ms of script), and
   10 trials compared (only their curves streamed).
   First of all, the first importance request the web UI answers after it starts (optuna's import
   included, unless the web UI has done it in the background already), against a repeat of it;
   then the first bounded curves stream after the scheduler restarts (its cut curves read back from
   the database), against a repeat before the restart.
2. Runs a live digits experiment on an agent and measures the scheduler's CPU (utime + stime from
   /proc) over a window with no page open, one with the experiment page open (curves following,
   trials polled) and one without again; the page's cost, in % of one core, is the open window's
   CPU less what the scheduler spent per batch ingested in the windows without, times the batches
   the trial trained while watched (a machine shared with others makes the trial's pace vary).

--smoke drives the browser through the experiment page (summary and curves) of 5 trials x 5
validations against 3, and leaves out the first-request figure, the other views and part 2.

    .venv/bin/python benchmarks/webui_page.py [--trials 1000] [--validations 100] [--repeat 5]
                                               [--window 30] [--first-request-after 0.5]
                                               [--first-request-only] [--smoke]
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from pedl import _grpc  # noqa: E402
from pedl.auth.login import login  # noqa: E402
from pedl.context import pack  # noqa: E402
from pedl.v1 import scheduler_pb2, scheduler_pb2_grpc  # noqa: E402
from pedl_scheduler.cluster import Cluster  # noqa: E402
from pedl_scheduler.experiments import ExperimentManager  # noqa: E402
from pedl_scheduler.storage import open_storage  # noqa: E402
from pedl_scheduler.storage.ops import results as result_ops  # noqa: E402
from pedl_scheduler.storage.ops import trials as trial_ops  # noqa: E402
from support.browser import CHROMIUM_ARGS, chromium_path  # noqa: E402
from support.processes import free_port  # noqa: E402

BIN = Path(sys.executable).parent
CONFIG = """
description: web UI benchmark
hyperparameters:
  learning_rate: {{type: log, minval: -4, maxval: -1, base: 10}}
  layers: {{type: int, minval: 1, maxval: 8}}
  activation: {{type: categorical, vals: [relu, tanh, gelu]}}
searcher:
  name: random
  metric: error
  smaller_is_better: true
  max_trials: {trials}
  max_concurrent_trials: 0
  max_length:
    batches: {length}
"""
LIVE = """
description: live digits
hyperparameters:
  learning_rate: {type: const, val: 0.003}
  hidden_size: {type: const, val: 32}
  dropout: {type: const, val: 0.1}
  batch_size: {type: const, val: 16}
searcher: {name: single, metric: validation_error, smaller_is_better: true, max_steps: 100000}
batches_per_step: 10
min_validation_period: 5
"""


def build(db: Path, searches: list[tuple[int, int]]) -> list[int]:
    """One ended random search per (trials, validations), as a finished search leaves its rows."""
    manager = ExperimentManager(open_storage(str(db)), Cluster(), "127.0.0.1:1")
    best: dict[int, tuple[float, int]] = {}  # trial -> (best error, batches trained)
    ids = []
    try:
        for trials, validations in searches:
            before = set(manager.trials)
            config = CONFIG.format(trials=trials, length=validations * 100)
            exp_id = manager.create_experiment(config, b"m", "m")
            ids.append(exp_id)
            s = manager.db
            with s.transaction():
                for n, trial_id in enumerate(sorted(set(manager.trials) - before)):
                    best[trial_id] = (1.0, validations * 100)
                    for v in range(1, validations + 1):
                        error = 0.9 / (1 + v * (1 + n % 7) / 20) + 0.01 * (n % 13)
                        best[trial_id] = (min(best[trial_id][0], error), validations * 100)
                        metrics = json.dumps({"error": error, "accuracy": 1 - error})
                        result_ops.record_validation(s, trial_id, v, v * 100, metrics, "2026-01-01T00:00:00Z")
            manager.kill_experiment(exp_id)
    finally:
        manager.db.close()
    s = open_storage(str(db))  # the ended trials' rows, as a finished search leaves them
    try:
        with s.transaction():
            for trial_id, (value, batches) in best.items():
                trial_ops.save_trial(s, trial_id, total_batches=batches, checkpoint_uuid="",
                                     checkpoint_batches=0, checkpoint_step=0, sequencer_json="{}",
                                     best_validation=value, waiting_on=None)  # fmt: skip
    finally:
        s.close()
    return ids


def spawn(tmp: Path, name: str, argv: list[str], port_file: Path | None = None) -> subprocess.Popen:
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=open(tmp / f"{name}.log", "wb"))
    return started(tmp, name, proc, port_file)


def started(tmp: Path, name: str, proc: subprocess.Popen, port_file: Path | None) -> subprocess.Popen:
    """`proc` once it has written its port file."""
    deadline = time.monotonic() + 120
    while port_file is not None and not (port_file.exists() and port_file.read_text().strip()):
        if proc.poll() is not None or time.monotonic() > deadline:
            sys.exit(f"{name} did not start: see {tmp / f'{name}.log'}")
        time.sleep(0.1)
    return proc


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def session_cookie(webui: str, password: str) -> str:
    body = json.dumps({"username": "admin", "password": password}).encode()
    request = urllib.request.Request(
        webui + "/api/login", data=body, headers={"Content-Type": "application/json"}, method="POST"
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return response.headers["Set-Cookie"].split(";")[0].split("=", 1)[1]


def open_page(browser, webui: str, cookie: str, exp_id: int):  # noqa: ANN001, ANN201
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    context.add_cookies([{"name": "pedl_session", "value": cookie, "url": webui}])
    page = context.new_page()
    page.goto(f"{webui}/experiments/{exp_id}")
    page.wait_for_selector("body[data-ready]", timeout=120_000)
    return context, page


def drawn_at(page, selector: str, milestone: str) -> float:  # noqa: ANN001
    """Seconds from navigation to the page's own mark of `milestone`, once `selector` is there."""
    page.wait_for_selector(selector, timeout=120_000, state="attached")
    page.wait_for_function(f"window.__marks && window.__marks.{milestone} !== undefined", timeout=120_000)
    return page.evaluate(f"window.__marks.{milestone}") / 1000


# Script time (ms) of a new pick in the contour's x picker: the field and dots redrawn.
REPICK = """() => { const x = document.getElementById('contour-x'), y = document.getElementById('contour-y');
  x.value = [...x.options].map(o => o.value).find(v => v !== x.value && v !== y.value);
  const t = performance.now(); x.dispatchEvent(new Event('change')); return performance.now() - t; }"""


def measure_views(browser, webui: str, cookie: str, exp_id: int, first_trial: int, repeat: int,  # noqa: ANN001, ANN201
                  views: tuple[str, ...]):  # fmt: skip
    """Each view's seconds from navigation to drawn, `repeat` times each (a fresh page every time);
    the compare view shows the experiment's first 10 trials, from `first_trial` on. `views`: all
    of VIEWS, or the first two (the experiment page and its curves). Returns them and what the
    curves chart says it drew."""
    compared = ",".join(str(first_trial + n) for n in range(10))
    times: dict[str, list[float]] = {v: [] for v in views}
    rows = ""  # what the page says it drew ("25 rows from 5 trials")
    for _ in range(repeat):
        context, page = open_page(browser, webui, cookie, exp_id)
        times["experiment page"].append(float(page.get_attribute("body", "data-ready")) / 1000)
        times["learning curves drawn"].append(drawn_at(page, "#curves canvas", "curves"))
        rows = page.inner_text("#points")
        if len(views) == 2:
            context.close()
            continue
        shown = "#importance-table, #importance p"
        times["hyperparameter importance"].append(drawn_at(page, shown, "importance"))
        plots = "#contour[data-trials] canvas, #slices .slice canvas"
        times["contour and slice plots"].append(drawn_at(page, plots, "plots"))
        times["contour redrawn for a new pick"].append(page.evaluate(REPICK) / 1000)
        page.goto(f"{webui}/experiments/{exp_id}/compare?trials={compared}")
        page.wait_for_selector("body[data-ready]", timeout=120_000)
        times["compare 10 trials"].append(page.evaluate("performance.now()") / 1000)
        context.close()
    return times, rows


VIEWS = (
    "experiment page",
    "learning curves drawn",
    "hyperparameter importance",
    "contour and slice plots",
    "contour redrawn for a new pick",
    "compare 10 trials",
)


def get_seconds(url: str, cookie: str) -> float:
    request = urllib.request.Request(url, headers={"Cookie": f"pedl_session={cookie}"})
    start = time.perf_counter()
    with urllib.request.urlopen(request, timeout=120) as response:
        response.read()
    return time.perf_counter() - start


def curves_seconds(master: str, token: str, exp_id: int, max_points: int) -> float:
    """Seconds of one bounded `GetMetrics` stream of the experiment's curves (as the page asks)."""
    stub = scheduler_pb2_grpc.SchedulerServiceStub(_grpc.channel(master, token=token, wait_for_ready=True))
    request = scheduler_pb2.GetMetricsRequest(experiment_id=exp_id, max_points=max_points)
    start = time.perf_counter()
    for _ in stub.GetMetrics(request, timeout=120):
        pass
    return time.perf_counter() - start


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--trials", type=int, default=1000)
    p.add_argument("--validations", type=int, default=100)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--window", type=float, default=30.0, help="seconds of each CPU window")
    p.add_argument(
        "--first-request-after", type=float, default=0.5,
        help="seconds between the web UI's start and its first importance request",
    )  # fmt: skip
    p.add_argument("--first-request-only", action="store_true", help="stop after the first-request figure")
    p.add_argument("--screenshot", type=Path, help="save the large experiment page here")
    p.add_argument(
        "--smoke", action="store_true", help="the experiment page of 5 trials x 5 validations only"
    )
    args = p.parse_args()
    baseline = 10
    views = VIEWS
    if args.smoke:
        args.trials, args.validations, args.repeat, baseline, views = 5, 5, 1, 3, VIEWS[:2]
    executable = chromium_path()
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        executable = None
    if executable is None:
        print("webui_page: skipped, no chromium or Playwright here (scripts/setup-env installs them)")
        return
    with tempfile.TemporaryDirectory() as name, sync_playwright() as pw:
        tmp = Path(name)
        searches = [(args.trials, args.validations), (baseline, args.validations)]
        exp_id, small_id = build(tmp / "pedl.db", searches)
        password = secrets.token_hex(12)
        (tmp / "secret").write_text(secrets.token_hex(32))
        (tmp / "admin").write_text(password)
        procs = []
        try:
            # The scheduler, the web UI (and in --smoke, Chromium) start side by side.
            master = f"127.0.0.1:{free_port()}"
            scheduler_argv = [
                str(BIN / "pedl-scheduler"), "--db", str(tmp / "pedl.db"), "--port", master.split(":")[1],
                "--port-file", str(tmp / "scheduler.port"), "--cluster-secret-file", str(tmp / "secret"),
                "--admin-password-file", str(tmp / "admin"), "--checkpoint-store", "127.0.0.1:1",
            ]  # fmt: skip
            scheduler = spawn(tmp, "scheduler", scheduler_argv)
            procs.append(scheduler)
            procs.append(spawn(tmp, "webui", [
                str(BIN / "pedl-webui"), "--master", master, "--port", "0",
                "--port-file", str(tmp / "webui.port"),
            ]))  # fmt: skip
            launch = lambda: pw.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)  # noqa: E731
            browser = launch() if args.smoke else None
            started(tmp, "scheduler", scheduler, tmp / "scheduler.port")
            started(tmp, "webui", procs[1], tmp / "webui.port")
            up = time.monotonic()
            webui = f"http://127.0.0.1:{(tmp / 'webui.port').read_text().strip()}"
            cookie = session_cookie(webui, password)
            time.sleep(max(0.0, args.first_request_after - (time.monotonic() - up)))
            importance_url = f"{webui}/api/experiments/{exp_id}/importance"
            if not args.smoke:
                first = get_seconds(importance_url, cookie)
                again = statistics.median(get_seconds(importance_url, cookie) for _ in range(3))
                print(f"first importance request {args.first_request_after:.1f} s after the web UI started, "
                      f"{args.trials} trials: {first:.3f} s, a repeat {again:.3f} s, "
                      f"ratio {first / again:.2f}")  # fmt: skip
            if args.first_request_only:
                return
            browser = browser or launch()

            if args.screenshot:
                context, page = open_page(browser, webui, cookie, exp_id)
                page.screenshot(path=str(args.screenshot))
                context.close()
            if not args.smoke:  # the scheduler restarted: its cut curves are read back, not cut again
                token = login(master, "admin", password).token
                points = max(20, min(200, 20_000 // args.trials))
                warm = statistics.median(curves_seconds(master, token, exp_id, points) for _ in range(3))
                scheduler.terminate()
                scheduler.wait(timeout=30)
                (tmp / "scheduler.port").unlink()
                scheduler = procs[0] = spawn(tmp, "scheduler", scheduler_argv, tmp / "scheduler.port")
                token = login(master, "admin", password).token
                first = curves_seconds(master, token, exp_id, points)
                print(f"first curves stream ({args.trials} trials cut to {points} points) after a scheduler "
                      f"restart: {first:.3f} s, a repeat before the restart {warm:.3f} s, "
                      f"ratio {first / warm:.2f}")  # fmt: skip
            large, rows = measure_views(browser, webui, cookie, exp_id, 1, args.repeat, views)
            small, _ = measure_views(browser, webui, cookie, small_id, args.trials + 1, args.repeat, views)
            print(f"views of {args.trials} trials x {args.validations} validations ({rows} drawn) against "
                  f"{baseline} trials, median of {args.repeat}:")  # fmt: skip
            for view in views:
                median, base = statistics.median(large[view]), statistics.median(small[view])
                unit = (1000, "ms") if view.startswith("contour redrawn") else (1, "s")
                print(f"  {view}: {median * unit[0]:.2f} {unit[1]} (best {min(large[view]) * unit[0]:.2f}), "
                      f"baseline {base * unit[0]:.2f} {unit[1]}, target < 1 s, "
                      f"ratio {median / max(base, 1e-6):.2f}")  # fmt: skip
            if args.smoke:
                browser.close()
                return

            token = login(master, "admin", password).token
            procs.append(spawn(tmp, "agent", [
                str(BIN / "pedl-agent"), "--master", master, "--agent-id", "bench", "--slots", "1",
                "--work-dir", str(tmp / "agent"), "--cluster-secret-file", str(tmp / "secret"),
                "--isolation", "none",
            ]))  # fmt: skip
            stub = scheduler_pb2_grpc.SchedulerServiceStub(_grpc.channel(master, token=token))
            packed = pack(ROOT / "examples" / "digits_pytorch")
            live = stub.CreateExperiment(scheduler_pb2.CreateExperimentRequest(
                config_yaml=LIVE, model_definition=packed.data, model_definition_name="digits_pytorch"
            ), timeout=60).experiment.id  # fmt: skip
            deadline = time.monotonic() + 120
            while not stub.GetTrial(scheduler_pb2.GetTrialRequest(trial_id=args.trials + baseline + 1)).steps:
                if time.monotonic() > deadline:
                    sys.exit(f"the live trial made no step in 120 s: see {tmp}/agent.log")
                time.sleep(0.5)
            live_trial = scheduler_pb2.GetTrialRequest(trial_id=args.trials + baseline + 1)

            def window() -> tuple[float, int]:
                """Scheduler CPU seconds and batches the live trial trained over one window."""
                cpu, batches = cpu_seconds(scheduler.pid), stub.GetTrial(live_trial).trial.total_batches
                time.sleep(args.window)
                trained = stub.GetTrial(live_trial).trial.total_batches - batches
                return cpu_seconds(scheduler.pid) - cpu, trained

            # Without a page, with one, without again: the scheduler's work per batch ingested comes
            # from the two windows without, so a trial training faster while watched is not billed
            # to the page.
            idle_a = window()
            context, page = open_page(browser, webui, cookie, live)
            rows_before = page.inner_text("#points")
            watched, watched_batches = window()
            rows_after = page.inner_text("#points")
            context.close()
            idle_b = window()
            browser.close()
            per_batch = (idle_a[0] + idle_b[0]) / max(1, idle_a[1] + idle_b[1])
            cost = (watched - per_batch * watched_batches) / args.window * 100
            idle_pct = (idle_a[0] + idle_b[0]) / (2 * args.window) * 100
            print(f"scheduler CPU on a live experiment: {idle_pct:.2f}% of a core without a page "
                  f"({(idle_a[1] + idle_b[1]) / 2:.0f} batches a window), {watched / args.window * 100:.2f}% "
                  f"with the page open ({watched_batches} batches; page showed {rows_before} -> "
                  f"{rows_after}); "
                  f"the page costs {cost:+.2f}% of a core over {args.window:.0f} s, target < 1%")  # fmt: skip
        finally:
            for proc in reversed(procs):
                proc.terminate()
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    proc.kill()


if __name__ == "__main__":
    main()
