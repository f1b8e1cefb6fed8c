"""A Core API script's TensorBoard files under the harness: get_tensorboard_path() is the run's
directory; in TensorboardMode.MANUAL only what upload_tensorboard_files() names goes up, under its
mangled name, and the harness sends nothing by itself; in AUTO that call is refused (as Determined's).
A real child process and socket; no agent."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from pedl.harness.core_api_server import CoreApiServer
from pedl.harness.core_api_trial import CoreApiTrial, ScriptSettings, handlers
from pedl.harness.script_env import script_environment
from pedl.harness.script_run import cluster_info
from pedl.harness.tensorboard_sync import TENSORBOARD_ENV, TensorboardUploader, run_directories
from pedl.v1 import agent_pb2

SCRIPT = """
import pathlib
import determined as det

mode = det.core.TensorboardMode.MODE
with det.core.init(tensorboard_mode=mode) as core:
    path = core.train.get_tensorboard_path()
    print("path", path)
    (path / "keep").write_bytes(b"kept")
    (path / "skip").write_bytes(b"skipped")
    try:
        core.train.upload_tensorboard_files(
            selector=lambda p: p.name == "keep", mangler=lambda p, rank: pathlib.Path(f"rank{rank}") / p
        )
    except RuntimeError as e:
        print("refused:", e)
"""


def run_script(tmp_path: Path, mode: str) -> tuple[TensorboardUploader, list[tuple[str, bytes]], int]:
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "train.py").write_text(SCRIPT.replace("MODE", mode))
    sent: list[tuple[str, bytes]] = []
    uploader = TensorboardUploader(
        run_directories(tmp_path), lambda files: sent.extend((r, p.read_bytes()[:s]) for r, p, s in files)
    )
    settings = ScriptSettings(
        command=[sys.executable, "train.py"], model_dir=tmp_path / "model", chief=True, searcher_metric="x"
    )
    trial = CoreApiTrial(settings, checkpoints=None, work_dir=tmp_path)  # type: ignore[arg-type]
    calls = handlers(trial)
    calls.update(tensorboard_manual=uploader.set_manual, tensorboard_upload=uploader.upload_named)
    server = CoreApiServer(tmp_path / "core.sock", calls)
    info = tmp_path / "info.json"
    info.write_text(json.dumps(cluster_info(agent_pb2.StartTrial(trial_id=1, run_id=1), {}, {}, None)))
    env = {k: v for k, v in os.environ.items() if k not in ("WORLD_SIZE", "RANK")}
    env[TENSORBOARD_ENV] = str(tmp_path / "tensorboard")
    try:
        trial.start(script_environment(env, str(server.socket_path), server.key, info))
        code = trial.wait_for_exit()
    finally:
        trial.kill()
        server.close()
    return uploader, sent, code


def test_manual_mode_uploads_only_the_selected_files_under_their_mangled_names(tmp_path) -> None:
    uploader, sent, code = run_script(tmp_path, "MANUAL")
    assert code == 0
    assert sent == [("rank0/keep", b"kept")]
    assert uploader.manual and uploader.sync() == 0  # nothing goes up by itself


def test_auto_mode_refuses_upload_tensorboard_files_and_the_harness_sends_everything(tmp_path) -> None:
    uploader, sent, code = run_script(tmp_path, "AUTO")
    assert code == 0 and sent == []
    assert uploader.sync() == 2
    assert sorted(sent) == [("keep", b"kept"), ("skip", b"skipped")]
