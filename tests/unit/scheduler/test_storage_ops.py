"""The named storage operations the scheduler's rooms call, each doing what its name says (SQLite)."""

from __future__ import annotations

from sqlalchemy import insert

from pedl_scheduler.storage import Storage, open_storage
from pedl_scheduler.storage.connection import Positional
from pedl_scheduler.storage.ops import experiments as experiment_ops
from pedl_scheduler.storage.ops import results as result_ops
from pedl_scheduler.storage.ops import searcher as searcher_ops
from pedl_scheduler.storage.ops import trials as trial_ops
from pedl_scheduler.storage.tables import trial_logs


def storage_with_trials(*requests: str, url: str = ":memory:") -> tuple[Storage, int, list[int]]:
    s = open_storage(url)
    exp_id = experiment_ops.create_experiment(
        s,
        config_yaml="y",
        config_json="{}",
        model_definition=b"m",
        model_definition_name="model",
        seed=1,
        created_at="t0",
        owner="ann",
    )
    for request in requests:
        trial_ops.create_trial(s, exp_id, request, "{}", 1, "{}")
    ids = sorted(r["id"] for r in trial_ops.newest_trials(s, exp_id, len(requests)))
    return s, exp_id, ids


def test_experiment_lifecycle_operations() -> None:
    s, exp_id, _ = storage_with_trials("a", "b")
    assert experiment_ops.model_definition_name(s, exp_id) == "model"
    assert experiment_ops.trial_count(s, exp_id) == 2
    experiment_ops.set_experiment_state(s, exp_id, "PAUSED")
    assert [e["id"] for e in experiment_ops.live_experiments(s)] == [exp_id]
    experiment_ops.end_experiment(s, exp_id, "ERROR", "every trial failed", "t9")
    row = experiment_ops.experiment(s, exp_id)
    assert (row["state"], row["error"], row["ended_at"]) == ("ERROR", "every trial failed", "t9")  # type: ignore[index]
    assert experiment_ops.live_experiments(s) == []
    assert experiment_ops.experiment_state_counts(s) == {"ERROR": 1}
    assert experiment_ops.experiment_state(s, 999) is None and experiment_ops.experiment_owner(s, 999) is None


def test_trial_run_operations() -> None:
    s, exp_id, (a, b) = storage_with_trials("a", "b")
    assert trial_ops.trial_id_of_request(s, exp_id, "b") == b
    assert trial_ops.trial_id_of_request(s, exp_id, "zz") is None
    trial_ops.set_trial_state(s, a, "PAUSED")
    trial_ops.end_trial(s, b, "ERROR", "boom", "t5")
    trial_ops.set_parent(s, b, a)
    assert trial_ops.trial_states_of(s, exp_id) == ["PAUSED", "ERROR"]
    assert trial_ops.trial_state_counts(s) == {"PAUSED": 1, "ERROR": 1}
    row = trial_ops.trial(s, b)
    assert (row["error"], row["end_time"], row["parent_trial_id"]) == ("boom", "t5", a)  # type: ignore[index]
    assert [t["id"] for t in trial_ops.trials_of(s, exp_id)] == [a, b]
    assert trial_ops.trial_exists(s, a) and not trial_ops.trial_exists(s, 999)


def test_a_child_finds_its_parents_stored_checkpoint() -> None:
    s, exp_id, (parent, child) = storage_with_trials("p", "c")
    row = trial_ops.parent_checkpoint(s, exp_id, "p")
    assert row == {
        "id": parent,
        "latest_checkpoint_uuid": "",
        "latest_checkpoint_batches": 0,
        "latest_checkpoint_step": 0,
        "state": None,
    }
    result_ops.record_checkpoint(s, "u1", parent, 2, 200, "{}", "t2")
    trial_ops.save_trial(
        s,
        parent,
        total_batches=200,
        checkpoint_uuid="u1",
        checkpoint_batches=200,
        checkpoint_step=2,
        sequencer_json="{}",
        best_validation=0.5,
        waiting_on=None,
    )
    trial_ops.save_trial(
        s,
        child,
        total_batches=0,
        checkpoint_uuid="",
        checkpoint_batches=0,
        checkpoint_step=0,
        sequencer_json="{}",
        best_validation=None,
        waiting_on=parent,
    )
    assert trial_ops.parent_checkpoint(s, exp_id, "p")["state"] == "COMPLETED"  # type: ignore[index]
    assert trial_ops.latest_checkpoint(s, parent) == {
        "latest_checkpoint_uuid": "u1",
        "latest_checkpoint_batches": 200,
        "latest_checkpoint_step": 2,
        "state": "COMPLETED",
    }
    assert trial_ops.trial(s, child)["waiting_on_trial_id"] == parent  # type: ignore[index]


