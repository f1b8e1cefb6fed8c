"""Tables, values, metrics and descriptions."""

from __future__ import annotations

import re

from pedl import records
from pedl._metrics import to_struct
from pedl.cli import render
from pedl.config import carried, parse_experiment_config
from pedl.v1 import common_pb2, scheduler_pb2

from .fake_scheduler import step, trial, validation


def test_format_value() -> None:
    assert render.format_value(3.0) == "3"
    assert render.format_value(0.123456789) == "0.123457"
    assert render.format_value(float("nan")) == "nan"
    assert render.format_value(True) == "true"
    assert render.format_value([[1.0, 2.5], [3.0, 4.0]]) == "[[1, 2.5], [3, 4]]"
    assert render.format_value([float(i) for i in range(10)]) == "[0, 1, 2, 3, 4, 5, … (10 values)]"


def test_format_metrics_puts_loss_first() -> None:
    assert render.format_metrics({"accuracy": 0.5, "loss": 1.25, "a": 2.0}) == "loss=1.25 a=2 accuracy=0.5"


def test_short_time_and_states() -> None:
    assert render.short_time("2024-05-01T12:00:03.123Z") == "2024-05-01 12:00:03"
    assert render.short_time("") == ""
    assert render.short_time("yesterday") == "yesterday"
    assert render.experiment_state(common_pb2.EXPERIMENT_STATE_COMPLETED) == "COMPLETED"
    assert render.trial_state(common_pb2.TRIAL_STATE_ERROR) == "ERROR"
    assert render.trial_state(99) == "99"


def test_human_bytes() -> None:
    assert render.human_bytes(12) == "12 B"
    assert render.human_bytes(2048) == "2.0 KB"
    assert render.human_bytes(5 * 1024**3) == "5.0 GB"


def test_table_aligns_columns() -> None:
    text = render.table(["ID", "NAME"], [(1, "a"), (22, "bbb")])
    assert text.splitlines() == ["ID  NAME", "--  ----", "1   a", "22  bbb"]


def test_experiments_table() -> None:
    experiments = [
        scheduler_pb2.Experiment(
            id=2, state=common_pb2.EXPERIMENT_STATE_ACTIVE, name="mnist-asha", description="mnist",
            num_trials=4,
            created_at="2024-05-01T12:00:03Z",
        ),
        scheduler_pb2.Experiment(
            id=1, state=common_pb2.EXPERIMENT_STATE_COMPLETED, ended_at="2024-05-02T00:00:00Z"
        ),
    ]  # fmt: skip
    lines = render.experiments_table(experiments).splitlines()
    assert lines[0].split() == ["ID", "STATE", "NAME", "DESCRIPTION", "TRIALS", "CREATED", "ENDED", "OWNER"]
    assert lines[2].startswith("1   COMPLETED")
    assert lines[2].endswith("2024-05-02 00:00:00")
    assert lines[3].split()[:5] == ["2", "ACTIVE", "mnist-asha", "mnist", "4"]


def test_trials_table_shows_hparams_and_best_validation() -> None:
    rows = render.trials_table(
        [trial(3, total_batches=200, best_validation_metric=0.25), trial(4)]
    ).splitlines()
    assert "layers=2, lr=0.1" in rows[2] and rows[2].rstrip().endswith("0.25")
    assert rows[3].split()[-1] == "0"  # restarts; no best validation yet


def test_steps_table_has_a_column_per_metric() -> None:
    text = render.steps_table([step(2, 200, 0.5, acc=0.9), step(1, 100, 0.75)])
    header, _, first, second = text.splitlines()
    assert header.split() == ["STEP", "BATCHES", "STEP", "BATCHES", "loss", "acc", "ENDED"]
    assert first.split()[:4] == ["1", "100", "100", "0.75"] and "0.9" not in first
    assert second.split()[:5] == ["2", "200", "100", "0.5", "0.9"]


def test_agents_and_slots_tables() -> None:
    agent = scheduler_pb2.Agent(
        id="agent-1", hostname="box", resource_pool="default", last_heartbeat="2024-05-01T12:00:03Z",
        slots=[common_pb2.Slot(id="0", type="cpu", trial_id=5), common_pb2.Slot(id="1", type="cpu")],
        isolation="bwrap", address="198.18.0.2",
    )  # fmt: skip
    assert render.agents_table([agent]).splitlines()[2].split() == [
        "agent-1", "box", "198.18.0.2", "2", "1", "default", "-", "yes", "bwrap", "2024-05-01", "12:00:03",
    ]  # fmt: skip
    agent.isolation = "none"
    assert "none (trials unsandboxed)" in render.agents_table([agent])
    slots = render.slots_table([agent]).splitlines()
    assert slots[2].split() == ["agent-1", "0", "cpu", "yes", "5"]
    assert slots[3].split() == ["agent-1", "1", "cpu", "yes", "free"]


