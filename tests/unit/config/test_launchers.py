"""Determined's launch layers in `entrypoint`, decided at create (Determined's launcher usage:
`python3 -m determined.launch.<name> [[OVERRIDES...] --] (--trial TRIAL)|(SCRIPT...)`)."""

from __future__ import annotations

import pytest

from pedl.config import ConfigError, parse_experiment_config

SEARCHER = "searcher: {name: single, metric: loss, max_length: {batches: 10}}\n"


def _entrypoint(text: str):
    return parse_experiment_config(SEARCHER + f"entrypoint: {text}\n", filename="c.yaml").entrypoint_spec


@pytest.mark.parametrize(
    "command",
    [
        "python3 -m determined.launch.torch_distributed --trial model_def:MyTrial",
        "python3 -m determined.launch.torch_distributed --max_restarts 0 -- --trial model_def:MyTrial",
        "python3 -m determined.launch.horovod --autohorovod --trial model_def:MyTrial",
        "python -m determined.launch.horovod --trial=model_def:MyTrial",
        "python3 -m determined.launch.deepspeed --trial model_def:MyTrial",
        "[python3, -m, determined.launch.torch_distributed, --trial, 'model_def:MyTrial']",
    ],
)
def test_a_trial_class_under_a_launcher_is_that_trial_class(command: str) -> None:
    spec = _entrypoint(command)
    assert (spec.kind, spec.module, spec.object_ref) == ("trial", "model_def", "MyTrial")


def test_a_script_under_torch_distributed_stays_a_command() -> None:
    spec = _entrypoint(
        "python3 -m determined.launch.torch_distributed --trust-worker-addrs -- python3 train.py"
    )
    assert spec.kind == "command" and spec.command[-2:] == ("python3", "train.py")
    assert _entrypoint("python3 -m determined.launch.wrap_rank 0 python3 train.py").kind == "command"
    # Determined 0.38's DeepSpeed scripts (det_ds.init() and its Trainer), as its DCGAN example runs.
    spec = _entrypoint("python3 -m determined.launch.deepspeed python3 trainer.py")
    assert spec.kind == "command" and spec.command[-2:] == ("python3", "trainer.py")
    # Determined 0.38's Keras scripts (DistributedContext.from_tf_config(), DeterminedCallback).
    for entrypoint in (
        "python3 -m determined.launch.tensorflow -- python3 train.py",
        "python3 -m determined.launch.tensorflow python3 train.py",
    ):
        spec = _entrypoint(entrypoint)
        assert spec.kind == "command" and spec.command[-2:] == ("python3", "train.py")


@pytest.mark.parametrize(
    ("command", "words"),
    [
        ("python3 -m determined.launch.deepspeed --autotuning run python3 t.py", "option --autotuning"),
        ("python3 -m determined.launch.tensorflow --", "no command to launch"),
        ("python3 -m determined.launch.tensorflow --foo python3 t.py", "option --foo is not supported"),
        ("python3 -m determined.launch.horovod python3 train.py", "horovod is not supported by pedl"),
        (
            "python3 -m determined.launch.horovod --fusion-threshold-mb 1 -- --trial m:T",
            "horovod is not supported",
        ),
        (
            "python3 -m determined.launch.torch_distributed --nproc-per-node 2 python3 t.py",
            "option --nproc-per-node",
        ),
        ("python3 -m determined.launch.torch_distributed --trial m:T extra", "nothing after it"),
        ("python3 -m determined.launch.torch_distributed --trial", "one 'module:Class'"),
        ("python3 -m determined.launch.torch_distributed --trial train.py", "'--trial' expects"),
        ("python3 -m determined.launch.torch_distributed --", "no command to launch"),
        ("python3 -m determined.launch.wrap_rank python3 t.py", "RANK"),
        ("python3 -m determined.launch.slurm python3 t.py", "not a launcher pedl knows"),
    ],
)
def test_a_launcher_pedl_cannot_honour_is_refused_at_create_naming_entrypoint(
    command: str, words: str
) -> None:
    with pytest.raises(ConfigError) as info:
        _entrypoint(command)
    assert info.value.path == "entrypoint" and info.value.line == 2, str(info.value)
    assert words in info.value.message and "\n" not in str(info.value)


def test_a_trial_launcher_takes_trial_settings_a_script_would_not() -> None:
    """min_checkpoint_period is refused for a Core API script, but `--trial` runs a Trial class."""
    text = (
        SEARCHER
        + "entrypoint: python3 -m determined.launch.horovod --autohorovod --trial model_def:IrisTrial\n"
        "min_checkpoint_period: {batches: 50}\n"
    )
    assert parse_experiment_config(text).min_checkpoint_period_batches == 50
