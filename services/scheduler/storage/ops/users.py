"""Users and their sessions (only a hash of each session token is stored)."""

from __future__ import annotations

from sqlalchemy import bindparam, delete, insert, select, update

from pedl_scheduler.storage.connection import Row, Storage
from pedl_scheduler.storage.tables import agent_user_links, experiments, sessions, users

_BY_NAME = select(users).where(users.c.username == bindparam("name"))
_ALL = select(users).order_by(users.c.username)
_CREATE = insert(users)
_DROP_EXPIRED = delete(sessions).where(sessions.c.expires_at < bindparam("now"))
_CREATE_SESSION = insert(sessions)
_SESSION = (
    select(users, sessions.c.expires_at, sessions.c.created_at.label("session_created_at"))
    .select_from(sessions.join(users, users.c.id == sessions.c.user_id))
    .where(sessions.c.token_hash == bindparam("hash"))
)
_DROP_SESSION = delete(sessions).where(sessions.c.token_hash == bindparam("hash"))
_USER_SESSIONS = select(sessions.c.token_hash).where(sessions.c.user_id == bindparam("user_id"))
_DROP_USER_SESSIONS = delete(sessions).where(sessions.c.user_id == bindparam("user_id"))
_SET_PASSWORD = (
    update(users).where(users.c.id == bindparam("user_id")).values(password_hash=bindparam("new_hash"))
)
_SET_DISPLAY_NAME = (
    update(users).where(users.c.id == bindparam("user_id")).values(display_name=bindparam("new_name"))
)
_RENAME = update(users).where(users.c.id == bindparam("user_id")).values(username=bindparam("new_name"))
# Experiments name their owner; a rename moves them with the user in the same transaction.
_MOVE_OWNED = (
    update(experiments)
    .where(experiments.c.owner == bindparam("old_name"))
    .values(owner=bindparam("new_name"))
)
_SET_ADMIN = update(users).where(users.c.id == bindparam("user_id")).values(admin=bindparam("new_admin"))
_SET_ACTIVE = update(users).where(users.c.id == bindparam("user_id")).values(active=bindparam("new_active"))


def user_by_name(s: Storage, username: str) -> Row | None:
    return s.row(_BY_NAME, {"name": username})


def all_users(s: Storage) -> list[Row]:
    return s.rows(_ALL)


def create_user(s: Storage, username: str, password_hash: str, admin: bool, created_at: str) -> None:
    s.run(
        _CREATE,
        {"username": username, "password_hash": password_hash, "admin": int(admin), "created_at": created_at},
    )


def start_session(
    s: Storage, token_hash: str, user_id: int, created_at: str, expires_at: float, now: float
) -> None:
    """Stores a new session, dropping the sessions expired by `now` (seconds since the epoch)."""
    with s.transaction():
        s.run(_DROP_EXPIRED, {"now": now})
        s.run(
            _CREATE_SESSION,
            {
                "token_hash": token_hash,
                "user_id": user_id,
                "created_at": created_at,
                "expires_at": expires_at,
            },
        )


def session_user(s: Storage, token_hash: str) -> Row | None:
    """The session's user row with the session's `expires_at` and `session_created_at`."""
    return s.row(_SESSION, {"hash": token_hash})


def end_session(s: Storage, token_hash: str) -> None:
    s.run(_DROP_SESSION, {"hash": token_hash})


def end_user_sessions(s: Storage, user_id: int) -> int:
    """Ends every session of the user; how many there were."""
    with s.transaction():
        count = len(s.rows(_USER_SESSIONS, {"user_id": user_id}))
        s.run(_DROP_USER_SESSIONS, {"user_id": user_id})
    return count


def set_password(s: Storage, user_id: int, password_hash: str) -> None:
    s.run(_SET_PASSWORD, {"user_id": user_id, "new_hash": password_hash})


def change_password(s: Storage, user_id: int, password_hash: str, keep_token_hash: str = "") -> int:
    """A new password ends every session of the user but `keep_token_hash` (the one changing it),
    in one transaction; how many ended."""
    with s.transaction():
        set_password(s, user_id, password_hash)
        ended = [
            r for r in s.rows(_USER_SESSIONS, {"user_id": user_id}) if r["token_hash"] != keep_token_hash
        ]
        for row in ended:
            end_session(s, row["token_hash"])
    return len(ended)


def set_display_name(s: Storage, user_id: int, display_name: str) -> None:
    s.run(_SET_DISPLAY_NAME, {"user_id": user_id, "new_name": display_name})


def rename_user(s: Storage, user_id: int, old_name: str, new_name: str) -> bool:
    """The user and every experiment they own take `new_name` at once; False (nothing changed)
    when another user has that name. Sessions and agent links hold the id, so they follow."""
    with s.transaction():
        taken = user_by_name(s, new_name)
        if taken is not None and taken["id"] != user_id:
            return False
        s.run(_RENAME, {"user_id": user_id, "new_name": new_name})
        s.run(_MOVE_OWNED, {"old_name": old_name, "new_name": new_name})
    return True


def set_admin(s: Storage, user_id: int, admin: bool) -> None:
    s.run(_SET_ADMIN, {"user_id": user_id, "new_admin": int(admin)})


def set_active(s: Storage, user_id: int, active: bool) -> None:
    """Deactivating also ends every session of the user."""
    with s.transaction():
        s.run(_SET_ACTIVE, {"user_id": user_id, "new_active": int(active)})
        if not active:
            s.run(_DROP_USER_SESSIONS, {"user_id": user_id})


_DROP_LINK = delete(agent_user_links).where(agent_user_links.c.user_id == bindparam("user_id"))
_LINK = insert(agent_user_links)
_LINK_BY_NAME = (
    select(agent_user_links)
    .select_from(agent_user_links.join(users, users.c.id == agent_user_links.c.user_id))
    .where(users.c.username == bindparam("name"))
)


def link_agent_user(s: Storage, user_id: int, uid: int, gid: int, agent_user: str, agent_group: str) -> None:
    """Replaces the user's link to a Unix user and group on the agents."""
    with s.transaction():
        s.run(_DROP_LINK, {"user_id": user_id})
        s.run(
            _LINK,
            {
                "user_id": user_id,
                "uid": uid,
                "gid": gid,
                "agent_user": agent_user,
                "agent_group": agent_group,
            },
        )


def agent_user_link(s: Storage, username: str) -> Row | None:
    return s.row(_LINK_BY_NAME, {"name": username})
