"""`det e set max-slots|priority` on a running experiment: the next scheduling pass honours the new
value (stored in the experiment's config, so a restarted scheduler does too)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from pedl.config.stored import parse_stored_config
from pedl.v1 import agent_pb2, common_pb2, scheduler_pb2
from pedl_scheduler.cluster import Cluster
from pedl_scheduler.experiment_patch import config_change
from pedl_scheduler.experiments import ExperimentManager
from pedl_scheduler.storage import open_storage
from pedl_scheduler.storage.ops import experiments as experiment_ops

CONFIG = """
hyperparameters: {x: {type: double, minval: 0, maxval: 1}}
searcher: {name: random, metric: error, max_trials: 2, max_length: {batches: 20}}
batches_per_step: 10
"""


def scenario(tmp_path: Path, slots: int, body) -> None:  # type: ignore[no-untyped-def]
    async def main() -> None:
        cluster = Cluster()
        offered = [common_pb2.Slot(id=str(i)) for i in range(slots)]
        cluster.connect(agent_pb2.RegisterAgent(agent_id="a0", slots=offered))
        manager = ExperimentManager(open_storage(str(tmp_path / "pedl.db")), cluster, "127.0.0.1:1")
        try:
            body(manager)
        finally:
            manager.db.close()

    asyncio.run(main())


def patch(manager: ExperimentManager, exp_id: int, **fields: object) -> None:
    """What PatchExperiment does: the changed config is stored, then the live experiment takes it."""
    row = experiment_ops.experiment(manager.db, exp_id)
    request = scheduler_pb2.PatchExperimentRequest(experiment_id=exp_id, **fields)  # type: ignore[arg-type]
    config = config_change(row, request)
    experiment_ops.patch_experiment(
        manager.db, exp_id, config_json=json.dumps(config.raw), config_yaml=config.masked_yaml()
    )
    manager.reconfigure(exp_id, config)


def running(manager: ExperimentManager) -> list[int]:
    return sorted(t.experiment_id for t in manager.trials.values() if t.running)


def test_a_new_max_slots_caps_the_next_pass_and_none_lifts_it(tmp_path: Path) -> None:
    def body(manager: ExperimentManager) -> None:
        exp = manager.create_experiment(CONFIG, b"m", "m")
        patch(manager, exp, max_slots=1)
        manager.tick(0)
        assert running(manager) == [exp]
        stored = parse_stored_config(json.loads(experiment_ops.experiment(manager.db, exp)["config_json"]))
        assert stored.resources.max_slots == 1  # a restarted scheduler reads it back
        patch(manager, exp, max_slots=0)
        manager.tick(0)
        assert running(manager) == [exp, exp]

    scenario(tmp_path, 2, body)


def test_a_new_priority_puts_a_younger_experiment_first(tmp_path: Path) -> None:
    def body(manager: ExperimentManager) -> None:
        older = manager.create_experiment(CONFIG, b"m", "m")
        younger = manager.create_experiment(CONFIG, b"m", "m")
        patch(manager, younger, priority=10)  # smaller runs first (the default is 42)
        manager.tick(0)
        assert running(manager) == [younger] and older in manager.experiments

    scenario(tmp_path, 1, body)


def test_patch_experiment_changes_the_running_experiments_held_config_without_a_parse(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The servicer's PatchExperiment: the live experiment's typed config is changed (no parse), stored,
    and sent back in the response's config document."""
    from pedl.config import carried, experiment
    from pedl_scheduler.api import SchedulerApi

    class Context:
        async def abort(self, code: object, details: str) -> None:
            raise AssertionError(details)

    async def main() -> None:
        cluster = Cluster()
        cluster.connect(agent_pb2.RegisterAgent(agent_id="a0", slots=[common_pb2.Slot(id="0")]))
        manager = ExperimentManager(open_storage(str(tmp_path / "pedl.db")), cluster, "127.0.0.1:1")
        try:
            exp = manager.create_experiment(CONFIG, b"m", "m")
            held = manager.experiments[exp].config
            monkeypatch.setattr(experiment, "_build", lambda data: pytest.fail("the held config was parsed"))
            api = SchedulerApi(manager, cluster, "cluster")
            request = scheduler_pb2.PatchExperimentRequest(experiment_id=exp, name="wider", max_slots=3)
            reply = await api.PatchExperiment(request, Context())  # type: ignore[arg-type]
            live = manager.experiments[exp].config
            assert (live.name, live.resources.max_slots, live.max_length) == ("wider", 3, held.max_length)
            sent = carried.from_json(reply.experiment.config_document)
            assert (sent.name, sent.resources.max_slots) == ("wider", 3)
            stored = json.loads(experiment_ops.experiment(manager.db, exp)["config_json"])
            assert (stored["name"], stored["resources"]["max_slots"]) == ("wider", 3)
        finally:
            manager.db.close()

    asyncio.run(main())