def test_the_checkpoint_ledger_reads_and_deletions() -> None:
    s, exp_id, (a, b) = storage_with_trials("a", "b")
    result_ops.record_validation(s, a, 1, 100, '{"error": 0.2}', "t1")
    result_ops.record_checkpoint(s, "ua", a, 1, 100, "{}", "t1")
    result_ops.record_checkpoint(s, "ub", b, 1, 100, "{}", "t1")
    result_ops.mark_checkpoint_deleted(s, "ub")
    assert result_ops.experiment_validations(s, exp_id) == [
        {"trial_id": a, "total_batches": 100, "metrics_json": '{"error": 0.2}'}
    ]
    assert result_ops.experiment_checkpoints(s, exp_id) == [
        {"uuid": "ua", "trial_id": a, "total_batches": 100}
    ]
    # Listings hold COMPLETED checkpoints only; the reconciler's view holds every state.
    assert result_ops.checkpoints_of(s, b) == []
    assert result_ops.checkpoints_of_trials(s, [a, b]) == result_ops.checkpoints_of(s, a)
    assert {r["uuid"]: r["state"] for r in result_ops.checkpoint_states(s)} == {
        "ua": "COMPLETED",
        "ub": "DELETED",
    }


def test_checkpoint_states_move_through_deleting_and_missing() -> None:
    s, exp_id, (a,) = storage_with_trials("a")
    for uuid in ("u1", "u2", "u3"):
        result_ops.record_checkpoint(s, uuid, a, 1, 100, "{}", "t1")
    result_ops.set_checkpoint_state(s, ["u1", "u2"], "DELETING")
    result_ops.set_checkpoint_state(s, ["u3"], "MISSING")
    s.flush()
    assert result_ops.checkpoints_in_state(s, "DELETING") == ["u1", "u2"]
    assert result_ops.checkpoints_of(s, a) == [] and result_ops.experiment_checkpoints(s, exp_id) == []
    every = result_ops.checkpoints_of(s, a, with_deleted=True)  # Determined's workload listings
    assert [(r["uuid"], r["state"]) for r in every] == [
        ("u1", "DELETING"),
        ("u2", "DELETING"),
        ("u3", "MISSING"),
    ]
    source = result_ops.checkpoint_source(s, "u1")
    assert source is not None and (source["state"], source["trial_id"]) == ("DELETING", a)
    assert experiment_ops.experiment_states(s) == {exp_id: "ACTIVE"}


def test_logs_are_read_after_an_id_in_pages() -> None:
    s, _, (a, _b) = storage_with_trials("a", "b")
    with s.transaction():
        for n in range(5):
            result_ops.record_log(s, a, 1, f"t{n}", "trial", f"line {n}")
    first = result_ops.logs_after(s, a, 0, limit=3)
    assert [r["message"] for r in first] == ["line 0", "line 1", "line 2"]
    assert [r["message"] for r in result_ops.logs_after(s, a, first[-1]["id"])] == ["line 3", "line 4"]


def test_the_searcher_journal_keeps_events_after_its_snapshot() -> None:
    s, exp_id, _ = storage_with_trials()
    with s.transaction():
        for seq in (1, 2, 3):
            searcher_ops.journal_event(s, exp_id, seq, f'["e{seq}"]')
    experiment_ops.save_searcher_snapshot(s, exp_id, '{"snap": 2}', 2)
    searcher_ops.drop_events_through(s, exp_id, 2)
    row = experiment_ops.experiment(s, exp_id)
    assert (row["searcher_snapshot"], row["searcher_seq"]) == ('{"snap": 2}', 2)  # type: ignore[index]
    assert searcher_ops.events_after(s, exp_id, 0) == [(3, '["e3"]')]
    assert searcher_ops.events_after(s, exp_id, 3) == []


