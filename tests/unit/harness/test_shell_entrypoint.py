"""A string entrypoint runs as Determined's launch runs it, through `sh -c` (shell builtins, pipes,
`&&`), a list entrypoint is executed as it is; a failing one names its exit code in Determined's
words. Config parsing alone, and real scripts under the harness's Core API server (no agent)."""

from __future__ import annotations

import time

import psutil
import pytest
import yaml
from core_api_rig import start_script

from pedl.config import carried, parse_experiment_config
from pedl.config.entrypoint import Entrypoint, parse_entrypoint
from pedl.harness.core_api_trial import CoreApiTrial, ScriptFailed, ScriptSettings
from pedl.harness.process_tree import descendants
from pedl.v1 import common_pb2

KIND = common_pb2.WorkloadKind

SEARCHER = "searcher: {name: single, metric: x}\n"

SCRIPT = """
import os
import determined as det
with open("pid", "w") as f:
    f.write(str(os.getpid()))
with det.core.init() as core:
    core.train.report_validation_metrics(steps_completed=10, metrics={"x": 1.0})
    while not core.preempt.should_preempt():
        pass
"""


def spec(entrypoint: str) -> Entrypoint:
    """The entrypoint as a config file writes it (`entrypoint: ...`), parsed."""
    parsed = parse_entrypoint(yaml.safe_load(entrypoint)["entrypoint"])
    assert parsed is not None
    return parsed


def test_a_string_command_is_run_by_sh_and_a_list_as_written() -> None:
    # Determined's test_create_test_mode overrides the entrypoint with `--config=entrypoint=exit 99`.
    builtin = spec("entrypoint: exit 99\n")
    assert (builtin.kind, builtin.shell, builtin.command, str(builtin)) == (
        "command",
        "exit 99",
        ("exit", "99"),
        "exit 99",
    )
    piped = spec("entrypoint: \"python3 train.py --x 'a b' | tee log && echo done\"\n")
    assert piped.shell == "python3 train.py --x 'a b' | tee log && echo done"
    assert str(piped) == piped.shell
    single = spec("entrypoint: ./run.sh\n")
    assert (single.kind, single.shell) == ("command", "./run.sh")
    listed = spec("entrypoint: [python3, train.py, --x, 'a b']\n")
    assert (listed.shell, listed.command) == ("", ("python3", "train.py", "--x", "a b"))
    launched = spec("entrypoint: python3 -m determined.launch.torch_distributed --trial model_def:T\n")
    assert (launched.kind, launched.object_ref) == ("trial", "T")


def test_the_shell_text_travels_to_the_harness() -> None:
    config = parse_experiment_config(SEARCHER + "entrypoint: exit 99\n")
    again = carried.from_json(carried.to_json(config))
    assert again.entrypoint_spec is not None and again.entrypoint_spec.shell == "exit 99"


def start(tmp_path, shell: str = "", command: list[str] | None = None):
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "train.py").write_text(SCRIPT)
    settings = ScriptSettings(
        command=command or shell.split(),
        shell=shell,
        model_dir=tmp_path / "model",
        chief=True,
        searcher_metric="x",
    )
    return start_script(tmp_path, settings)


def run_step(trial, total: int) -> common_pb2.WorkloadResult:
    return trial.run_workload(
        common_pb2.Workload(kind=KIND.WORKLOAD_KIND_RUN_STEP, trial_id=1, run_id=1, total_batches=total)
    )


def test_a_shell_builtin_fails_the_trial_naming_its_exit_code_in_determineds_words(tmp_path) -> None:
    trial, server = start(tmp_path, shell="exit 99")
    try:
        with pytest.raises(ScriptFailed) as failed:
            run_step(trial, 10)
        assert str(failed.value) == "the entrypoint 'exit 99' exited with code 99"
        assert failed.value.determined_line() == (
            "resources failed with non-zero exit code: the entrypoint 'exit 99' exited with code 99 "
            "(exit code 99)"
        )
    finally:
        trial.kill()
        server.close()


def test_pipes_and_and_lists_run_the_script_under_the_shell(tmp_path) -> None:
    trial, server = start(tmp_path, shell="test -f train.py && python3 train.py | cat")
    try:
        step = run_step(trial, 10)  # its validation at 10 came through the Core API
        assert step.script_progress == 10
        trial.close()  # should_preempt() turns true: the script exits, the pipeline with it
        assert trial.wait_for_exit() == 0
    finally:
        trial.kill()
        server.close()


def test_a_list_entrypoint_is_executed_without_a_shell(tmp_path) -> None:
    settings = ScriptSettings(command=["exit", "99"], model_dir=tmp_path, chief=True, searcher_metric="x")
    trial = CoreApiTrial(settings, checkpoints=None, work_dir=tmp_path)  # type: ignore[arg-type]
    with pytest.raises(ScriptFailed, match="cannot start the entrypoint 'exit 99': 'exit' is not on PATH"):
        trial.start({"PATH": "/usr/bin:/bin"})


def test_killing_a_shell_entrypoint_kills_the_commands_it_started(tmp_path) -> None:
    trial, server = start(tmp_path, shell="python3 train.py | cat")
    try:
        run_step(trial, 10)
        script = psutil.Process(int((tmp_path / "model" / "pid").read_text()))
        trial.kill()
        deadline = time.monotonic() + 60
        while script.is_running() and script.status() != psutil.STATUS_ZOMBIE:
            assert time.monotonic() < deadline, "the shell's python3 outlived the kill"
            time.sleep(0.05)
    finally:
        trial.kill()
        server.close()


def test_descendants_are_read_from_proc_names_with_spaces_and_parentheses_too(tmp_path) -> None:
    table = [(10, "sh", 1), (11, "python3 (x) y", 10), (12, "cat", 10), (13, "z", 11), (14, "w", 1)]
    for pid, name, parent in table:
        (tmp_path / str(pid)).mkdir()
        (tmp_path / str(pid) / "stat").write_text(f"{pid} ({name}) S {parent} {pid} 0 0\n")
    (tmp_path / "self").mkdir()
    assert sorted(descendants(10, tmp_path)) == [11, 12, 13]
    assert descendants(13, tmp_path) == []
