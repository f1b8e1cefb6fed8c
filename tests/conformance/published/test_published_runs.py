"""Published examples run unchanged on a real local cluster, in test mode (a few batches, a validation,
a checkpoint): each example's folder is copied as it is, its own config is submitted with only its
data URLs pointed at stand-in data this suite serves on loopback (`standin_data`), its length cut to
a few batches and a search to two trials; an example that reads MNIST from `data/` finds the
stand-in laid there. The agent runs trials in the examples' environment (`example_env`: torchvision
beside .venv). Which examples run, and why the others do not, is `catalogue`'s, and README.md's
table is generated from it (`python tests/conformance/published/catalogue_table.py`, `--check` here).

`scripts/test` runs the smoke part (`catalogue.SMOKE`); the whole run over every release is
`PEDL_PUBLISHED_FULL=1 .venv/bin/pytest tests/conformance/published/test_published_runs.py`, which
prints each example's result."""

from __future__ import annotations

import dataclasses
import functools
import http.server
import re
import shutil
import subprocess
import sys
import threading
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import example_env
import grpc
import pytest
import yaml
from catalogue import CLUSTER_SLOTS, IMAGE_RULES, SCRIPT_BATCHES, SMOKE, Example, examples
from standin_data import (
    cifar_tarball,
    mnist_tarball,
    write_fashion_mnist,
    write_iris,
    write_mnist_raw,
    write_mnist_tfrecords,
    write_titanic,
    write_wikitext,
)

from pedl.config.environment_settings import Environment
from pedl.config.image_environments import parse_image_rules, rule_for
from pedl.v1 import common_pb2
from pedl_scheduler.experiments.failures import HARNESS_LINE, cause_line
from support.processes import local_cluster

pytestmark = pytest.mark.integration

_REPO = Path(__file__).resolve().parents[3]
FULL = __import__("os").environ.get("PEDL_PUBLISHED_FULL") == "1"
TEST_BATCHES = 8
# Test mode's smaller model and fewer loader processes, where a config has these hyperparameters
# (the DeepSpeed DCGANs': widths 64 and 16 workers a slot, minutes a batch on 2 loaded cores).
TEST_HPARAMS = {"generator_width_base": 8, "discriminator_width_base": 8, "data_workers": 1}
# Merged into a DeepSpeed config through the hyperparameter Determined's examples read for it. Its
# "Adam" is DeepSpeed's FusedAdam, whose C++ op DeepSpeed JIT-compiles with ninja in each new trial
# (over 5 minutes on 2 loaded cores): torch's Adam instead. And ZeRO stage 1 for the DCGANs' stage 0:
# their generator's loss flows back through the discriminator's engine too, which DeepSpeed 0.19.8
# refuses at stage 0 ("Direct calls to tensor.backward() are not supported in this configuration"),
# on any platform; from stage 1 on it allows it.
TEST_DEEPSPEED_ARGS = {"optimizer": {"params": {"torch_adam": True}}, "zero_optimization": {"stage": 1}}


