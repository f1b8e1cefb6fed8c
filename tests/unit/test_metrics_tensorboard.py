"""pedl.tensorboard: scalars from metric dicts, and incremental event files of a live experiment."""

from __future__ import annotations

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from pedl._metrics import to_struct
from pedl.tensorboard import MetricsSync, run_dir, scalars
from pedl.v1 import common_pb2, scheduler_pb2


def test_scalars_keep_numbers_and_flatten_nested_dicts() -> None:
    metrics = {"loss": 0.5, "steps": 3, "ok": True, "name": "x", "per_class": {"a": 1.0, "b": {"c": 2}}}
    assert dict(scalars(metrics)) == {"loss": 0.5, "steps": 3.0, "per_class/a": 1.0, "per_class/b/c": 2.0}


class FakeScheduler:
    """One experiment with one trial whose steps arrive between refreshes."""

    def __init__(self) -> None:
        self.state = common_pb2.EXPERIMENT_STATE_ACTIVE
        self.trial_state = common_pb2.TRIAL_STATE_ACTIVE
        self.steps: list[scheduler_pb2.Step] = []
        self.trial_fetches = 0

    def add_step(self, batches: int, loss: float) -> None:
        step = scheduler_pb2.Step(
            step_id=len(self.steps) + 1, total_batches=batches, end_time="2024-05-01T12:00:00Z"
        )
        step.metrics.CopyFrom(to_struct({"loss": loss}))
        self.steps.append(step)

    def get_experiment(self, experiment_id: int) -> scheduler_pb2.GetExperimentResponse:
        trial = scheduler_pb2.Trial(id=7, experiment_id=experiment_id, state=self.trial_state)
        return scheduler_pb2.GetExperimentResponse(
            experiment=scheduler_pb2.Experiment(id=experiment_id, state=self.state), trials=[trial]
        )

    def get_trial(self, trial_id: int) -> scheduler_pb2.GetTrialResponse:
        self.trial_fetches += 1
        return scheduler_pb2.GetTrialResponse(trial=scheduler_pb2.Trial(id=trial_id), steps=self.steps)


def losses(logdir) -> list[tuple[int, float]]:
    accumulator = EventAccumulator(str(run_dir(logdir, 3, 7, "training")))
    accumulator.Reload()
    return [(e.step, e.value) for e in accumulator.Scalars("loss")]


def test_a_live_experiment_grows_its_event_files_until_it_ends(tmp_path) -> None:
    scheduler = FakeScheduler()
    sync = MetricsSync(scheduler, tmp_path, [3])
    scheduler.add_step(10, 1.0)
    assert sync.refresh() is False
    assert losses(tmp_path) == [(10, 1.0)]

    scheduler.add_step(20, 0.5)
    assert sync.refresh() is False
    assert losses(tmp_path) == [(10, 1.0), (20, 0.5)]  # appended, not rewritten

    scheduler.state, scheduler.trial_state = (
        common_pb2.EXPERIMENT_STATE_COMPLETED,
        common_pb2.TRIAL_STATE_COMPLETED,
    )
    assert sync.refresh() is True
    fetches = scheduler.trial_fetches
    assert sync.refresh() is True
    assert scheduler.trial_fetches == fetches  # an ended trial is not fetched again
    sync.close()
    assert losses(tmp_path) == [(10, 1.0), (20, 0.5)]
    (event_file,) = run_dir(tmp_path, 3, 7, "training").iterdir()
    assert event_file.name.endswith(".pedl")


def test_trials_named_alone_are_the_only_ones_written_and_end_the_watch_when_they_end(tmp_path) -> None:
    """`pedl tensorboard -t TRIAL_ID`: the experiment's other trials are left out, and the watch
    is over once the named trials ended, though the experiment goes on."""
    scheduler = FakeScheduler()
    scheduler.add_step(10, 1.0)
    other = MetricsSync(scheduler, tmp_path / "other", [3], only_trials={3: {8}})
    other.refresh()
    other.close()
    assert not (tmp_path / "other" / "exp-3" / "trial-7").exists()
    live = MetricsSync(scheduler, tmp_path / "live", [3], only_trials={3: {7}})
    assert live.refresh() is False
    live.close()
    scheduler.trial_state = common_pb2.TRIAL_STATE_COMPLETED
    sync = MetricsSync(scheduler, tmp_path, [3], only_trials={3: {7}})
    assert sync.refresh() is True
    sync.close()
    assert losses(tmp_path) == [(10, 1.0)]
