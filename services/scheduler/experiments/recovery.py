"""A restarted scheduler rebuilds its active experiments from the database: searchers from their
snapshot plus the journal's later events, live trials queued again (their runs may be adopted).
Functions of the shared state, used at start-up and by `revival` (the dispatcher then lets the
children waiting on a parent's checkpoint look again: `effects.ResumeWaits`)."""

from __future__ import annotations

import json

import structlog

from pedl.config import ExperimentConfig, image_environments
from pedl.config.stored import parse_stored_config
from pedl.searcher import is_better, restore_search_method
from pedl_scheduler.experiments.state import SchedulerState
from pedl_scheduler.experiments.trial_rows import trial_from_row
from pedl_scheduler.runtime import ExperimentRuntime
from pedl_scheduler.searcher_journal import SearcherJournal
from pedl_scheduler.storage import Row, Storage
from pedl_scheduler.storage.ops import experiments as experiment_ops
from pedl_scheduler.storage.ops import searcher as searcher_ops
from pedl_scheduler.storage.ops import trials as trial_ops

log = structlog.get_logger(component="experiments")


def live_experiments(db: Storage) -> list[Row]:
    """The rows of the experiments a restarted scheduler takes up again."""
    return list(experiment_ops.live_experiments(db))


def restore_searcher(db: Storage, row: Row) -> tuple[ExperimentConfig, SearcherJournal]:
    """The experiment's config and its searcher as it last was (snapshot, then later events)."""
    config = parse_stored_config(json.loads(row["config_json"]))
    searcher = restore_search_method(config, row["seed"], json.loads(row["searcher_snapshot"]))
    journal = SearcherJournal(searcher, row["searcher_seq"], len(row["searcher_snapshot"]))
    journal.replay(searcher_ops.events_after(db, row["id"], row["searcher_seq"]))
    return config, journal


def load(state: SchedulerState, row: Row) -> ExperimentRuntime:
    """Takes up one live experiment from its row: its searcher, its live trials queued again
    (its children waiting on a parent's checkpoint look again when the caller emits `ResumeWaits`)."""
    config, journal = restore_searcher(state.db, row)
    config = image_environments.resolve(config, state.image_rules)
    exp = ExperimentRuntime(
        row["id"],
        config,
        journal.searcher,
        journal,
        state=row["state"],
        warm_start_uuid=row["warm_start_checkpoint_uuid"],
    )
    state.experiments[exp.id] = exp
    for t in trial_ops.trials_of(state.db, exp.id):
        exp.trial_ids.append(t["id"])
        if t["best_validation"] is not None and is_better(
            t["best_validation"], exp.best_validation, config.smaller_is_better
        ):
            exp.best_validation = t["best_validation"]
        if t["state"] not in ("ACTIVE", "PAUSED"):
            continue
        trial = trial_from_row(t)
        state.trials[trial.id] = trial
        exp.live[trial.request_id] = trial
        state.wait_for(trial, t["waiting_on_trial_id"])
        state.holds_checkpoint(trial)
    log.info("experiment recovered", experiment_id=exp.id, trials=len(exp.trial_ids))
    return exp
