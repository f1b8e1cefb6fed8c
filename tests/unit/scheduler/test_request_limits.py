"""Every documented request limit (README "Limits"): over it, create is refused with one line naming the
limit and the flag that raises it, and nothing is created; at it, create succeeds."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import yaml

from pedl.v1 import agent_pb2, common_pb2, scheduler_pb2
from pedl_scheduler import experiment_patch
from pedl_scheduler.cluster import Cluster
from pedl_scheduler.experiments import ExperimentManager, UserError
from pedl_scheduler.main import parse_args
from pedl_scheduler.request_limits import RequestLimits
from pedl_scheduler.storage import open_storage
from pedl_scheduler.storage.ops import experiments as experiment_ops

BASE = {
    "description": "d",
    "hyperparameters": {"x": 1},
    "searcher": {"name": "single", "metric": "error", "max_length": {"batches": 100}},
    "batches_per_step": 10,
}


def create(tmp_path: Path, config: dict | str, limits: RequestLimits | None = None) -> int:
    """Creates the experiment on a fresh scheduler; returns how many experiments it then holds."""
    result: dict = {}

    async def scenario() -> None:
        cluster = Cluster()
        cluster.connect(agent_pb2.RegisterAgent(agent_id="a0", slots=[common_pb2.Slot(id="0")]))
        manager = ExperimentManager(
            open_storage(str(tmp_path / "pedl.db")),
            cluster,
            "127.0.0.1:1",
            model_definition_limit=1024,
            request_limits=limits,
        )
        text = config if isinstance(config, str) else yaml.safe_dump(config)
        try:
            manager.create_experiment(text, b"m" * 10, "model_def")
        except UserError as e:
            result["error"] = str(e)
        result["count"] = len(experiment_ops.experiments_with_trial_counts(manager.db))
        manager.db.close()

    asyncio.run(scenario())
    if "error" in result:
        assert result["count"] == 0, "a refused create wrote an experiment"
        raise UserError(result["error"])
    return result["count"]


def with_(**changes: object) -> dict:
    config = yaml.safe_load(yaml.safe_dump(BASE))
    for path, value in changes.items():
        target = config
        *parents, last = path.split("__")
        for key in parents:
            target = target.setdefault(key, {})
        target[last] = value
    return config


def grid(points_per_axis: int, axes: int) -> dict:
    space = {
        f"h{i}": {"type": "int", "minval": 0, "maxval": 10**6, "count": points_per_axis} for i in range(axes)
    }
    return with_(
        hyperparameters=space, searcher={"name": "grid", "metric": "error", "max_length": {"batches": 10}}
    )


# (name, limit flag, config over the default limit, config at it)
CASES = [
    (
        "config size",
        "--max-config-bytes",
        with_(data={"blob": "x" * 2**20}),
        with_(data={"blob": "x" * 1000}),
    ),
    ("description", "--max-description-length", with_(description="d" * 4097), with_(description="d" * 4096)),
    ("name", "--max-name-length", with_(name="n" * 257), with_(name="n" * 256)),
    ("label length", "--max-label-length", with_(labels=["l" * 256]), with_(labels=["l" * 255])),
    (
        "labels",
        "--max-labels",
        with_(labels=[f"l{i}" for i in range(101)]),
        with_(labels=[f"l{i}" for i in range(100)]),
    ),
    (
        "hyperparameters",
        "--max-hyperparameters",
        with_(hyperparameters={f"h{i}": i for i in range(1001)}),
        with_(hyperparameters={f"h{i}": i for i in range(1000)}),
    ),
    (
        "max_trials",
        "--max-trials",
        with_(
            searcher={
                "name": "random",
                "metric": "error",
                "max_trials": 10_001,
                "max_length": {"batches": 10},
            }
        ),
        with_(
            searcher={
                "name": "random",
                "metric": "error",
                "max_trials": 10_000,
                "max_length": {"batches": 10},
            }
        ),
    ),
    ("grid points", "--max-trials", grid(1000, 2), grid(100, 2)),
    (
        "batches_per_step",
        "--max-batches-per-step",
        with_(batches_per_step=1_000_001),
        with_(batches_per_step=10**6),
    ),
    (
        "batches_per_step past int64",
        "--max-batches-per-step",
        with_(batches_per_step=9223372036854775807),
        with_(batches_per_step=10),
    ),
    (
        "max_length",
        "--max-length-batches",
        with_(searcher__max_length={"batches": 10**12 + 1}),
        with_(searcher__max_length={"batches": 10**12}),
    ),
    (
        "max_steps past int64",
        "--max-length-batches",
        with_(searcher={"name": "single", "metric": "error", "max_steps": 10**23}),
        with_(searcher={"name": "single", "metric": "error", "max_steps": 10**11}),
    ),
    (
        "validation period",
        "--max-length-batches",
        with_(min_validation_period={"batches": 10**13}),
        with_(min_validation_period={"batches": 10**12}),
    ),
]


@pytest.mark.parametrize(("what", "flag", "over", "at"), CASES, ids=[c[0] for c in CASES])
def test_over_a_limit_is_refused_naming_its_flag_and_at_it_is_accepted(
    tmp_path: Path, what: str, flag: str, over: dict, at: dict
) -> None:
    with pytest.raises(UserError) as refused:
        create(tmp_path / "over", over)
    message = str(refused.value)
    assert (
        "\n" not in message and f"({flag} raises it)" in message and "over the scheduler's limit" in message
    )
    assert create(tmp_path / "at", at) == 1


def test_an_operator_raises_a_limit_with_its_flag(tmp_path: Path) -> None:
    args = parse_args(["--max-description-length", "10000", "--max-trials", "20000"])
    assert create(tmp_path, with_(description="d" * 9000), args.request_limits) == 1
    assert args.request_limits.max_trials == 20000


def test_a_limit_below_one_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse_args(["--max-trials", "0"])
    assert "--max-trials must be at least 1, got 0" in capsys.readouterr().err


def test_the_model_definition_limit_names_its_flag(tmp_path: Path) -> None:
    async def scenario() -> str:
        cluster = Cluster()
        cluster.connect(agent_pb2.RegisterAgent(agent_id="a0", slots=[common_pb2.Slot(id="0")]))
        manager = ExperimentManager(
            open_storage(str(tmp_path / "p.db")), cluster, "x:1", model_definition_limit=8
        )
        try:
            manager.create_experiment(yaml.safe_dump(BASE), b"m" * 9, "model_def")
        except UserError as e:
            return str(e)
        finally:
            manager.db.close()
        return ""

    assert "(--model-definition-limit-mb raises it)" in asyncio.run(scenario())


def test_patching_a_description_or_label_honours_the_same_limits() -> None:
    row = {"id": 1, "labels_json": "[]", "state": "ACTIVE"}
    with pytest.raises(experiment_patch.PatchError, match="--max-description-length"):
        experiment_patch.changes(row, scheduler_pb2.PatchExperimentRequest(description="d" * 11), 10, 5)
    with pytest.raises(experiment_patch.PatchError, match="--max-label-length"):
        experiment_patch.changes(row, scheduler_pb2.PatchExperimentRequest(add_labels=["l" * 6]), 10, 5)
    assert experiment_patch.changes(row, scheduler_pb2.PatchExperimentRequest(description="d" * 10), 10, 5)
