"""Per-trial checkpoint-store credentials: minted by the scheduler in StartTrial, checked by the store.

HMAC-signed with a key derived from the cluster secret, so the store verifies them without a
round trip and they survive a scheduler restart; a new run of the trial gets a fresh one.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import time

PREFIX = "pedlt1"
TTL_SECONDS = 30 * 24 * 3600


def _key(secret: str) -> bytes:
    return hmac.new(secret.encode(), b"pedl trial checkpoint token", hashlib.sha256).digest()


def _sign(secret: str, body: str) -> str:
    digest = hmac.new(_key(secret), body.encode(), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).decode().rstrip("=")


def mint(secret: str, experiment_id: int, trial_id: int, now: float | None = None) -> str:
    expiry = int((time.time() if now is None else now) + TTL_SECONDS)
    body = f"{PREFIX}.{experiment_id}.{trial_id}.{expiry}"
    return f"{body}.{_sign(secret, body)}"


def is_trial_token(token: str) -> bool:
    return token.startswith(PREFIX + ".")


def verify(secret: str, token: str, now: float | None = None) -> tuple[int, int] | None:
    """(experiment id, trial id) when `token` is genuine and unexpired, else None."""
    body, _, signature = token.rpartition(".")
    parts = body.split(".")
    if len(parts) != 4 or parts[0] != PREFIX or not all(p.isdigit() for p in parts[1:]):
        return None
    if not hmac.compare_digest(signature.encode(), _sign(secret, body).encode()):
        return None
    if int(parts[3]) < (time.time() if now is None else now):
        return None
    return int(parts[1]), int(parts[2])