def test_an_experiments_trials_and_their_results_are_read_a_page_at_a_time() -> None:
    s, exp_id, (a, b, c) = storage_with_trials("a", "b", "c")
    with s.transaction():
        result_ops.record_step(s, a, 1, 10, 10, "{}", "t1")
        result_ops.record_step(s, c, 1, 10, 10, "{}", "t1")
        result_ops.record_step(s, c, 2, 20, 10, "{}", "t2")
        result_ops.record_validation(s, c, 2, 20, '{"error": 0.1}', "t2")
        result_ops.record_checkpoint(s, "uc", c, 2, 20, "{}", "t2")
    first = trial_ops.trials_page(s, exp_id, 0, 2)
    assert [(r["id"], r["num_steps"]) for r in first] == [(a, 1), (b, 0)]
    assert [(r["id"], r["num_steps"]) for r in trial_ops.trials_page(s, exp_id, b, 2)] == [(c, 2)]
    assert trial_ops.trials_page(s, exp_id, c, 2) == []
    assert [(r["trial_id"], r["total_batches"]) for r in result_ops.steps_of_trials(s, [b, c])] == [
        (c, 10),
        (c, 20),
    ]
    assert [r["trial_id"] for r in result_ops.validations_of_trials(s, [a, c])] == [c]
    assert [r["uuid"] for r in result_ops.checkpoints_of_trials(s, [c])] == ["uc"]
    assert result_ops.steps_of_trials(s, []) == []


def test_patching_an_experiment_changes_only_the_fields_given() -> None:
    s, exp_id, _ = storage_with_trials("a")
    experiment_ops.patch_experiment(s, exp_id, labels_json='["x"]')
    experiment_ops.patch_experiment(s, exp_id, archived=True)
    experiment_ops.patch_experiment(s, exp_id, description="mine")
    row = experiment_ops.experiment(s, exp_id)
    assert (row["labels_json"], row["archived"], row["description"]) == ('["x"]', 1, "mine")  # type: ignore[index]


def test_deleting_an_experiment_removes_its_trials_results_and_logs_only() -> None:
    s, exp_id, (a,) = storage_with_trials("a")
    other = experiment_ops.create_experiment(
        s, config_yaml="y", config_json="{}", model_definition=b"m", model_definition_name="m",
        seed=1, created_at="t0", owner="",
    )  # fmt: skip
    trial_ops.create_trial(s, other, "o", "{}", 1, "{}")
    with s.transaction():
        result_ops.record_step(s, a, 1, 10, 10, "{}", "t1")
        result_ops.record_validation(s, a, 1, 10, "{}", "t1")
        result_ops.record_checkpoint(s, "ua", a, 1, 10, "{}", "t1")
        result_ops.record_checkpoint(s, "gone", a, 1, 10, "{}", "t1")
        result_ops.record_log(s, a, 1, "t1", "stdout", "hello")
    result_ops.mark_checkpoint_deleted(s, "gone")
    assert experiment_ops.undeleted_checkpoints(s, exp_id) == ["ua"]
    experiment_ops.delete_experiment(s, exp_id)
    assert experiment_ops.experiment(s, exp_id) is None and trial_ops.trial(s, a) is None
    assert result_ops.steps_of(s, a) == [] and result_ops.logs_after(s, a, 0) == []
    assert experiment_ops.experiment(s, other) is not None and len(trial_ops.trials_of(s, other)) == 1


def test_rows_given_as_tuples_land_in_their_columns_whatever_the_statements_order() -> None:
    """Hot writes defer tuples (`Positional`): in the SQL's order, reordered, or with a constant."""
    s, exp_id, (a,) = storage_with_trials("a")
    reordered = Positional(insert(trial_logs), ("message", "source", "timestamp", "run_id", "trial_id"))
    with_constant = Positional(
        insert(trial_logs).values(source="agent"), ("trial_id", "run_id", "timestamp", "message")
    )
    with s.transaction():
        for n in range(3):  # several rows of one statement: one executemany
            s.defer(reordered, (f"r{n}", "trial", f"t{n}", 1, a))
        s.defer(with_constant, (a, 2, "t9", "c0"))  # one row alone
        trial_ops.save_trial(
            s,
            a,
            total_batches=4,
            checkpoint_uuid="",
            checkpoint_batches=0,
            checkpoint_step=0,
            sequencer_json="{}",
            best_validation=1,  # an int: stored as the float column's value
            waiting_on=None,
        )
    logs = result_ops.logs_after(s, a, 0)
    assert [(r["message"], r["source"], r["timestamp"], r["run_id"]) for r in logs] == [
        ("r0", "trial", "t0", 1),
        ("r1", "trial", "t1", 1),
        ("r2", "trial", "t2", 1),
        ("c0", "agent", "t9", 2),
    ]
    row = trial_ops.trial(s, a)
    assert (row["total_batches"], row["best_validation"]) == (4, 1.0)  # type: ignore[index]
    assert isinstance(row["best_validation"], float)  # type: ignore[index]


