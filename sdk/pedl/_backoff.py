"""The one backoff formula of pedl: every wait before trying again is computed here.

Exponential (base * 2**(attempt-1)), capped, and by default scaled by a jitter in [0.5, 1] so that
many clients failing together (agents after a scheduler restart, parts of one transfer) do not
come back together. gRPC unary calls declare the same shape in their channel's service config
(`pedl._grpc.RETRY_POLICY`), where gRPC itself does the waiting.
"""

from __future__ import annotations

import random
from collections.abc import Callable


def backoff_seconds(
    attempt: int,
    base_s: float,
    cap_s: float,
    *,
    jitter: bool = True,
    rand: Callable[[], float] = random.random,
) -> float:
    """The wait before retry number `attempt` (1, 2, ...); 0 before the first try or with no base."""
    if attempt < 1 or base_s <= 0:
        return 0.0
    full = min(cap_s, base_s * 2 ** min(attempt - 1, 62))
    return full * (0.5 + 0.5 * rand()) if jitter else full
