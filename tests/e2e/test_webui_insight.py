"""The experiment page's answers in a real headless Chromium against a real local cluster running a
small random search: the config's name on the list and the page, notes kept across reloads and
refused to a non-owner, and the hyperparameters ranked by importance once the trials validated.
One cluster for the module; the README's screenshot of the experiment page lands in
test-artifacts/webui/insight-experiment.png.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from pedl import _grpc
from pedl.context import pack
from pedl.v1 import scheduler_pb2, scheduler_pb2_grpc
from support.browser import artifacts_dir, chromium, wait_for
from support.models import write_tiny_model
from support.processes import LocalCluster, Service, local_cluster, start, stop
from tests.integration.test_auth import create_user

pytestmark = pytest.mark.e2e
CONFIG = """
name: insight-search
description: tiny random search
hyperparameters:
  learning_rate: {type: double, minval: 0.001, maxval: 0.5}
  width: {type: categorical, vals: [1, 2]}
searcher:
  name: random
  metric: error
  smaller_is_better: true
  max_trials: 5
  max_length: {batches: 20}
batches_per_step: 10
min_validation_period: {batches: 10}
reproducibility: {experiment_seed: 1}  # widths 1, 2, 1, 2, 1: both vary (unseeded, 1 run in 16 drew one)
"""


class Env:
    def __init__(self, cluster: LocalCluster, webui: Service, browser: Any, experiment_id: int) -> None:
        self.cluster, self.webui, self.browser, self.experiment_id = cluster, webui, browser, experiment_id
        self.url = f"http://{webui.address}"

    def page(self, user: str, password: str) -> Any:
        page = self.browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
        page.goto(self.url + "/login")
        page.fill("#username", user)
        page.fill("#password", password)
        page.click("button[type=submit]")
        page.wait_for_url("**/experiments")
        return page

    def validated_page(self) -> Any:
        """The admin's experiment page once the search has ended and importance is shown."""
        page = self.page("admin", self.cluster.admin_password)
        page.goto(f"{self.url}/experiments/{self.experiment_id}")
        page.wait_for_selector("body[data-state='COMPLETED']", timeout=600_000)
        page.reload()
        page.wait_for_selector("#importance-table", timeout=60_000)
        return page


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    tmp = tmp_path_factory.mktemp("insight")
    with chromium() as browser, local_cluster(tmp / "cluster") as cluster:
        port_file = tmp / "webui.port"
        argv = ["pedl-webui", "--master", cluster.master, "--port", "0", "--port-file", str(port_file)]
        webui = start("webui", argv, tmp, port_file)
        try:
            stub = scheduler_pb2_grpc.SchedulerServiceStub(_grpc.channel(cluster.master))
            packed = pack(write_tiny_model(tmp / "tiny"))
            created = stub.CreateExperiment(
                scheduler_pb2.CreateExperimentRequest(
                    config_yaml=CONFIG, model_definition=packed.data, model_definition_name=packed.name
                ),
                timeout=60,
            )
            yield Env(cluster, webui, browser, created.experiment.id)
        finally:
            stop(webui.process)


def test_the_name_shows_on_the_list_and_the_page_and_notes_are_kept(env: Env) -> None:
    page = env.page("admin", env.cluster.admin_password)
    row = page.locator(f"#experiments tr:has(a[href='/experiments/{env.experiment_id}'])")
    row.wait_for()
    assert "insight-search" in row.inner_text()
    page.goto(f"{env.url}/experiments/{env.experiment_id}")
    page.wait_for_selector("body[data-state]")
    assert "insight-search" in page.inner_text("#title")
    page.fill("#notes", "lr above 0.3 diverges")
    page.click("#save-notes")
    wait_for(lambda: page.inner_text("#notes-status") == "saved", timeout=30, what="the notes saved")
    page.reload()
    page.wait_for_selector("body[data-state]")
    wait_for(lambda: page.input_value("#notes") == "lr above 0.3 diverges", timeout=30, what="the kept notes")


def test_a_non_owner_cannot_change_the_notes(env: Env) -> None:
    create_user(env.cluster, "carol")
    page = env.page("carol", "carol" * 3)
    page.goto(f"{env.url}/experiments/{env.experiment_id}")
    page.wait_for_selector("body[data-state]")
    page.fill("#notes", "carol was here")
    page.click("#save-notes")
    status = page.locator("#notes-status")
    wait_for(lambda: "only its owner or an admin" in status.inner_text(), timeout=30, what="the refusal")


def test_importance_ranks_the_hyperparameters_once_the_search_has_validated(env: Env) -> None:
    page = env.validated_page()
    names = page.locator("#importance-table tr[data-name]").evaluate_all(
        "rows => rows.map(r => r.dataset.name)"
    )
    assert sorted(names) == ["learning_rate", "width"]
    assert "importance ready" in env.webui.log()  # optuna was imported as the web UI started
    # Parallel coordinates read real values: lr's lowest and highest drawn, width's categories.
    axes = {a["name"]: a["ticks"] for a in json.loads(page.get_attribute("#parallel", "data-axes"))}
    assert axes["width"] == ["1", "2"] and len(axes["learning_rate"]) == 2
    assert 0.001 <= float(axes["learning_rate"][0]) < float(axes["learning_rate"][1]) <= 0.5
    assert set(axes) == {"learning_rate", "width", "error"}
    page.fill("#smoothing", "0.9")  # smoothing redraws the curves; the page stays usable
    page.wait_for_selector("#smoothing-value:text('0.90')")
    page.screenshot(path=str(artifacts_dir("webui") / "insight-experiment.png"), full_page=True)


