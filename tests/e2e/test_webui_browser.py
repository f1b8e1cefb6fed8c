"""The web UI as a person uses it, in a real headless Chromium against a real local cluster: log in,
watch the digits experiment's curve grow, read a trial's output live, be refused as a non-owner, kill
from the page. Screenshots land in test-artifacts/webui/ (see tests/support/browser.py).

Also the Python SDK's metrics, ranking and actions against the same running experiment.
"""

from __future__ import annotations

import io
import re
import shutil
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pedl import _grpc
from pedl._metrics import to_struct
from pedl.context import pack
from pedl.v1 import scheduler_pb2, scheduler_pb2_grpc
from support.browser import artifacts_dir, chromium, wait_for
from support.processes import LocalCluster, Service, local_cluster, start, stop
from tests.integration.test_auth import create_user

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]
PRINTED = "hello from the digits trial"
# HTML in user text must show as text: if it were parsed, the page would gain a <b id="owned"> element.
DESCRIPTION = 'digits <b id="owned">live</b> & curves'
CONFIG = f"""
description: '{DESCRIPTION}'
hyperparameters:
  learning_rate: {{type: const, val: 0.003}}
  hidden_size: {{type: const, val: 32}}
  dropout: {{type: const, val: 0.1}}
  batch_size: {{type: const, val: 16}}
searcher:
  name: single
  metric: validation_error
  smaller_is_better: true
  max_steps: 400
batches_per_step: 5
min_validation_period: 2
min_checkpoint_period: 4
"""


@dataclass
class Env:
    cluster: LocalCluster
    webui: Service
    url: str
    browser: Any
    experiment_id: int
    shots: Path

    def page(self, user: str, password: str) -> Any:
        context = self.browser.new_context(viewport={"width": 1400, "height": 1000})
        page = context.new_page()
        page.goto(self.url + "/login")
        page.fill("#username", user)
        page.fill("#password", password)
        page.click("button[type=submit]")
        page.wait_for_url("**/experiments")
        return page


def _digits_model(tmp: Path) -> Path:
    """The digits example, printing one line as it loads (what the logs pane must show)."""
    model = tmp / "digits_pytorch"
    shutil.copytree(ROOT / "examples" / "digits_pytorch", model)
    with open(model / "model_def.py", "a") as f:
        f.write(f"\nprint({PRINTED!r}, flush=True)\n")
    return model


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    tmp = tmp_path_factory.mktemp("webui")
    with chromium() as browser, local_cluster(tmp / "cluster") as cluster:
        webui = start(
            "webui",
            ["pedl-webui", "--master", cluster.master, "--port", "0", "--port-file", str(tmp / "webui.port")],
            tmp,
            tmp / "webui.port",
        )
        try:
            stub = scheduler_pb2_grpc.SchedulerServiceStub(_grpc.channel(cluster.master))
            packed = pack(_digits_model(tmp))
            created = stub.CreateExperiment(
                scheduler_pb2.CreateExperimentRequest(
                    config_yaml=CONFIG, model_definition=packed.data, model_definition_name="digits_pytorch"
                ),
                timeout=60,
            )
            yield Env(
                cluster,
                webui,
                f"http://{webui.address}",
                browser,
                created.experiment.id,
                artifacts_dir("webui"),
            )
        finally:
            stop(webui.process)


def _rows(page: Any) -> int:
    match = re.match(r"([\d,]+) rows", page.inner_text("#points"))
    return int(match.group(1).replace(",", "")) if match else 0


def test_the_curve_gains_points_as_steps_arrive_without_a_reload(env: Env) -> None:
    page = env.page("admin", env.cluster.admin_password)
    row = page.locator(f"#experiments tr[data-id='{env.experiment_id}']")
    row.wait_for()
    assert DESCRIPTION in row.inner_text() and page.locator("#owned").count() == 0
    row.locator("a").first.click()
    page.wait_for_url(f"**/experiments/{env.experiment_id}")
    page.wait_for_selector("body[data-ready]")
    wait_for(lambda: _rows(page) > 0, what="the first rows")
    first = _rows(page)
    navigations = page.evaluate("performance.getEntriesByType('navigation').length")
    wait_for(lambda: _rows(page) >= first + 3, what="more rows to arrive")
    assert page.evaluate("performance.getEntriesByType('navigation').length") == navigations  # no reload
    assert page.locator("#curves canvas").count() == 1
    assert page.inner_text("#description") == DESCRIPTION and page.locator("#owned").count() == 0
    assert page.locator("#trials tbody tr").count() == 1
    page.select_option("#metric", "t:loss")
    page.check("#log-scale")
    page.screenshot(path=str(env.shots / "experiment.png"), full_page=True)


def test_a_trials_logs_show_what_it_prints_apart_from_pedls_lines(env: Env) -> None:
    page = env.page("admin", env.cluster.admin_password)
    stub = scheduler_pb2_grpc.SchedulerServiceStub(_grpc.channel(env.cluster.master))
    trials = stub.GetExperiment(scheduler_pb2.GetExperimentRequest(experiment_id=env.experiment_id)).trials
    page.goto(f"{env.url}/trials/{trials[0].id}")
    wait_for(lambda: PRINTED in page.inner_text("#user-logs"), what="the trial's printed line")
    system = page.inner_text("#system-logs")
    assert "started on agent" in system and PRINTED not in system
    assert "workload completed" not in page.inner_text("#user-logs")
    link = page.locator("#checkpoints a").first
    link.wait_for(timeout=240_000)
    uuid = page.locator("#checkpoints td").first.inner_text()
    download = page.request.get(env.url + link.get_attribute("href"))
    assert download.status == 200 and download.headers["content-type"] == "application/gzip"
    with tarfile.open(fileobj=io.BytesIO(download.body()), mode="r:gz") as tar:
        assert any(name.startswith(f"{uuid}/") for name in tar.getnames())
    page.screenshot(path=str(env.shots / "trial.png"), full_page=True)


