"""Two experiments of different weight on one 4-slot agent share its slots in proportion."""

from __future__ import annotations

import time

import pytest
from test_cluster import stub, submit

from pedl.v1 import common_pb2, scheduler_pb2
from support.models import write_tiny_model
from support.processes import local_cluster

pytestmark = pytest.mark.integration

CONFIG = """
hyperparameters:
  learning_rate: {{type: double, minval: 0.01, maxval: 0.1}}
searcher:
  {{name: random, metric: error, max_trials: 40, max_concurrent_trials: 8, max_length: {{batches: 20}}}}
batches_per_step: 10
resources: {{weight: {weight}}}
"""


def test_slots_are_shared_in_proportion_to_weight(tmp_path) -> None:
    with local_cluster(tmp_path / "cluster", agents=1, slots=4) as cluster:
        model = write_tiny_model(tmp_path / "tiny")
        light = submit(cluster, model, CONFIG.format(weight=1))
        heavy = submit(cluster, model, CONFIG.format(weight=3))
        samples: list[int] = []
        deadline = time.monotonic() + 240
        first_wave_done = False
        while len(samples) < 30 and time.monotonic() < deadline:
            # Slots first, trials after: a trial placed between the two calls is then always known
            # (read the other way round, a heavy trial created in between counted as the light one's).
            agents = stub(cluster).ListAgents(scheduler_pb2.ListAgentsRequest()).agents
            owners = [s.trial_id for s in agents[0].slots if s.trial_id]
            trials = {}
            for exp_id in (light, heavy):
                response = stub(cluster).GetExperiment(
                    scheduler_pb2.GetExperimentRequest(experiment_id=exp_id)
                )
                trials.update({t.id: (exp_id, t.state) for t in response.trials})
            # The experiment submitted first fills the agent; shares settle as its first trials end.
            first_wave_done = (
                first_wave_done
                or sum(e == light and st == common_pb2.TRIAL_STATE_COMPLETED for e, st in trials.values())
                >= 4
            )
            # Shares are only owed while both experiments want the whole agent: each has at least 4
            # trials not yet completed (placed or waiting). Near the end one of them runs out of work,
            # and the other rightly takes its slots.
            unfinished = {
                exp: sum(e == exp and st != common_pb2.TRIAL_STATE_COMPLETED for e, st in trials.values())
                for exp in (light, heavy)
            }
            if first_wave_done and len(owners) == 4 and min(unfinished.values()) >= 4:
                samples.append(sum(trials.get(t, (0, 0))[0] == heavy for t in owners))
            if first_wave_done and max(unfinished.values()) == 0:
                break  # both searches are done: no more samples to take
            time.sleep(0.25)
        stub(cluster).KillExperiment(scheduler_pb2.KillExperimentRequest(experiment_id=light))
        stub(cluster).KillExperiment(scheduler_pb2.KillExperimentRequest(experiment_id=heavy))
        assert len(samples) >= 10, cluster.logs()
        # Steady state is 3 of 4 slots for the weight-3 experiment.
        assert sum(samples) / len(samples) >= 2.5, samples
