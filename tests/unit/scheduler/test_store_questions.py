"""The scheduler's answers to the checkpoint store: a user's rights by the one rule, and a trial
token honoured only while its run is the trial's live run."""

from __future__ import annotations

from pathlib import Path

from pedl.v1 import auth_pb2
from pedl_scheduler.cluster import Cluster
from pedl_scheduler.experiments import ExperimentManager
from pedl_scheduler.storage import open_storage
from pedl_scheduler.storage.ops import trials as trial_ops
from pedl_scheduler.store_questions import StoreQuestions
from pedl_scheduler.users import Users
from pedl_server_auth import trial_token

SECRET = "s" * 32
CONFIG = """
hyperparameters: {}
searcher: {name: single, metric: error, max_length: {batches: 100}}
"""


def ask(q: StoreQuestions, token: str, action: str = "read", exp_id: int = 0) -> auth_pb2.AuthorizeResponse:
    return q.answer(auth_pb2.AuthorizeRequest(token=token, action=action, experiment_id=exp_id))


def test_a_trial_token_lives_as_long_as_its_run(tmp_path: Path) -> None:
    manager = ExperimentManager(open_storage(str(tmp_path / "pedl.db")), Cluster(), "127.0.0.1:1")
    db = manager.db
    q = StoreQuestions(db, Users(db, 60), SECRET, private=False)
    exp_id = manager.create_experiment(CONFIG, b"model", "model", owner="alice")
    trial = trial_ops.trials_of(db, exp_id)[0]
    token = trial_token.mint(SECRET, exp_id, trial["id"], trial["run_id"])
    assert ask(q, token, "run").allowed
    assert not ask(q, trial_token.mint("t" * 32, exp_id, trial["id"], trial["run_id"]), "run").allowed
    # A new run: the old token ends.
    trial_ops.start_run(db, trial["id"], trial["run_id"] + 1, "{}", "t", ("a",))
    answer = ask(q, token, "run")
    assert not answer.allowed and "has ended: its token is revoked" in answer.reason
    newer = trial_token.mint(SECRET, exp_id, trial["id"], trial["run_id"] + 1)
    assert ask(q, newer, "run").allowed
    trial_ops.end_trial(db, trial["id"], "CANCELED", "", "t")  # the trial ends: so does every token of it
    assert not ask(q, newer, "run").allowed
    db.close()


def test_users_are_answered_by_the_rule_and_never_cached(tmp_path: Path) -> None:
    manager = ExperimentManager(open_storage(str(tmp_path / "pedl.db")), Cluster(), "127.0.0.1:1")
    db = manager.db
    users = Users(db, 600)
    for name in ("alice", "bob"):
        users.create(name, name * 4)
    alice, _ = users.login("alice", "alice" * 4)  # type: ignore[misc]
    bob, _ = users.login("bob", "bob" * 4)  # type: ignore[misc]
    exp_id = manager.create_experiment(CONFIG, b"model", "model", owner="alice")
    for private in (False, True):
        q = StoreQuestions(db, users, SECRET, private)
        assert ask(q, alice, "delete", exp_id).allowed
        refused = ask(q, bob, "delete", exp_id)
        assert not refused.allowed and "only its owner or an admin" in refused.reason
        assert refused.cache_seconds == 0
        assert ask(q, bob, "read", exp_id).allowed is (not private)
        assert ask(q, bob, "read", 0).allowed is (not private)  # "every experiment?"
    q = StoreQuestions(db, users, SECRET, False)
    assert "unknown action" in ask(q, alice, "frobnicate", exp_id).reason
    users.logout(alice)
    assert "log in again" in ask(q, alice, "read", exp_id).reason
    db.close()
