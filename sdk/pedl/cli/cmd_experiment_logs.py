"""`det experiment logs ID` and `det experiment create --follow-first-trial`: an experiment's log is
its first trial's, as in Determined."""

from __future__ import annotations

import argparse
import time

from pedl.cli import cmd_trial, render
from pedl.cli.arguments import positive_int
from pedl.cli.client import SchedulerClient, connect
from pedl.cli.errors import CliError

# Seconds between looks for the first trial; tests set it to 0.
POLL_SECONDS = 0.5


def register(commands: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    logs = commands.add_parser("logs", parents=[common], help="print the log of an experiment's first trial")
    logs.add_argument("experiment_id", type=positive_int, metavar="ID")
    cmd_trial.add_log_flags(logs)
    logs.set_defaults(func=experiment_logs)


def experiment_logs(args: argparse.Namespace) -> int:
    with connect(args) as client:
        trials = client.get_experiment(args.experiment_id).trials
    if not trials:
        raise CliError(f"experiment {args.experiment_id} has no trials yet: try again once one has started")
    args.trial_id = min(t.id for t in trials)
    return cmd_trial.trial_logs(args)


def first_trial(client: SchedulerClient, experiment_id: int) -> int | None:
    """The experiment's first trial once it has one; None when it ended without any."""
    while True:
        response = client.get_experiment(experiment_id)
        if response.trials:
            return min(t.id for t in response.trials)
        if response.experiment.state in render.TERMINAL_EXPERIMENT_STATES:
            return None
        time.sleep(POLL_SECONDS)


def follow_first_trial(args: argparse.Namespace, client: SchedulerClient, experiment_id: int) -> int:
    """Prints the first trial's log as it is written; 0 when that trial completes."""
    trial_id = first_trial(client, experiment_id)
    if trial_id is None:
        state = render.experiment_state(client.get_experiment(experiment_id).experiment.state)
        raise CliError(f"experiment {experiment_id} ended {state} before any trial started")
    print(f"Following the log of trial {trial_id}", flush=True)
    log_args = argparse.Namespace(**vars(args))
    log_args.__dict__.update(trial_id=trial_id, follow=True, head=None, tail=None, system=False, json=False)
    cmd_trial.trial_logs(log_args)
    trial = client.get_trial(trial_id).trial
    state = render.trial_state(trial.state)
    print(f"Trial {trial_id} ended {state}", flush=True)
    return 0 if state == "COMPLETED" else 1
