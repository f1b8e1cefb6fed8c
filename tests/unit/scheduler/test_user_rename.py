"""Renaming a user (`det user rename`, Determined's PatchUser username): the user keeps their id,
experiments, sessions and agent link; a taken or invalid name changes nothing."""

from __future__ import annotations

import functools

import pytest

from pedl_scheduler.storage import Storage, open_storage
from pedl_scheduler.storage.ops import experiments as experiment_ops
from pedl_scheduler.users import (
    AccountError,
    AgentUserLink,
    Session,
    UserExists,
    UserNotFound,
    Users,
    hash_password,
)


@functools.cache
def _hash() -> str:
    """One slow hash for every user here (the cost is what test_users.py checks)."""
    return hash_password("longenough")


def _experiment(db: Storage, owner: str) -> int:
    return experiment_ops.create_experiment(
        db,
        config_yaml="",
        config_json="{}",
        model_definition=b"",
        model_definition_name="m.tar.gz",
        seed=1,
        created_at="2026-11-29T00:00:00Z",
        owner=owner,
    )


def _users(database_url: str) -> tuple[Storage, Users]:
    db = open_storage(database_url)
    users = Users(db, session_ttl_seconds=3600)
    for name in ("alice", "bob"):
        users.create(name, "longenough", password_hash=_hash())
    return db, users


def test_a_renamed_user_keeps_id_experiments_sessions_and_agent_link(database_url: str) -> None:
    db, users = _users(database_url)
    alice = users.get("alice")
    assert alice is not None
    mine, bobs = _experiment(db, "alice"), _experiment(db, "bob")
    users.link_agent_user("alice", AgentUserLink(1001, 1001, "al", "staff"))
    row = users.lookup("alice")
    assert row is not None
    token, _ = users.open_session(row)

    renamed = users.rename("alice", "alice.smith")

    assert (renamed.id, renamed.username) == (alice.id, "alice.smith")
    assert users.get("alice") is None
    assert experiment_ops.experiment_owner(db, mine) == "alice.smith"
    assert experiment_ops.experiment_owner(db, bobs) == "bob"
    session = users.session(token)  # Determined's sessions outlive a rename too
    assert isinstance(session, Session) and session.user.username == "alice.smith"
    assert users.agent_user("alice.smith") == AgentUserLink(1001, 1001, "al", "staff")
    assert users.lookup("alice") is None  # the old name logs nobody in
    db.close()


def test_a_taken_or_bad_name_is_refused_and_changes_nothing(database_url: str) -> None:
    db, users = _users(database_url)
    mine = _experiment(db, "alice")
    with pytest.raises(UserExists, match="cannot rename 'alice': user 'bob' already exists"):
        users.rename("alice", "bob")
    with pytest.raises(AccountError, match=r"invalid username 'al\\tice'.*not '\\t'"):
        users.rename("alice", "al\tice")
    with pytest.raises(UserNotFound, match="user 'carol' not found"):
        users.rename("carol", "dave")
    assert [u.username for u in users.list()] == ["alice", "bob"]
    assert experiment_ops.experiment_owner(db, mine) == "alice"
    assert users.rename("alice", "alice").username == "alice"  # to one's own name: nothing to do
    db.close()


def test_a_renamed_bootstrap_admin_is_not_created_again(tmp_path) -> None:
    db = open_storage(str(tmp_path / "pedl.db"))
    users = Users(db, session_ttl_seconds=60)
    users.create("admin", "longenough", admin=True, password_hash=_hash())
    users.rename("admin", "root")
    assert not users.ensure_admin("admin", "adminpassword")  # else the bootstrap password would work again
    assert [(u.username, u.admin) for u in users.list()] == [("root", True)]
    db.close()


def test_admin_rights_change_for_live_sessions(tmp_path) -> None:
    db = open_storage(str(tmp_path / "pedl.db"))
    users = Users(db, session_ttl_seconds=60)
    users.create("bob", "longenough", password_hash=_hash())
    row = users.lookup("bob")
    assert row is not None
    token, _ = users.open_session(row)
    assert users.set_admin("bob", True).admin
    session = users.session(token)
    assert isinstance(session, Session) and session.user.admin
    users.set_admin("bob", False)
    session = users.session(token)
    assert isinstance(session, Session) and not session.user.admin
    with pytest.raises(UserNotFound):
        users.set_admin("carol", True)
    db.close()
