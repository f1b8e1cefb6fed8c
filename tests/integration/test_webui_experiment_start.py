"""The experiment page in real Chromium, on a real scheduler and web UI: its first requests go out
from <head>, before the chart library is evaluated, and the page is drawn from their answers; an
ended session still leads to the login page."""

from __future__ import annotations

import json
import secrets
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from support.browser import chromium, wait_for
from support.processes import start, stop

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
from webui_page import build, session_cookie  # noqa: E402  (the benchmark's ended-search builder)

# Before any page script: when fetch() is called for what, and when the chart library (uPlot) is
# defined (its `var uPlot = ...` calls the setter).
RECORD = """
window.__asked = [];
const fetchBefore = window.fetch;
window.fetch = function (resource, init) {
  window.__asked.push([String(resource), performance.now()]);
  return fetchBefore.call(this, resource, init);
};
let chartLibrary;
Object.defineProperty(window, "uPlot", {
  configurable: true,
  get() { return chartLibrary; },
  set(value) { chartLibrary = value; window.__uPlotAt = window.__uPlotAt || performance.now(); },
});
"""


@dataclass
class Site:
    url: str
    cookie: str
    experiment: int


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    tmp = tmp_path_factory.mktemp("webui-start")
    (experiment,) = build(tmp / "pedl.db", [(4, 3)])
    password = secrets.token_hex(12)
    (tmp / "secret").write_text(secrets.token_hex(32))
    (tmp / "admin").write_text(password)
    scheduler = start("scheduler", [
        "pedl-scheduler", "--db", str(tmp / "pedl.db"), "--port", "0",
        "--port-file", str(tmp / "scheduler.port"), "--cluster-secret-file", str(tmp / "secret"),
        "--admin-password-file", str(tmp / "admin"),
        "--checkpoint-store", "127.0.0.1:1",
    ], tmp, tmp / "scheduler.port", timeout=120)  # fmt: skip
    try:
        webui = start("webui", [
            "pedl-webui", "--master", scheduler.address, "--port", "0",
            "--port-file", str(tmp / "webui.port"),
        ], tmp, tmp / "webui.port", timeout=120)  # fmt: skip
        try:
            url = f"http://{webui.address}"
            yield Site(url, session_cookie(url, password), experiment)
        finally:
            stop(webui.process)
    finally:
        stop(scheduler.process)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium() as launched:
        yield launched


def open_page(browser: Any, site: Site, cookie: str, path: str) -> tuple[Any, Any]:
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    context.add_cookies([{"name": "pedl_session", "value": cookie, "url": site.url}])
    context.add_init_script(RECORD)
    page = context.new_page()
    page.goto(site.url + path)
    return context, page


def test_the_summary_is_asked_for_before_the_chart_library_loads_and_the_page_is_drawn(
    site: Site, browser: Any
) -> None:
    context, page = open_page(browser, site, site.cookie, f"/experiments/{site.experiment}")
    try:
        page.wait_for_selector("body[data-ready]", timeout=120_000)
        drawn_at = page.evaluate("window.__marks.trials")  # before the page polls for updates
        calls = page.evaluate("window.__asked")
        asked = {path: at for path, at in reversed(calls)}  # each path's first call
        uplot_at = page.evaluate("window.__uPlotAt")
        summary = f"/api/experiments/{site.experiment}?columns=1"
        for path in (summary, f"/api/experiments/{site.experiment}/importance", "/api/me"):
            assert path in asked, f"the page never asked for {path}: {sorted(asked)}"
            assert asked[path] < uplot_at, f"{path} waited for the chart library"
        # Drawn from those answers: the trials, the signed-in user, the importance ranking.
        assert page.locator("#trials tbody tr").count() == 4
        wait_for(lambda: page.inner_text("#me") == "admin (admin)", 60, "the user in the nav bar")
        page.wait_for_selector("#importance-table, #importance p", timeout=120_000)
        assert page.locator("#scatter canvas").count() >= 1
        # Asked once each until drawn: the page used the early answers instead of asking again.
        paths = [path for path, at in calls if at <= drawn_at]
        assert paths.count(summary) == 1 and paths.count("/api/me") == 1, paths
    finally:
        context.close()


# The page's rows rebuilt from the columns, and the rows the API sends without ?columns=1.
BOTH_FORMS = """async (id) => {
  const columns = await (await fetch(`/api/experiments/${id}?columns=1`)).json();
  const rows = await (await fetch(`/api/experiments/${id}`)).json();
  const bad = await fetch(`/api/experiments/${id}?columns=yes`);
  return [JSON.stringify(pedl.trialRows(columns).trials), JSON.stringify(rows.trials),
          JSON.stringify(columns).length, JSON.stringify(rows).length, bad.status, (await bad.json()).error];
}"""


def test_the_trials_sent_as_columns_are_the_same_rows_in_fewer_bytes(site: Site, browser: Any) -> None:
    context, page = open_page(browser, site, site.cookie, f"/experiments/{site.experiment}")
    try:
        page.wait_for_selector("body[data-ready]", timeout=120_000)
        rebuilt, rows, compact_size, rows_size, status, error = page.evaluate(BOTH_FORMS, site.experiment)
        assert json.loads(rebuilt) == json.loads(rows) and len(json.loads(rows)) == 4
        assert compact_size < rows_size
        assert status == 400 and error == "columns must be 0 or 1, not 'yes'"
    finally:
        context.close()


def test_an_ended_session_on_the_experiment_page_goes_to_the_login_page(site: Site, browser: Any) -> None:
    # A cookie the scheduler never issued: the page's own check and its early requests say 401.
    context, page = open_page(browser, site, "not-a-session", f"/experiments/{site.experiment}")
    try:
        page.wait_for_url(lambda url: "/login?next=" in url, timeout=120_000)
        assert page.url.endswith(f"/login?next=/experiments/{site.experiment}")
    finally:
        context.close()