@pytest.fixture(scope="module")
def data_server(tmp_path_factory) -> Iterator[str]:
    """Stand-in data on loopback, as the examples' URLs would serve it."""
    root = tmp_path_factory.mktemp("standin")
    write_iris(root)
    write_titanic(root)
    mnist_tarball(root)
    if any(e.data == "cifar-url" for e in _smoke()):  # a few seconds to make: only when run
        cifar_tarball(root)
    handler = functools.partial(_QuietHandler, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    """Serves the stand-ins by name; as an HTTP proxy too (a request for a whole `http://` URL, which
    code that hard-codes one sends where `http_proxy` points), answering with the file of its name."""

    def translate_path(self, path: str) -> str:
        if path.startswith("http://"):
            path = "/" + urllib.parse.urlsplit(path).path.rsplit("/", 1)[-1]
        return super().translate_path(path)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (the base's name)
        pass


@pytest.fixture(scope="module")
def mounts_root(tmp_path_factory) -> Path:
    """Where stand-in data for examples that read outside their folder is made, one folder per
    example: the only root the suite's agent lets bind_mounts take host paths from."""
    return tmp_path_factory.mktemp("mounts")


@pytest.fixture(scope="module")
def environments(request: pytest.FixtureRequest) -> dict[str, str | None]:
    """The interpreter of each environment an example selected to run (`-k` counts) is mapped to
    (built here if needed: minutes the first time for TensorFlow 2.15's and torch 2.6's), None for
    one that could not be built."""
    selected = [
        item.callspec.params["example"]
        for item in request.session.items
        if "example" in getattr(getattr(item, "callspec", None), "params", {})
    ]
    wanted = {name for e in selected if isinstance(e, Example) and (name := _environment_of(e))}
    return {name: example_env.built_python(name) for name in sorted(wanted)}


def _environment_of(example: Example) -> str | None:
    """The environment the suite's scheduler runs the example in, where its test-mode config names
    one or an image rule picks one."""
    if example.environment:
        return example.environment
    images = Environment.of(_config(example).get("environment")).images or (example.image,)
    found = rule_for(parse_image_rules(list(IMAGE_RULES)), images)
    return found[0].environment if found else None


def _config(example: Example) -> dict:
    return yaml.safe_load((example.folder / example.config).read_text())


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, mounts_root, environments) -> Iterator:
    """One agent running trials in the examples' environment, offering those the scheduler maps
    Determined's images to (`IMAGE_RULES`: TensorFlow 2.15's as `tf215` for the images of its TF 2
    releases, 2.12's as `tf212` for those of its TF 2.2-2.8 ones, NumPy 1.23's as `numpy1` for 0.12's
    PyTorch image) and those configs name (`torch26`,
    `OLDER_TORCH`, `OLDER_KERAS`) where they could be built."""
    agent_args = ["--python", example_env.python(), "--allowed-bind-root", str(mounts_root)]
    for name, python in environments.items():
        agent_args += ["--environment", f"{name}={python}"] if python else []
    offered = {name for name, python in environments.items() if python}
    rules = [rule for rule in IMAGE_RULES if rule.rpartition("=")[2] in offered]
    scheduler_args = [arg for rule in rules for arg in ("--image-environment", rule)]
    cluster_dir = tmp_path_factory.mktemp("cluster")
    with local_cluster(
        cluster_dir, agents=1, slots=CLUSTER_SLOTS, agent_args=agent_args, scheduler_args=scheduler_args
    ) as running:
        yield running


def config_for_test_mode(example: Example, base_url: str, standin: Path | None = None) -> str:
    """The example's config with its data URLs on loopback, its length a few batches (where the
    config holds it; a script's own stays) and a search two trials at most, and the image its release
    ran it in where the config names none (`Example.image`), or the environment its code needs named
    (`Example.environment`); a trial whose code hard-codes plain-HTTP
    URLs gets the suite's server as its `http_proxy`. Data the example reads outside its folder comes
    from `standin` (`standin_for`): its own bind mount's host path pointed there, or a bind mount of it
    added where the example looks (`../data`, relative to the trial's working directory, as
    Determined's `container_path` reads a relative path); `data.dataroot`'s bind mount (`mnist-mount`)
    has its host path pointed there; the MNIST Estimators' download directory and Keras's cache
    (`KERAS_HOME`) are bind mounts added (`_ADDED_MOUNTS`). The Titanic CSVs that
    `data.titanic_dataset` names come from the suite's server too."""
    raw = yaml.safe_load((example.folder / example.config).read_text())
    data = raw.get("data") or {}
    for key in ("train_url", "test_url", "url"):
        if isinstance(data.get(key), str) and "://" in data[key]:
            data[key] = f"{base_url}/{data[key].rsplit('/', 1)[1]}"
    if example.data in ("wikitext-mount", "mnist-mount") and standin is not None:
        inside = data["bind_mount_path"] if example.data == "wikitext-mount" else data["dataroot"]
        mounted = [m for m in raw["bind_mounts"] if m["container_path"] == inside]
        mounted[0]["host_path"] = str(standin)
    elif example.data == "iris-proxy":  # its code's http:// URLs go through the suite's server
        environment = raw.setdefault("environment", {})
        variables = environment.setdefault("environment_variables", [])
        variables += [f"http_proxy={base_url}", "no_proxy=127.0.0.1,localhost"]
    elif example.data == "mnist-parent" and standin is not None:
        raw.setdefault("bind_mounts", []).append({"host_path": str(standin), "container_path": "../data"})
    elif example.data == "titanic-url":  # data.titanic_dataset.{train,eval}
        urls = data["titanic_dataset"]
        urls.update({k: f"{base_url}/{v.rsplit('/', 1)[1]}" for k, v in urls.items() if "://" in str(v)})
    elif example.data in _ADDED_MOUNTS and standin is not None:
        inside, variables = _ADDED_MOUNTS[example.data]
        raw.setdefault("bind_mounts", []).append({"host_path": str(standin), "container_path": inside})
        if variables:
            raw.setdefault("environment", {}).setdefault("environment_variables", []).extend(variables)
    if example.image and isinstance(raw.setdefault("environment", {}), dict):  # as its master set it
        raw["environment"].setdefault("image", example.image)
    # OLDER_TORCH, OLDER_KERAS
    if example.environment and isinstance(raw.setdefault("environment", {}), dict):
        raw["environment"]["name"] = example.environment
    searcher = raw["searcher"]
    if "max_steps" in searcher:  # PEDL 0.11 and Determined before 0.13 count steps
        searcher["max_steps"] = 1
        raw["batches_per_step"] = TEST_BATCHES
    elif "max_length" in searcher:
        searcher["max_length"] = {"batches": TEST_BATCHES}
    if "max_trials" in searcher:
        searcher["max_trials"] = min(int(searcher["max_trials"]), 2)
    hparams = raw.get("hyperparameters") if isinstance(raw.get("hyperparameters"), dict) else {}
    hparams.update({k: v for k, v in TEST_HPARAMS.items() if isinstance(hparams.get(k), int)})
    if "deepspeed_config" in hparams:  # beside the config's own (mnist_grad_accum's accumulation)
        hparams["overwrite_deepspeed_args"] = {
            **TEST_DEEPSPEED_ARGS,
            **(hparams.get("overwrite_deepspeed_args") or {}),
        }
    raw.pop("min_validation_period", None)
    return yaml.safe_dump(raw)


# Bind mounts the suite adds where an example looks outside its folder, and what the trial is told:
# the MNIST Estimator examples' download directory (rank 0's), Keras's cache for PEDL 0.11's
# `mnist_tf_keras` (`KERAS_HOME`, which Keras 3 reads; it must be writable there, else Keras looks
# in /tmp/.keras).
_ADDED_MOUNTS = {
    "tfrecord-mount": ("/tmp/data-rank0", []),
    "fashion-keras-home": ("/data", ["KERAS_HOME=/data"]),
}


def lengths_set_by_config(example: Example) -> bool:
    searcher = yaml.safe_load((example.folder / example.config).read_text())["searcher"]
    return "max_steps" in searcher or "max_length" in searcher


def standin_for(example: Example, folder: Path) -> Path | None:
    """The stand-in data an example reads outside its folder, made in `folder` (under the agent's
    allowed bind root), or None."""
    if example.data in ("wikitext-mount", "fashion-keras-home"):  # writable by the trial's user
        root = write_wikitext(folder) if example.data == "wikitext-mount" else write_fashion_mnist(folder)
        for path in [root, *root.rglob("*")]:
            path.chmod(0o777 if path.is_dir() else 0o666)
        return root
    if example.data == "tfrecord-mount":
        return write_mnist_tfrecords(folder)
    # torchvision's MNIST("../data"), or under the mounted dataroot, finds its files and downloads none
    if example.data in ("mnist-parent", "mnist-mount"):
        write_mnist_raw(folder / "MNIST" / "raw")
        if example.data == "mnist-mount":  # its host /tmp, where the DCGANs' FileLock writes `.lock`
            folder.chmod(0o777)
        return folder
    return None


def run_example(cluster, example: Example, base_url: str, tmp_path: Path, mounts_root: Path) -> str:
    """completes / refused: <its one line> / failed: <the trial's error>."""
    from integration.test_cluster import logs, submit, wait

    model = shutil.copytree(example.folder, tmp_path / example.folder.name)
    if example.data == "mnist-dir":  # where the example's torchvision download looks first
        write_mnist_raw(model / "data" / "MNIST" / "raw")
    standin = standin_for(example, mounts_root / re.sub(r"[^\w.-]", "_", f"{example.release}-{example.name}"))
    try:
        exp_id = submit(cluster, model, config_for_test_mode(example, base_url, standin))
    except grpc.RpcError as refused:
        return f"refused: {refused.details()}"
    result = wait(cluster, exp_id, timeout=840)
    if result.experiment.state == common_pb2.EXPERIMENT_STATE_COMPLETED:
        trial_logs = "\n".join(logs(cluster, t.id)[-3000:] for t in result.trials)
        # A plain script (the Core API tutorial's stage 0) reports nothing: no batches to count.
        trained = [t for t in result.trials if example.framework != "other" and not t.early_exit]
        assert result.trials and all(t.total_batches > 0 for t in trained), trial_logs
        # A Core API script counts its own steps (the MNIST tutorial reads a searcher length as
        # epochs and reports batches): only a Trial's batches are the config's length.
        if lengths_set_by_config(example) and trained and example.framework != "Core API":
            assert {t.total_batches for t in trained} == {TEST_BATCHES}, result
        elif (example.release, example.name) in SCRIPT_BATCHES:  # its script's own, which stays
            assert {t.total_batches for t in trained} == {SCRIPT_BATCHES[example.release, example.name]}
        return "completes"
    errors = [t.error for t in result.trials if t.error] or [result.experiment.error]
    if HARNESS_LINE in errors[0]:  # a one-line cause: the experiment's error names it too
        assert cause_line(errors[0]) in result.experiment.error, result.experiment.error
    return f"failed: {error_summary(errors[0])}"


_EXCEPTION = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception)\b: ")
_RESTARTS = re.compile(r" \((the run before|after \d+ restarts|not restarted).*\)$")


