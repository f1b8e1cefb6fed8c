"""An experiment's bind_mounts on an agent: host_path at container_path under the allowed roots, or
the run fails naming the mount."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from pedl.config import ExperimentConfig, carried, parse_experiment_config
from pedl.config.errors import ConfigError
from pedl_agent.bind_mounts import mounts_of, unmet_bind_mount
from pedl_agent.sandbox import Sandbox
from pedl_agent.trial_view import Mount

CONFIG = """
searcher: {name: single, metric: loss, max_length: {batches: 1}}
bind_mounts:
  - {host_path: %s, container_path: %s, read_only: %s, propagation: rprivate}
"""


def _config(host: Path, container: str | Path | None = None, read_only: bool = False) -> ExperimentConfig:
    # As the agent gets it: decoded from the document the scheduler sends (StartTrial.config_json).
    text = CONFIG % (host, container or host, "true" if read_only else "false")
    return carried.from_json(carried.to_json(parse_experiment_config(text)))


def _mounts(host: Path, container: str | Path | None = None, read_only: bool = False) -> list[Mount]:
    return mounts_of(_config(host, container, read_only).bind_mounts)


def test_the_config_is_read_as_determined_writes_it(tmp_path: Path) -> None:
    assert _mounts(tmp_path, "/data", read_only=True) == [Mount(tmp_path, Path("/data"), True)]
    assert _mounts(tmp_path, "data/") == [Mount(tmp_path, Path("data"), False)]


def test_a_plain_process_honours_only_a_host_path_at_that_path(tmp_path: Path) -> None:
    assert unmet_bind_mount(_mounts(tmp_path / "data"), None) is None
    error = unmet_bind_mount(_mounts(tmp_path / "data", "/data"), None)
    assert error is not None and error.startswith("bind_mounts[0].container_path /data:")
    assert "--isolation none" in error and "\n" not in error


def test_a_sandbox_mounts_what_lies_under_an_allowed_root_anywhere(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    sandbox = Sandbox("bwrap", bind_roots=(tmp_path,))
    assert unmet_bind_mount(_mounts(tmp_path / "data", "/mnt/data", read_only=True), sandbox) is None
    assert unmet_bind_mount(_mounts(tmp_path, "/data"), sandbox) is None


def test_a_host_path_outside_the_allowed_roots_is_refused_naming_them(tmp_path: Path) -> None:
    sandbox = Sandbox("bwrap", bind_roots=(tmp_path / "datasets",))
    error = unmet_bind_mount(_mounts(tmp_path / "scratch", "/data"), sandbox)
    assert error is not None and error.startswith(f"bind_mounts[0].host_path {tmp_path / 'scratch'}:")
    assert f"allowed roots: {tmp_path / 'datasets'}" in error and "--allowed-bind-root" in error
    assert "\n" not in error


def test_a_container_path_over_what_the_trial_needs_is_refused_naming_the_field(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    venv = tmp_path / "venv"
    sandbox = Sandbox("bwrap", bind_roots=(tmp_path,), python=(venv,))
    error = unmet_bind_mount(_mounts(tmp_path / "data", tmp_path), sandbox, tmp_path / "t", tmp_path / "s")
    assert error is not None and error.startswith(f"bind_mounts[0].container_path {tmp_path}:"), error
    assert f"would cover {venv}" in error
    # Paths every trial needs on every agent are refused at create already, naming the field and line.
    for container in ("/usr", "/"):
        with pytest.raises(ConfigError) as refused:
            _config(tmp_path / "data", container)
        assert "bind_mounts[0].container_path" in str(refused.value)
        assert "line 4" in str(refused.value) and f"would cover {container}" in str(refused.value)


def test_a_sandbox_refuses_a_mount_inside_what_the_agent_hides(tmp_path: Path) -> None:
    (tmp_path / "work" / "trials").mkdir(parents=True)
    sandbox = Sandbox("bwrap", hidden=(tmp_path / "work",), bind_roots=(tmp_path,))
    error = unmet_bind_mount(_mounts(tmp_path / "work" / "trials", "/data"), sandbox)
    assert error is not None and "hides" in error
    error = unmet_bind_mount(_mounts(tmp_path, "/data"), sandbox)  # holding what it hides
    assert error is not None and "hides" in error


def test_a_config_without_mounts_needs_nothing() -> None:
    config = parse_experiment_config("searcher: {name: single, metric: loss, max_length: 1}")
    assert carried.from_json(carried.to_json(config)).bind_mounts == []
    assert unmet_bind_mount([], Sandbox("bwrap")) is None


def test_a_refused_mount_signs_the_runs_failure_so_a_repeat_ends_the_trial(tmp_path: Path) -> None:
    """The scheduler ends a trial whose two runs fail alike before training (#37.5): the refusal
    carries the mount as its location, the same on every run this agent refuses."""
    import pytest

    from pedl.v1 import agent_pb2
    from pedl_agent.bind_mounts import BindMountRefused, run_mounts

    (tmp_path / "datasets" / "a").mkdir(parents=True)
    sandbox = Sandbox("bwrap", bind_roots=(tmp_path / "datasets",))
    start = agent_pb2.StartTrial(experiment_id=3)
    ok = _config(tmp_path / "datasets" / "a", "/data")
    assert run_mounts(start, ok, sandbox, tmp_path / "trial", tmp_path / "sock")
    with pytest.raises(BindMountRefused) as refused:
        run_mounts(
            start, _config(tmp_path / "scratch", "/data"), sandbox, tmp_path / "trial", tmp_path / "sock"
        )
    signature = refused.value.signature()
    assert signature.location == "bind_mounts[0]" and signature.exception_type.endswith("BindMountRefused")
    assert str(refused.value.args[0]).startswith("experiment 3: bind_mounts[0].host_path ")


def test_a_relative_container_path_may_lie_beside_the_model_directory_and_no_further(tmp_path: Path) -> None:
    # Determined's Core API MNIST tutorial reads torchvision's MNIST from `../data`: a relative
    # container_path is relative to the working directory (the model directory), and `../NAME` lies
    # in the run's own trial directory.
    assert _mounts(tmp_path, "../data") == [Mount(tmp_path, Path("../data"), False)]
    for container in ("..", "../../data", "../.tmp", "../data/../../x", "."):
        with pytest.raises(ConfigError) as refused:
            _config(tmp_path, container)
        assert "bind_mounts[0].container_path" in str(refused.value) and "line 4" in str(refused.value)


@pytest.mark.skipif(not Path("/usr/bin/bwrap").exists(), reason="bubblewrap is not installed")
def test_a_sandboxed_trial_reads_a_mount_at_dot_dot_slash_data_beside_its_model_directory(
    tmp_path: Path,
) -> None:
    data = tmp_path / "standin"
    data.mkdir()
    (data / "hello").write_text("stand-in")
    trial = tmp_path / "work" / "trials" / "1-1"
    (trial / "model_def").mkdir(parents=True)
    sock = tmp_path / "work" / "1-1.sock"
    sock.write_text("")
    sandbox = Sandbox("/usr/bin/bwrap", bind_roots=(tmp_path,))
    assert unmet_bind_mount(_mounts(data, "../data"), sandbox, trial, sock) is None
    script = "print(open('../data/hello').read())"
    argv = sandbox.wrap(
        ["/usr/bin/python3", "-c", script], trial, trial / "model_def", sock, _mounts(data, "../data")
    )
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "stand-in"
