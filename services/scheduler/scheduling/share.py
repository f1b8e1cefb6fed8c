"""Weighted fair shares of a pool's slots (water-filling), as in Determined's fair-share scheduler."""

from __future__ import annotations

from collections.abc import Mapping


def weighted_shares(capacity: float, claims: Mapping[int, tuple[float, float]]) -> dict[int, float]:
    """Splits `capacity` among claimants `id -> (weight, demand)` in proportion to weight.

    Nobody gets more than it demands; what a small claimant leaves goes to the others, again
    by weight, so no slot idles while someone still wants it.
    """
    shares: dict[int, float] = {}
    remaining = max(float(capacity), 0.0)
    weight_left = sum(w for w, _ in claims.values())
    for key in sorted(claims, key=lambda k: (claims[k][1] / claims[k][0], k)):
        weight, demand = claims[key]
        fair = remaining * weight / weight_left if weight_left > 0 else 0.0
        shares[key] = min(demand, fair)
        remaining -= shares[key]
        weight_left -= weight
    return shares