def error_summary(error: str) -> str:
    """The harness's one-line cause where it gave one, else the trial's exception line (the last
    one naming an exception), its first sentence; without pedl's note on restarts: what the
    README's table says an example fails with."""
    if HARNESS_LINE in error:
        return _RESTARTS.sub("", cause_line(error))
    lines = [line.strip() for line in error.strip().splitlines() if line.strip()] or ["no error recorded"]
    named = [line for line in lines if _EXCEPTION.match(line)]
    line = _RESTARTS.sub("", (named or lines)[-1])
    return line.split(". ", 1)[0].rstrip(".")


def _smoke() -> list[Example]:
    try:
        every = examples()
    except pytest.skip.Exception:
        return []
    return [e for e in every if e.runs and (FULL or (e.release, e.name) in SMOKE)]


# A DeepSpeed example's two slots each import DeepSpeed and TensorBoard before the first batch.
@pytest.mark.timeout(900)
@pytest.mark.parametrize("example", _smoke(), ids=lambda e: f"{e.release}:{e.name}")
def test_a_published_example_runs_unchanged(
    cluster, environments, data_server, mounts_root, example, tmp_path
) -> None:
    result = _run(cluster, environments, data_server, mounts_root, example, tmp_path, f"`{example.name}`")
    assert example.matches(result), f"expected {example.expected}\n{cluster.logs()}"


