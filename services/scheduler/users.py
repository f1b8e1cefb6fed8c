"""Users and their sessions in the scheduler's database.

Passwords are kept as salted scrypt hashes at OWASP's cost (N = 2^17, r = 8, p = 1: 128 MiB and
a few hundred milliseconds per hash), and a hash made at a lower cost is replaced at the user's
next good login. Session tokens are random and only their SHA-256 is stored, so a copy of the
database lets nobody log in. Hashing is slow on purpose: the AuthService runs it in a small worker
pool off the event loop (`login_guard.py`); the `*_password` functions are safe in any thread.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone

from pedl._timeutil import utc_now
from pedl_scheduler.storage import Storage
from pedl_scheduler.storage.ops import users as user_ops
from pedl_scheduler.usernames import InvalidUsername, clean_username

MIN_PASSWORD_CHARS = 8
MAX_DISPLAY_NAME_CHARS = 80
# How recent a login stands in for the current password in Determined's own password change.
RECENT_LOGIN_SECONDS = 600.0
TOKEN_PREFIX = "pedl_"
_SCRYPT = {"n": 2**17, "r": 8, "p": 1}
# OpenSSL refuses scrypt past `maxmem` (default 32 MiB); N = 2^17, r = 8 needs 128 MiB.
_MAXMEM = 2**28


class AccountError(ValueError):
    """Bad input for a user operation (invalid name, short password)."""


class UserExists(AccountError):
    pass


class UserNotFound(AccountError):
    pass


@dataclass(frozen=True)
class User:
    id: int
    username: str
    admin: bool
    created_at: str
    active: bool = True
    display_name: str = ""


@dataclass(frozen=True)
class AgentUserLink:
    """The Unix user and group a pedl user's trials run as on agents started as root."""

    uid: int
    gid: int
    user: str = ""
    group: str = ""


@dataclass(frozen=True)
class Session:
    user: User
    expires_at: float
    started_at: str = ""  # when its login was (UTC, ISO 8601)

    def logged_in_within(self, seconds: float, now: datetime | None = None) -> bool:
        """Whether the password that opened this session was given in the last `seconds`: what
        stands in for the current password in Determined's own password change (`auth_service`)."""
        if not self.started_at:
            return False
        started = datetime.fromisoformat(self.started_at)
        return ((now or datetime.now(timezone.utc)) - started).total_seconds() <= seconds


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


# Determined's clients never send a password itself: they send SHA-512 of this public salt and
# the password, hex (`isHashed`). Hashes stored since pedl served Determined's REST API are scrypt
# over that form ("dscrypt"), so pedl's clients (the password) and Determined's (its hash) both log
# in; the older "scrypt" hashes (over the password) are upgraded at the user's next pedl login.
DETERMINED_SALT = "GubPEmmotfiK9TMD6Zdw"
_SCHEME, _LEGACY_SCHEME = "dscrypt", "scrypt"


def determined_hash(password: str) -> str:
    """The form Determined's clients send for `password` (an empty password stays empty)."""
    return hashlib.sha512((DETERMINED_SALT + password).encode()).hexdigest() if password else ""


def hash_password(password: str, prehashed: bool = False) -> str:
    """The stored hash of `password` (or of Determined's hashed form of it, when `prehashed`)."""
    secret = password if prehashed else determined_hash(password)
    salt = secrets.token_bytes(16)
    digest = hashlib.scrypt(secret.encode(), salt=salt, dklen=32, maxmem=_MAXMEM, **_SCRYPT)
    return f"{_SCHEME}${_SCRYPT['n']}${_SCRYPT['r']}${_SCRYPT['p']}${_b64(salt)}${_b64(digest)}"


def check_password(password: str, stored: str, prehashed: bool = False) -> bool:
    """Whether `password` (Determined's hashed form of it, when `prehashed`) matches `stored`."""
    try:
        scheme, n, r, p, salt, digest = stored.split("$")
        if scheme == _LEGACY_SCHEME and prehashed:
            return False  # the password itself is needed once, to upgrade the hash
        secret = password if prehashed or scheme == _LEGACY_SCHEME else determined_hash(password)
        expected = base64.b64decode(digest)
        actual = hashlib.scrypt(
            secret.encode(),
            salt=base64.b64decode(salt),
            n=int(n),
            r=int(r),
            p=int(p),
            dklen=len(expected),
            maxmem=_MAXMEM,
        )
    except ValueError:
        return False
    return scheme in (_SCHEME, _LEGACY_SCHEME) and hmac.compare_digest(actual, expected)