def test_describe_experiment_and_json() -> None:
    experiment = scheduler_pb2.Experiment(
        id=7, state=common_pb2.EXPERIMENT_STATE_ERROR, description="d", searcher_metric="val_loss",
        smaller_is_better=True, error="trial 3 failed",
        config=to_struct({"searcher": {"name": "random", "max_trials": 2}, "hyperparameters": {"lr": 0.1}}),
    )  # fmt: skip
    response = scheduler_pb2.GetExperimentResponse(experiment=experiment, trials=[trial(3)])
    detail = scheduler_pb2.GetTrialResponse(
        trial=trial(3),
        steps=[step(1, 100, 0.5)],
        validations=[validation(1, 100, val_loss=0.4)],
        checkpoints=[common_pb2.Checkpoint(uuid="abc", total_batches=100, total_size=2048)],
    )
    text = render.describe_experiment(response, [detail])
    assert "Searcher metric:" in text and "val_loss (smaller is better)" in text
    assert re.search(r"searcher: +name=random max_trials=2", text)
    assert re.search(r"hyperparameter lr: +0.1", text)
    assert "Error:" in text and "trial 3 failed" in text
    assert "Trial 3\n\nTraining steps:" in text
    assert "val_loss" in text and "abc" in text and "2.0 KB" in text
    assert records.experiment_record(response.experiment)["id"] == 7
    assert records.trial_detail_record(detail, {"lr": 0.1})["steps"][0]["metrics"] == {"loss": 0.5}


def test_describe_trial_without_results() -> None:
    text = render.describe_trial(scheduler_pb2.GetTrialResponse(trial=trial(3)))
    assert "Hyperparameters: layers=2, lr=0.1" in text
    assert "Training steps: none" in text and "Checkpoints: none" in text


def test_describe_shows_lengths_in_epochs_and_each_trials_measured_epoch() -> None:
    config_yaml = (
        "hyperparameters: {global_batch_size: 32}\n"
        "searcher: {name: single, metric: loss, max_length: {epochs: 2}}\n"
        "min_validation_period: {epochs: 1}\n"
    )
    experiment = scheduler_pb2.Experiment(
        id=7,
        searcher_metric="loss",
        config_yaml=config_yaml,
        config=to_struct({"searcher": {"name": "single"}}),
        config_document=carried.masked_json(parse_experiment_config(config_yaml)),
    )
    text = render.describe_experiment(scheduler_pb2.GetExperimentResponse(experiment=experiment), [])
    assert (
        "Lengths: max_length 2 epochs; min_validation_period 1 epoch; an epoch is each trial's training "
        "data loader's length, measured when it starts"
    ) in text
    summary = render.trial_summary(trial(3, epoch_batches=45))
    assert re.search(r"Epoch: +45 batches", summary)
    assert "Epoch:" not in render.trial_summary(trial(4))


def test_describe_says_why_a_trial_ended_itself_early() -> None:
    reasons = common_pb2.EarlyExitReason
    stopped = render.trial_summary(trial(5, early_exit=reasons.EARLY_EXIT_REASON_USER_REQUESTED_STOP))
    assert re.search(r"Exited early: +USER_REQUESTED_STOP: its code asked to stop", stopped)
    invalid = render.trial_summary(trial(6, early_exit=reasons.EARLY_EXIT_REASON_INVALID_HP))
    assert "INVALID_HP: its code reported invalid hyperparameters" in invalid
    assert "Exited early" not in render.trial_summary(trial(7))


def test_agent_and_slot_listings_show_slurm_pilot_jobs_with_slurms_reason() -> None:
    assert render.pilot_jobs_text([]) == ""  # clusters without Slurm pools: no extra table
    jobs = [
        scheduler_pb2.PilotJob(
            job_id="12", resource_pool="hpc", partition="batch", state="PENDING", reason="Resources", nodes=2
        ),
        scheduler_pb2.PilotJob(
            job_id="11", resource_pool="hpc", partition="batch", state="RUNNING", reason="None", nodes=1,
            node_list="n1", time_left="4:59",
        ),
    ]  # fmt: skip
    lines = render.pilot_jobs_text(jobs).strip().splitlines()
    assert lines[0].startswith("Slurm pilot jobs")
    assert lines[3].split() == ["12", "hpc", "batch", "PENDING", "(Resources)", "2", "-", "-"]
    assert lines[4].split() == ["11", "hpc", "batch", "RUNNING", "-", "1", "n1", "4:59"]
