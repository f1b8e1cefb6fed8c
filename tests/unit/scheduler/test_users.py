"""Users and sessions: salted hashes, tokens stored only hashed, expiry, on SQLite and PostgreSQL."""

from __future__ import annotations

import pytest

from pedl_scheduler.storage import open_storage
from pedl_scheduler.users import (
    AccountError,
    AgentUserLink,
    Session,
    UserExists,
    Users,
    check_password,
    hash_password,
    hash_token,
)
from support import stored


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def test_passwords_are_salted_scrypt_hashes() -> None:
    a, b = hash_password("correct horse"), hash_password("correct horse")
    assert a != b and a.startswith("dscrypt$") and "correct horse" not in a
    assert check_password("correct horse", a) and not check_password("wrong horse", a)
    assert not check_password("x", "not-a-hash")


def test_determined_clients_hashed_password_logs_in_and_an_old_hash_needs_the_password_once() -> None:
    from pedl_scheduler.users import determined_hash

    stored = hash_password("correct horse")
    sent = determined_hash("correct horse")  # what Determined's `det user login` sends (isHashed)
    assert len(sent) == 128 and check_password(sent, stored, prehashed=True)
    assert not check_password(determined_hash("wrong horse"), stored, prehashed=True)
    legacy = "scrypt$" + stored.split("$", 1)[1]
    assert not check_password(sent, legacy, prehashed=True)


def test_login_session_expiry_and_logout(database_url: str) -> None:
    db = open_storage(database_url)
    clock = Clock()
    users = Users(db, session_ttl_seconds=60, clock=clock)
    users.create("alice", "alicepassword")
    assert users.login("alice", "wrong-password") is None
    assert users.login("nobody", "alicepassword") is None
    token, session = users.login("alice", "alicepassword")  # type: ignore[misc]
    assert session.user.username == "alice" and not session.user.admin
    hashes = stored.rows(db, "SELECT token_hash FROM sessions")
    assert hashes == [{"token_hash": hash_token(token)}]  # never the token itself
    assert isinstance(users.session(token), Session)
    assert users.session(token + "x") == "the token is not valid (logged out, or from another cluster)"
    clock.now += 61
    assert users.session(token) == "the session has expired"
    clock.now -= 61
    users.logout(token)
    assert not isinstance(users.session(token), Session)
    db.close()


def test_bad_users_are_refused(database_url: str) -> None:
    db = open_storage(database_url)
    users = Users(db, session_ttl_seconds=60)
    with pytest.raises(AccountError, match="invalid username"):
        users.create("b", "longenough")
    with pytest.raises(AccountError, match="at least 8"):
        users.create("bob", "short")
    assert users.ensure_admin("admin", "adminpassword")
    assert not users.ensure_admin("admin", "another-password")  # never silently reset
    with pytest.raises(UserExists):
        users.create("admin", "adminpassword", admin=True)
    assert [(u.username, u.admin) for u in users.list()] == [("admin", True)]
    db.close()


def test_the_scheduler_will_not_start_without_a_cluster_secret(monkeypatch, tmp_path) -> None:
    from pedl.auth import AuthConfigError
    from pedl_scheduler import security
    from pedl_scheduler.main import parse_args

    monkeypatch.delenv("PEDL_CLUSTER_SECRET", raising=False)
    db = open_storage(str(tmp_path / "pedl.db"))
    with pytest.raises(AuthConfigError, match="no cluster secret is configured"):
        security.setup(parse_args(["--db", str(tmp_path / "pedl.db")]), db)
    with pytest.raises(AuthConfigError, match="--tls-cert and --tls-key go together"):
        security.server_tls("cert.pem", "")
    db.close()


def test_password_change_and_deactivation(database_url: str) -> None:
    from pedl_scheduler.users import UserNotFound

    db = open_storage(database_url)
    users = Users(db, session_ttl_seconds=60, clock=Clock())
    users.create("carol", "carolpassword")
    token, _ = users.login("carol", "carolpassword")  # type: ignore[misc]
    with pytest.raises(AccountError, match="at least"):
        users.change_password("carol", "short")
    users.change_password("carol", "a-new-password")
    assert users.login("carol", "carolpassword") is None and users.login("carol", "a-new-password")
    assert not users.set_active("carol", False).active
    assert users.session(token) == "the token is not valid (logged out, or from another cluster)"
    assert users.login("carol", "a-new-password") is None
    assert users.set_active("carol", True).active and users.login("carol", "a-new-password")
    with pytest.raises(UserNotFound, match="user 'nobody' not found"):
        users.set_active("nobody", True)
    db.close()


