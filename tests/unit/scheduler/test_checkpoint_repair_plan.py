"""Where the scheduler's checkpoint records and the store's listing disagree, and what is repaired."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from pedl_scheduler.checkpoint_repair_plan import Plan, Stored, plan, to_check

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=timezone.utc)
OLD = NOW - timedelta(hours=2)
GRACE = timedelta(hours=1)


def stored(uuid: str, exp: int = 1, at: datetime = OLD) -> Stored:
    return Stored(uuid, exp, at)


def test_agreement_needs_nothing() -> None:
    rows = {"a": "COMPLETED", "b": "DELETED"}
    assert plan([stored("a")], rows, {1: "ACTIVE"}, NOW, GRACE).empty()


def test_interrupted_deletions_are_finished_whether_or_not_the_store_still_has_them() -> None:
    rows = {"before-store": "DELETING", "after-store": "DELETING"}
    todo = plan([stored("before-store")], rows, {1: "COMPLETED"}, NOW, GRACE)
    assert todo == Plan(finish_deleting=["after-store", "before-store"])


def test_deleted_rows_the_store_still_lists_are_deleted_again() -> None:
    assert plan([stored("a")], {"a": "DELETED"}, {1: "ACTIVE"}, NOW, GRACE) == Plan(delete_again=["a"])


def test_completed_rows_without_bytes_are_checked_and_missing_ones_that_return_are_completed() -> None:
    rows = {"lost": "COMPLETED", "back": "MISSING", "still-lost": "MISSING"}
    todo = plan([stored("back")], rows, {1: "ACTIVE"}, NOW, GRACE)
    assert todo == Plan(maybe_missing=["lost"], found_again=["back"])


def test_orphans_older_than_the_grace_go_once_their_experiment_is_gone_or_ended() -> None:
    listing = [
        stored("young", exp=9, at=NOW - timedelta(minutes=5)),  # may be recorded any moment
        stored("deleted-exp", exp=9),
        stored("ended-exp", exp=2),
        stored("running-exp", exp=3),
        stored("paused-exp", exp=4),
        stored("no-exp", exp=0),  # not a trial's: reported, never deleted
    ]
    experiments = {2: "CANCELED", 3: "ACTIVE", 4: "PAUSED"}
    todo = plan(listing, {}, experiments, NOW, GRACE)
    assert todo.orphans_to_delete == ["deleted-exp", "ended-exp"]
    assert todo.orphans_kept == ["no-exp", "paused-exp", "running-exp"]
    assert plan(listing, {}, experiments, NOW, timedelta(0)).orphans_to_delete == [
        "deleted-exp",
        "ended-exp",
        "young",
    ]


def test_the_files_of_listed_completed_rows_are_checked_a_few_at_a_time_in_turn() -> None:
    listing = [stored(u) for u in ("a", "b", "c", "d", "gone-row", "deleting")]
    rows = {"a": "COMPLETED", "b": "COMPLETED", "c": "COMPLETED", "d": "COMPLETED", "deleting": "DELETING"}
    assert to_check(listing, rows, "", 3) == ["a", "b", "c"]
    assert to_check(listing, rows, "c", 3) == ["d", "a", "b"]  # on after the last checked, then round
    assert to_check(listing, rows, "", 10) == ["a", "b", "c", "d"]  # only COMPLETED rows the store lists
    assert to_check([], rows, "b", 3) == []