def needs_rehash(stored: str) -> bool:
    """True for a hash made at a lower cost than today's (upgraded at the next good login)."""
    parts = stored.split("$")
    if len(parts) != 6 or parts[0] != _SCHEME:
        return True
    try:
        return (int(parts[1]), int(parts[2]), int(parts[3])) < (_SCRYPT["n"], _SCRYPT["r"], _SCRYPT["p"])
    except ValueError:
        return True


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def rfc3339(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")


@functools.cache
def _dummy_hash() -> str:
    """Checked for unknown users too, at today's cost, so timing does not tell which usernames exist."""
    return hash_password(secrets.token_hex(8))


def is_active(row: dict) -> bool:
    return bool(row.get("active", 1))


def verify(password: str, row: dict | None, prehashed: bool = False) -> tuple[bool, str]:
    """(password right, a new hash when the stored one is weaker than today's); whether the user
    is active is the caller's to check (`is_active`), so a deactivated user with the right
    password hears so, as Determined answers. The slow part of a login, free of the database:
    AuthService runs it in its worker pool."""
    if row is None:
        check_password(password, _dummy_hash(), prehashed)
        return False, ""
    good = check_password(password, row["password_hash"], prehashed)
    rehash = good and needs_rehash(row["password_hash"])
    return good, hash_password(password, prehashed) if rehash else ""


def _clean_username(username: str, current: str, admin: bool) -> str:
    """Determined's username rules (`usernames.py`), refused as an AccountError."""
    try:
        return clean_username(username, current=current, admin=admin)
    except InvalidUsername as e:
        raise AccountError(str(e)) from None


class Users:
    def __init__(
        self, db: Storage, session_ttl_seconds: float, clock: Callable[[], float] = time.time
    ) -> None:
        self.db = db
        self.session_ttl = session_ttl_seconds
        self.clock = clock

    def _user(self, row: dict) -> User:
        return User(
            row["id"],
            row["username"],
            bool(row["admin"]),
            row["created_at"],
            bool(row.get("active", 1)),
            str(row.get("display_name") or ""),
        )

    def get(self, username: str) -> User | None:
        row = user_ops.user_by_name(self.db, username)
        return self._user(row) if row else None

    def list(self) -> list[User]:
        return [self._user(r) for r in user_ops.all_users(self.db)]

    def create(self, username: str, password: str, admin: bool = False, password_hash: str = "") -> User:
        """`password_hash`: `hash_password(password)` made elsewhere (the AuthService's worker pool)."""
        username = _clean_username(username, username, admin)
        if len(password) < MIN_PASSWORD_CHARS:
            raise AccountError(f"the password must have at least {MIN_PASSWORD_CHARS} characters")
        with self.db.transaction():
            if self.get(username) is not None:
                raise UserExists(f"user {username!r} already exists")
            user_ops.create_user(
                self.db, username, password_hash or hash_password(password), admin, utc_now()
            )
        user = self.get(username)
        assert user is not None
        return user

    def ensure_admin(self, username: str, password: str) -> bool:
        """Creates the bootstrap admin unless a user of that name exists, or any admin does (one
        renamed away must not bring back an account with the bootstrap password); True if created."""
        if self.get(username) is not None or any(u.admin for u in self.list()):
            return False
        self.create(username, password, admin=True)
        return True

    def login(self, username: str, password: str) -> tuple[str, Session] | None:
        """A new session token for good credentials; None otherwise. Hashes on the calling thread."""
        row = self.lookup(username)
        good, rehash = verify(password, row)
        return self.open_session(row, rehash) if good and row is not None and is_active(row) else None

    def lookup(self, username: str) -> dict | None:
        return user_ops.user_by_name(self.db, username)

    def open_session(self, row: dict, rehash: str = "") -> tuple[str, Session]:
        """After `verify` said yes: stores an upgraded hash, starts a session."""
        if rehash:
            user_ops.set_password(self.db, row["id"], rehash)
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        now = self.clock()
        expires = now + self.session_ttl
        started = utc_now()
        user_ops.start_session(self.db, hash_token(token), row["id"], started, expires, now)
        return token, Session(self._user(row), expires, started)

    def session(self, token: str) -> Session | str:
        """The live session of `token`, or why there is none."""
        row = user_ops.session_user(self.db, hash_token(token))
        if row is None:
            return "the token is not valid (logged out, or from another cluster)"
        if not row.get("active", 1):
            return "the user is deactivated"
        if row["expires_at"] <= self.clock():
            return "the session has expired"
        return Session(self._user(row), float(row["expires_at"]), str(row["session_created_at"]))

    def change_password(self, username: str, password: str, new_hash: str = "", keep_token: str = "") -> int:
        """`new_hash`: `hash_password(password)` made elsewhere (the AuthService's worker pool).
        Ends the user's sessions but `keep_token`'s (the caller's own); returns how many ended."""
        user = self._existing(username)
        if len(password) < MIN_PASSWORD_CHARS:
            raise AccountError(f"the password must have at least {MIN_PASSWORD_CHARS} characters")
        keep = hash_token(keep_token) if keep_token else ""
        return user_ops.change_password(self.db, user.id, new_hash or hash_password(password), keep)

    def rename(self, username: str, new_username: str) -> User:
        """`username` becomes `new_username`, with their experiments; sessions stay valid (they
        hold the user's id), as Determined's do. UserExists when the name is another user's."""
        user = self._existing(username)
        new_username = _clean_username(new_username, user.username, user.admin)
        if not user_ops.rename_user(self.db, user.id, username, new_username):
            raise UserExists(f"cannot rename {username!r}: user {new_username!r} already exists")
        return self._existing(new_username)

    def set_admin(self, username: str, admin: bool) -> User:
        """Takes effect at the user's next call: sessions read the flag from the user's row."""
        user_ops.set_admin(self.db, self._existing(username).id, admin)
        return self._existing(username)

    def set_active(self, username: str, active: bool) -> User:
        user_ops.set_active(self.db, self._existing(username).id, active)
        return self._existing(username)

    def set_display_name(self, username: str, display_name: str) -> User:
        """Empty clears it. A display name may not be another user's username, in any case, so
        nobody passes for someone else (least of all for "admin") where names are shown."""
        user = self._existing(username)
        name = display_name.strip()
        if len(name) > MAX_DISPLAY_NAME_CHARS or not name.isprintable():
            raise AccountError(f"a display name has at most {MAX_DISPLAY_NAME_CHARS} printable characters")
        taken = {u.username.lower() for u in self.list() if u.username != username}
        if name.lower() in taken:
            raise AccountError(f"the display name {name!r} is another user's username")
        user_ops.set_display_name(self.db, user.id, name)
        return self._existing(username)

    def link_agent_user(self, username: str, link: AgentUserLink) -> None:
        """Runs `username`'s trials as `link` on root agents (`pedl user link-with-agent-user`)."""
        if link.uid <= 0 or link.gid <= 0:
            raise AccountError("--agent-uid and --agent-gid must be above 0: trials never run as root")
        user_ops.link_agent_user(
            self.db, self._existing(username).id, link.uid, link.gid, link.user, link.group
        )

    def agent_user(self, username: str) -> AgentUserLink | None:
        """The Unix user `username`'s trials run as, or None (the agent's --trial-user)."""
        row = user_ops.agent_user_link(self.db, username) if username else None
        if row is None:
            return None
        return AgentUserLink(
            int(row["uid"]), int(row["gid"]), str(row["agent_user"]), str(row["agent_group"])
        )

    def _existing(self, username: str) -> User:
        user = self.get(username)
        if user is None:
            raise UserNotFound(f"user {username!r} not found")
        return user

    def logout(self, token: str) -> None:
        user_ops.end_session(self.db, hash_token(token))

    def logout_all(self, username: str) -> int:
        """Ends every session of the user (`pedl user logout --all`); how many there were."""
        return user_ops.end_user_sessions(self.db, self._existing(username).id)