def test_experiments_are_listed_a_page_at_a_time_without_their_model_definitions() -> None:
    s, first, _ = storage_with_trials("a", "b")
    more = [
        experiment_ops.create_experiment(
            s, config_yaml="y", config_json="{}", model_definition=b"m" * 1000, model_definition_name="m",
            seed=1, created_at="t1", owner="bob",
        )
        for _ in range(3)
    ]  # fmt: skip
    page = experiment_ops.experiments_page(s, 0, 2)
    assert [(r["id"], r["num_trials"]) for r in page] == [(first, 2), (more[0], 0)]
    assert "model_definition" not in page[0] and "searcher_snapshot" not in page[0]
    assert [r["id"] for r in experiment_ops.experiments_page(s, more[0], 2)] == more[1:]
    assert experiment_ops.experiments_page(s, more[-1], 2) == []
    assert [r["id"] for r in experiment_ops.experiments_with_trial_counts(s)] == [first, *more]


def test_a_trials_steps_are_read_a_page_at_a_time_with_the_results_in_their_range() -> None:
    s, _, (a,) = storage_with_trials("a")
    with s.transaction():
        for step in range(1, 6):
            result_ops.record_step(s, a, step, step * 10, 10, "{}", "t")
        result_ops.record_validation(s, a, 2, 20, "{}", "t")
        result_ops.record_validation(s, a, 5, 50, "{}", "t")
        result_ops.record_checkpoint(s, "u3", a, 3, 30, "{}", "t")
    assert [r["total_batches"] for r in result_ops.steps_page(s, a, 0, 2)] == [10, 20]
    assert [r["total_batches"] for r in result_ops.steps_page(s, a, 20, 2)] == [30, 40]
    assert [r["total_batches"] for r in result_ops.validations_between(s, a, 0, 20)] == [20]
    assert [r["uuid"] for r in result_ops.checkpoints_between(s, a, 20, 40)] == ["u3"]
    assert [r["total_batches"] for r in result_ops.validations_between(s, a, 40, None)] == [50]
    assert result_ops.step_count_of(s, a) == 5
    with s.transaction():  # a page, as every listing, shows stored checkpoints only
        result_ops.set_checkpoint_state(s, ["u3"], "DELETED")
    assert result_ops.checkpoints_between(s, a, 20, 40) == []
    gone = result_ops.checkpoints_between(s, a, 20, 40, with_deleted=True)
    assert [(r["uuid"], r["state"]) for r in gone] == [("u3", "DELETED")]


def test_the_first_failing_trial_is_the_one_that_ended_first_with_an_error() -> None:
    s, exp_id, (a, b, c) = storage_with_trials("a", "b", "c")
    assert trial_ops.first_trial_error(s, exp_id) is None
    trial_ops.end_trial(s, c, "ERROR", "ValueError: bad batch\nTraceback...", "t2")
    trial_ops.end_trial(s, a, "ERROR", "", "t1")  # an error without a cause says nothing
    trial_ops.end_trial(s, b, "ERROR", "searcher.metric 'x' is not among ...", "t3")
    assert trial_ops.first_trial_error(s, exp_id) == (c, "ValueError: bad batch\nTraceback...")


def test_each_step_and_validation_keeps_the_run_that_reported_it() -> None:
    s, exp_id, (a,) = storage_with_trials("a")
    with s.transaction():
        result_ops.record_step(s, a, 1, 10, 10, '{"loss": 1}', "t1", run_id=1)
        result_ops.record_validation(s, a, 1, 10, '{"error": 0.5}', "t1", run_id=1)
        result_ops.record_step(s, a, 2, 20, 10, '{"loss": 0.5}', "t2", run_id=2)  # after a restart
        result_ops.record_validation(s, a, 2, 20, '{"error": 0.25}', "t2", run_id=2)
        result_ops.record_step(s, a, 2, 20, 10, '{"loss": 9}', "t3", run_id=3)  # a resend keeps run 2
    assert result_ops.metric_rows(s, "training", [a], 0, (0, -1), 100) == [
        (a, 10, '{"loss": 1}', "t1", 1),
        (a, 20, '{"loss": 0.5}', "t2", 2),
    ]
    assert [r[4] for r in result_ops.experiment_metric_rows(s, "validation", exp_id, 0, (0, -1), 100)] == [
        1,
        2,
    ]
    assert [r["run_id"] for r in result_ops.steps_of(s, a)] == [1, 2]