# How many different colours a canvas holds: a drawn field has many, an empty plot a handful.
COLOURS = """c => new Set(Array.from(c.getContext('2d').getImageData(0, 0, c.width, c.height).data)
    .map((v, i, a) => (i % 4 ? null : a.slice(i, i + 3).join()))).size"""


def test_contour_and_slices_draw_the_metric_over_the_hyperparameters(env: Env) -> None:
    page = env.validated_page()
    # A slice per hyperparameter that varies, each its own chart.
    names = page.locator("#slices .slice").evaluate_all("boxes => boxes.map(b => b.dataset.name)")
    assert sorted(names) == ["learning_rate", "width"]
    assert page.locator("#slices .slice canvas").count() == 2
    # The contour opens on the two most important hyperparameters, every validated trial a dot.
    rows = page.locator("#importance-table tr[data-name]")
    ranked = rows.evaluate_all("rows => rows.map(r => r.dataset.name)")
    contour = page.locator("#contour")
    wait_for(lambda: contour.get_attribute("data-x") == ranked[0], timeout=30, what="the top two")
    assert contour.get_attribute("data-y") == ranked[1] and contour.get_attribute("data-trials") == "5"
    low, high = json.loads(contour.get_attribute("data-metric-range"))
    assert low <= high and "(best)" in page.inner_text("#contour-legend")
    assert page.locator("#contour canvas").evaluate(COLOURS) > 20
    # The user's pick and log axes redraw it; the same hyperparameter twice is explained, not drawn.
    page.select_option("#contour-x", "width")
    page.select_option("#contour-y", "width")
    assert "two different" in contour.inner_text() and page.locator("#contour canvas").count() == 0
    page.select_option("#contour-y", "learning_rate")
    page.check("#contour-log")
    logs = "width,learning_rate"  # width's values are the numbers 1 and 2: both axes can be log
    wait_for(lambda: contour.get_attribute("data-log") == logs, timeout=60, what="the log contour")
    assert (contour.get_attribute("data-x"), contour.get_attribute("data-y")) == ("width", "learning_rate")
    page.locator("#contour").screenshot(path=str(artifacts_dir("webui") / "insight-contour.png"))


def test_two_chosen_trials_compare_side_by_side_at_a_shareable_url(env: Env) -> None:
    page = env.page("admin", env.cluster.admin_password)
    page.goto(f"{env.url}/experiments/{env.experiment_id}")
    page.wait_for_selector("body[data-state='COMPLETED']", timeout=600_000)
    boxes = page.locator("#trials input[type=checkbox]")
    boxes.nth(0).check()
    boxes.nth(1).check()
    page.click("#compare-link")
    page.wait_for_selector("body[data-compared]")
    compared = page.get_attribute("body", "data-compared").split(",")
    assert len(compared) == 2 and f"trials={','.join(compared)}" in page.url
    header = page.locator("#compare-table tr").first.inner_text()
    assert all(f"Trial {t}" in header for t in compared)
    assert page.locator("#compare-table tr[data-row='learning_rate'] td").count() == 2
    page.wait_for_selector("body[data-ready]")
    shared = env.page("admin", env.cluster.admin_password)  # the URL alone shows the same trials
    shared.goto(page.url)
    shared.wait_for_selector("body[data-compared]")
    assert shared.get_attribute("body", "data-compared") == ",".join(compared)


def test_a_trials_log_is_searched_and_the_download_takes_the_filter(env: Env) -> None:
    page = env.page("admin", env.cluster.admin_password)
    page.goto(f"{env.url}/experiments/{env.experiment_id}")
    page.wait_for_selector("#trials a[href^='/trials/']")
    trial_url = page.locator("#trials a[href^='/trials/']").first.get_attribute("href")
    page.goto(env.url + trial_url)
    page.wait_for_selector("pre.logs > span.line", state="attached")
    shown = page.locator("pre.logs > span.line:not([hidden])")
    wait_for(lambda: shown.count() > 0, timeout=60, what="the trial's log lines")
    page.fill("#log-search", "no line says this")
    assert shown.count() == 0
    href = page.get_attribute("#log-file", "href")
    assert "q=no+line+says+this" in href
    assert page.request.get(env.url + href).text() == ""  # the download holds what the filter shows
    page.fill("#log-search", "")
    assert shown.count() > 0
    assert page.request.get(f"{env.url}/api/trials/1/logs.txt?rank=x").status == 400


def test_a_checkpoints_files_are_listed_with_sizes_and_one_downloads_alone(env: Env) -> None:
    page = env.page("admin", env.cluster.admin_password)
    page.goto(f"{env.url}/experiments/{env.experiment_id}")
    page.wait_for_selector("body[data-state='COMPLETED']", timeout=600_000)
    page.goto(env.url + page.locator("#trials a[href^='/trials/']").first.get_attribute("href"))
    page.wait_for_selector("details.checkpoint-files")
    page.locator("details.checkpoint-files summary").first.click()
    link = page.locator("details.checkpoint-files a").first
    size = link.locator("xpath=../following-sibling::td").inner_text()
    response = page.request.get(env.url + link.get_attribute("href"))
    assert response.status == 200 and f"{len(response.body()):,} B" == size
    missing = link.get_attribute("href").split("?")[0] + "?file=no/such/file"
    assert page.request.get(env.url + missing).status == 404
