"""The `resources` section as the scheduler reads it: a frozen, typed value built once per config.

The scheduler's placement and fair-share passes read pool, label, slots, weight, cap and priority for
every experiment on every pass; reading them as fields of one typed value (rather than `.get` on the
validated mapping, with defaults repeated at each reader) lets mypy check them and keeps the defaults
in one place. `ExperimentConfig.raw["resources"]` stays the mapping user code receives.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Resources:
    slots_per_trial: int = 1
    max_slots: int | None = None  # None: no cap on the experiment's slots
    weight: float = 1.0  # its fair share relative to the pool's other experiments
    priority: int | None = None  # None: the pool's default (smaller runs first)
    resource_pool: str = ""  # "": the cluster's default pool
    agent_label: str = ""  # "": agents without a label
    native_parallel: bool = False

    @classmethod
    def of(cls, section: Mapping[str, Any]) -> Resources:
        """From the validated section (`sections.validate_resources` filled its defaults)."""
        return cls(
            slots_per_trial=int(section.get("slots_per_trial", 1)),
            max_slots=section.get("max_slots"),
            weight=float(section.get("weight", 1)),
            priority=section.get("priority"),
            resource_pool=section.get("resource_pool") or "",
            agent_label=section.get("agent_label") or "",
            native_parallel=bool(section.get("native_parallel", False)),
        )