def test_hashes_are_at_owasp_cost_and_old_ones_upgrade_at_the_next_good_login(database_url: str) -> None:
    import base64
    import hashlib

    from pedl_scheduler.storage.ops import users as user_ops
    from pedl_scheduler.users import needs_rehash

    assert hash_password("correct horse").split("$")[1:4] == [str(2**17), "8", "1"]
    db = open_storage(database_url)
    users = Users(db, session_ttl_seconds=60)
    users.create("olduser", "old-password")
    salt = b"0123456789abcdef"
    digest = hashlib.scrypt(b"old-password", salt=salt, n=2**14, r=8, p=1, dklen=32)
    weak = f"scrypt${2**14}$8$1${base64.b64encode(salt).decode()}${base64.b64encode(digest).decode()}"
    user_ops.set_password(db, users._existing("olduser").id, weak)
    assert users.login("olduser", "wrong-password") is None
    assert users.lookup("olduser")["password_hash"] == weak  # a failed login changes nothing
    assert users.login("olduser", "old-password") is not None
    upgraded = users.lookup("olduser")["password_hash"]
    assert upgraded != weak and not needs_rehash(upgraded) and check_password("old-password", upgraded)
    assert upgraded.startswith("dscrypt$")
    db.close()


def test_logout_all_ends_every_session_of_that_user_only(database_url: str) -> None:
    db = open_storage(database_url)
    users = Users(db, session_ttl_seconds=60)
    users.create("dave", "davepassword")
    users.create("erin", "erinpassword")
    daves = [users.login("dave", "davepassword")[0] for _ in range(3)]  # type: ignore[index]
    erins, _ = users.login("erin", "erinpassword")  # type: ignore[misc]
    assert users.logout_all("dave") == 3
    assert not any(isinstance(users.session(t), Session) for t in daves)
    assert isinstance(users.session(erins), Session)
    db.close()


def test_an_admin_links_a_user_to_an_agent_user_never_root(database_url: str) -> None:
    """`pedl user link-with-agent-user`: stored, replaced by a new link, refused for uid or gid 0."""
    db = open_storage(database_url)
    users = Users(db, session_ttl_seconds=60)
    users.create("alice", "alicepassword")
    assert users.agent_user("alice") is None and users.agent_user("") is None
    users.link_agent_user("alice", AgentUserLink(1001, 1002, "alice", "lab"))
    assert users.agent_user("alice") == AgentUserLink(1001, 1002, "alice", "lab")
    users.link_agent_user("alice", AgentUserLink(2001, 2002))
    assert users.agent_user("alice") == AgentUserLink(2001, 2002, "", "")
    with pytest.raises(AccountError, match="never run as root"):
        users.link_agent_user("alice", AgentUserLink(0, 2002))
    with pytest.raises(AccountError, match="not found"):
        users.link_agent_user("bob", AgentUserLink(3001, 3002))
    db.close()


def test_display_names_are_set_cleared_and_never_another_users_username(database_url: str) -> None:
    db = open_storage(database_url)
    users = Users(db, session_ttl_seconds=60, clock=Clock())
    users.create("admin", "adminpassword", admin=True)
    users.create("erin", "erinpassword")
    assert users.set_display_name("erin", "  Erin E.  ").display_name == "Erin E."
    assert users.get("erin").display_name == "Erin E."  # type: ignore[union-attr]
    for taken in ("Admin", "ADMIN"):
        with pytest.raises(AccountError, match="another user's username"):
            users.set_display_name("erin", taken)
    assert users.set_display_name("erin", "erin").display_name == "erin"  # one's own name is fine
    with pytest.raises(AccountError, match="at most 80 printable"):
        users.set_display_name("erin", "x" * 81)
    assert users.set_display_name("erin", "").display_name == ""
    db.close()


def test_a_session_knows_how_recent_its_login_was(database_url: str) -> None:
    """What stands in for the current password in Determined's own password change (REST PatchUser)."""
    from datetime import datetime, timedelta

    db = open_storage(database_url)
    users = Users(db, session_ttl_seconds=3600)
    users.create("alice", "alicepassword")
    token, opened = users.login("alice", "alicepassword")  # type: ignore[misc]
    session = users.session(token)
    assert isinstance(session, Session) and session.started_at == opened.started_at
    started = datetime.fromisoformat(session.started_at)
    assert session.logged_in_within(600, now=started + timedelta(seconds=599))
    assert not session.logged_in_within(600, now=started + timedelta(seconds=601))
    assert not Session(session.user, session.expires_at).logged_in_within(600)  # no login time known
    db.close()