def test_a_trials_custom_metric_group_has_its_own_chart_and_figures(env: Env) -> None:
    """What a script's `core.train.report_metrics(group="inference", ...)` sends (ReportTrialMetrics
    with that group) shows under "Metric groups" on the trial's page, apart from its curves."""
    stub = scheduler_pb2_grpc.SchedulerServiceStub(_grpc.channel(env.cluster.master))
    trials = stub.GetExperiment(scheduler_pb2.GetExperimentRequest(experiment_id=env.experiment_id)).trials
    for steps, fps in ((10, 30.0), (20, 10.0)):
        request = scheduler_pb2.ReportTrialMetricsRequest(
            trial_id=trials[0].id, steps_completed=steps, metrics=to_struct({"fps": fps}), group="inference"
        )
        stub.ReportTrialMetrics(request, timeout=30)
    page = env.page("admin", env.cluster.admin_password)
    page.goto(f"{env.url}/trials/{trials[0].id}")
    group = page.locator('.metric-group[data-group="inference"]')
    group.wait_for(timeout=60_000)
    assert "2 reports · last at 20 batches" in group.locator("h3").inner_text()
    rows = group.locator("table.group-figures tr")
    assert rows.nth(1).inner_text().split() == ["fps", "2", "10", "10", "30", "20"]
    wait_for(lambda: group.locator(".chart canvas").count() > 0, what="the group's chart")
    assert group.locator("select option").all_inner_texts() == ["fps"]
    assert "fps" not in page.locator("#metric").inner_text()  # the trial's own curves stay its own
    page.screenshot(path=str(env.shots / "trial-metric-group.png"), full_page=True)


@pytest.mark.parametrize(
    "raw", ["/%5Cevil.example/", "/%5C%5Cevil.example", "//evil.example", "https:evil.example"]
)
def test_the_login_page_never_leaves_the_site_whatever_next_says(env: Env, raw: str) -> None:
    # Before: /login?next=/%5Cevil.example/ sent the browser to http://evil.example/.
    context = env.browser.new_context()
    page = context.new_page()
    page.goto(f"{env.url}/login?next={raw}")
    page.fill("#username", "admin")
    page.fill("#password", env.cluster.admin_password)
    page.click("button[type=submit]")
    page.wait_for_url("**/experiments")
    assert page.url.startswith(env.url + "/"), page.url
    context.close()


def test_the_sdk_reads_metrics_ranks_checkpoints_and_acts(env: Env) -> None:
    from pedl.experimental import get_experiment

    exp = get_experiment(env.experiment_id, master=env.cluster.master)
    wait_for(lambda: exp.top_checkpoints(1), what="a checkpoint at a validation")
    steps = exp.metrics(kind="training")
    assert steps and all(r["kind"] == "training" and "loss" in r["metrics"] for r in steps)
    batches = [r["total_batches"] for r in steps]
    assert batches == sorted(batches)
    trial = exp.trials()[0]
    later = trial.metrics(from_batches=batches[-1])
    assert later and all(r["total_batches"] >= batches[-1] for r in later)
    frame = exp.metrics().to_pandas()
    assert {"trial_id", "kind", "total_batches", "loss", "validation_error"} <= set(frame.columns)
    best = exp.top_checkpoints(3)
    errors = [c.validation_metrics["validation_error"] for c in best]
    assert errors == sorted(errors) and len(best) <= 3


def test_a_non_owner_is_refused_and_unknown_ids_are_404(env: Env) -> None:
    create_user(env.cluster, "bob")
    page = env.page("bob", "bob" * 3)
    page.goto(f"{env.url}/experiments/{env.experiment_id}")
    page.wait_for_selector("body[data-state]")
    page.click("#kill")
    error = page.locator("#action-error")
    error.wait_for(state="visible")
    wait_for(lambda: "only its owner or an admin" in error.inner_text(), timeout=30, what="the refusal")
    assert page.get_attribute("body", "data-state") == "ACTIVE"
    page.screenshot(path=str(env.shots / "refused.png"), full_page=True)
    for path in ("/experiments/99999", "/trials/99999", "/experiments/abc", "/nowhere"):
        response = page.goto(env.url + path)
        assert response.status == 404, path
        assert "Not found" in page.inner_text("h1")


def test_killing_from_the_page_changes_the_state(env: Env) -> None:
    page = env.page("admin", env.cluster.admin_password)
    page.goto(f"{env.url}/experiments/{env.experiment_id}")
    page.wait_for_selector("body[data-state='ACTIVE']")
    page.click("#kill")
    page.wait_for_selector("body[data-state='CANCELED']", timeout=120_000)
    assert page.inner_text("#state") == "CANCELED"
    assert page.is_disabled("#kill")
    page.screenshot(path=str(env.shots / "killed.png"), full_page=True)
