"""Per-trial-run credentials: minted by the scheduler in StartTrial, checked by the store and scheduler.

A token names one run (experiment, trial, run id), the checkpoints that run was told to start
from (its own latest, a PBT parent's, a warm start's: `grants`) and an expiry; it is HMAC-signed
with a key derived from the cluster secret, so the store checks its scope without a round trip.
It stops working when its run ends: the store asks the scheduler (`AuthService.Authorize`) whether
the run is still live. Server-side code; the harness only passes it on as PEDL_TOKEN.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import time
from dataclasses import dataclass

PREFIX = "pedlt2"
DEFAULT_TTL_SECONDS = 7 * 24 * 3600
_UUID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


@dataclass(frozen=True)
class Claim:
    experiment_id: int
    trial_id: int
    run_id: int
    expires_at: int
    grants: frozenset[str]


def _key(secret: str) -> bytes:
    return hmac.new(secret.encode(), b"pedl trial run token v2", hashlib.sha256).digest()


def _sign(secret: str, body: str) -> str:
    digest = hmac.new(_key(secret), body.encode(), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).decode().rstrip("=")


def mint(
    secret: str,
    experiment_id: int,
    trial_id: int,
    run_id: int,
    grants: tuple[str, ...] = (),
    ttl_seconds: float = DEFAULT_TTL_SECONDS,
    now: float | None = None,
) -> str:
    granted = sorted({g for g in grants if g})
    for uuid in granted:
        if not _UUID.match(uuid):
            raise ValueError(f"cannot grant checkpoint {uuid!r}: not a checkpoint uuid")
    expiry = int((time.time() if now is None else now) + ttl_seconds)
    body = f"{PREFIX}.{experiment_id}.{trial_id}.{run_id}.{expiry}.{','.join(granted)}"
    return f"{body}.{_sign(secret, body)}"


def is_trial_token(token: str) -> bool:
    return token.startswith("pedlt")


def verify(secret: str, token: str, now: float | None = None) -> Claim | None:
    """The claim when `token` is genuine and unexpired, else None (older formats included)."""
    body, _, signature = token.rpartition(".")
    parts = body.split(".")
    if len(parts) != 6 or parts[0] != PREFIX or not all(p.isdigit() for p in parts[1:5]):
        return None
    if not hmac.compare_digest(signature.encode(), _sign(secret, body).encode()):
        return None
    if int(parts[4]) < (time.time() if now is None else now):
        return None
    grants = frozenset(g for g in parts[5].split(",") if g)
    return Claim(int(parts[1]), int(parts[2]), int(parts[3]), int(parts[4]), grants)
