"""Every command's arguments parse as documented."""

from __future__ import annotations

import pytest

from pedl.cli import cmd_agent, cmd_cluster, cmd_experiment, cmd_experiment_views, cmd_trial
from pedl.cli.main import build_parser


def parse(*argv: str):  # type: ignore[no-untyped-def]
    return build_parser().parse_args(list(argv))


def test_experiment_create_verbatim_det_form() -> None:
    args = parse("experiment", "create", "const.yaml", "model_dir")
    assert (args.config_file, args.context_dir, args.follow) == ("const.yaml", "model_dir", False)
    assert args.func is cmd_experiment.create_experiment
    assert parse("e", "create", "c.yaml", ".", "--follow").follow


def test_master_before_or_after_the_subcommand() -> None:
    assert parse("--master", "h:1", "experiment", "list").master == "h:1"
    assert parse("experiment", "list", "--master", "h:2").master == "h:2"
    assert not hasattr(parse("experiment", "list"), "master")


@pytest.mark.parametrize(
    ("argv", "func", "fields"),
    [
        (["experiment", "list"], cmd_experiment.list_experiments, {}),
        (["experiment", "describe", "3", "--json"], cmd_experiment_views.describe_experiments,
         {"experiment_ids": [3], "json": True}),
        (["experiment", "describe", "3"], cmd_experiment_views.describe_experiments, {"json": False}),
        (["e", "describe", "1,2", "--metrics", "--outdir", "d"], cmd_experiment_views.describe_experiments,
         {"experiment_ids": [1, 2], "metrics": True, "outdir": "d"}),
        (["e"], cmd_experiment.list_experiments, {}),
        (["e", "create", "c.yaml", ".", "-t"], cmd_experiment.create_experiment, {"test": True}),
        (["e", "create", "c.yaml", ".", "--test-mode"], cmd_experiment.create_experiment, {"test": True}),
        (["e", "lt", "3", "--csv"], cmd_experiment_views.list_trials, {"experiment_id": 3, "csv": True}),
        (["e", "lc", "3", "--best", "2"], cmd_experiment_views.list_experiment_checkpoints, {"best": 2}),
        (["e", "download", "3", "--top-n", "2"], cmd_experiment_views.download_experiment, {"top_n": 2}),
        (["e", "cancel", "4"], cmd_experiment.kill_experiment, {"experiment_id": 4}),
        (["t", "logs", "9", "--tail", "5"], cmd_trial.trial_logs, {"tail": 5, "head": None}),
        (["t", "download", "9", "--best"], cmd_trial.download_trial, {"best": True}),
        (["experiment", "kill", "4"], cmd_experiment.kill_experiment, {"experiment_id": 4}),
        (["experiment", "wait", "5"], cmd_experiment.wait_experiment, {"experiment_id": 5}),
        (
            ["experiment", "download-model-def", "6", "-o", "out"],
            cmd_experiment.download_model_def,
            {"experiment_id": 6, "output_dir": "out"},
        ),
        (["trial", "logs", "9"], cmd_trial.trial_logs, {"trial_id": 9, "follow": False}),
        (["trial", "logs", "9", "--follow"], cmd_trial.trial_logs, {"follow": True}),
        (["trial", "describe", "9"], cmd_trial.describe_trial, {"trial_id": 9}),
        (["agent", "list"], cmd_agent.list_agents, {}),
        (["slot", "list"], cmd_agent.list_slots, {}),
        (
            ["cluster", "up"],
            cmd_cluster.cluster_up,
            {"agents": 1, "slots_per_agent": 1, "port": 8080, "store_port": 8090, "home": None},
        ),
        (
            ["cluster", "up", "--agents", "2", "--slots-per-agent", "3", "--port", "0", "--store-port", "0",
             "--home", "/tmp/h"],
            cmd_cluster.cluster_up,
            {"agents": 2, "slots_per_agent": 3, "port": 0, "store_port": 0, "home": "/tmp/h"},
        ),
        (["cluster", "down", "--home", "/tmp/h"], cmd_cluster.cluster_down, {"home": "/tmp/h"}),
    ],
)  # fmt: skip
def test_commands(argv: list[str], func: object, fields: dict[str, object]) -> None:
    args = parse(*argv)
    assert args.func is func
    for name, value in fields.items():
        assert getattr(args, name) == value


@pytest.mark.parametrize(
    "argv",
    [
        ["experiment", "create", "only-config.yaml"],
        ["experiment", "describe", "abc"],
        ["experiment", "kill", "0"],
        ["e", "set", "priority", "3", "100"],
        ["e", "set", "weight", "3", "0"],
        ["e", "set", "max-slots", "3", "0"],
        ["e", "set", "gc-policy", "3", "--save-experiment-best", "1"],
        "e set gc-policy 3 --save-experiment-best -1 --save-trial-best 0 --save-trial-latest 0".split(),
        ["t", "kill", "x"],
        ["experiment", "download-model-def", "1"],
        ["trial", "logs"],
        ["cluster", "up", "--slots-per-agent", "0"],
        ["cluster", "up", "--port", "70000"],
        [],
    ],
)
def test_bad_arguments_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        parse(*argv)
    assert exc.value.code == 2
    assert "error:" in capsys.readouterr().err


def test_the_not_logged_in_hint_is_given_once() -> None:
    import grpc

    from pedl.cli.errors import rpc_error_message

    class Error(grpc.RpcError):
        def __init__(self, details: str) -> None:
            self._details = details

        def code(self) -> grpc.StatusCode:
            return grpc.StatusCode.UNAUTHENTICATED

        def details(self) -> str:
            return self._details

    assert (
        rpc_error_message(Error("this call needs a credential: log in with `pedl user login`"), "m:1").count(
            "user login"
        )
        == 1
    )
    assert "log in with `pedl user login`" in rpc_error_message(Error("expired"), "m:1")


def test_experiment_set_takes_determineds_argument_forms() -> None:
    from pedl.cli import cmd_experiment_set

    assert parse("e", "set", "max-slots", "3", "none").value == 0  # no cap
    assert parse("e", "set", "max-slots", "3", "4").value == 4
    assert parse("e", "set", "weight", "3", "0.5").value == 0.5
    assert parse("e", "set", "priority", "3", "10").func is cmd_experiment_set.set_resource
    gc = parse(
        "e", "set", "gc-policy", "3", "--save-experiment-best", "1", "--save-trial-best", "0",
        "--save-trial-latest", "2", "--yes",
    )  # fmt: skip
    assert (gc.save_experiment_best, gc.save_trial_best, gc.save_trial_latest, gc.yes) == (1, 0, 2, True)
    assert parse("t", "kill", "5").func is cmd_trial.kill_trial