def _run(
    cluster: Any,
    environments: dict[str, str | None],
    data_server: str,
    mounts_root: Path,
    example: Example,
    tmp_path: Path,
    shown: str,
) -> str:
    """Runs `example` on the suite's cluster (skipped when its environment could not be built) and
    prints its table row; its result."""
    if (name := _environment_of(example)) and not environments[name]:
        script = " ".join(example_env.BUILDERS[name])
        pytest.skip(f"the environment {name} could not be built (scripts/{script})")
    result = run_example(cluster, example, data_server, tmp_path, mounts_root)
    print(f"| {example.release} | {shown} | {example.framework} | {result} |")
    return result


def _two_slot_examples() -> list[Example]:
    """Determined 0.38's iris_tf_keras with its distributed.yaml (2 slots), in the full run only."""
    every = _smoke() if FULL else []
    return [
        dataclasses.replace(e, config="distributed.yaml", slots=2)
        for e in every
        if (e.release, e.name) == ("0.38.1", "computer_vision/iris_tf_keras")
    ]


# `determined.launch.tensorflow` gives each of the two ranks TF_CONFIG naming both; the script's fit
# runs under MultiWorkerMirroredStrategy in TensorFlow 2.15's Keras 2 (Keras 3's fit does not run
# under that strategy), the callback reporting and storing from the chief.
@pytest.mark.timeout(900)
@pytest.mark.parametrize("example", _two_slot_examples(), ids=lambda e: f"{e.release}:{e.name}:{e.config}")
def test_a_published_example_runs_unchanged_on_two_slots(
    cluster, environments, data_server, mounts_root, example, tmp_path
) -> None:
    shown = f"`{example.name}` ({example.config})"
    result = _run(cluster, environments, data_server, mounts_root, example, tmp_path, shown)
    assert result == "completes", cluster.logs()


def test_the_readme_table_of_published_examples_is_current() -> None:
    examples()  # skips when the published trees are not here
    script = Path(__file__).with_name("catalogue_table.py")
    check = subprocess.run(
        [sys.executable, str(script), "--check"], capture_output=True, text=True, cwd=_REPO
    )
    assert check.returncode == 0, check.stdout + check.stderr
