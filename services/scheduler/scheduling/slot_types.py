"""A gang's slots are all of one type: GPUs, or CPU slots, never some of each.

An agent on a GPU machine started with `--slots N` offers both kinds ("gpu0", "cpu0"), and NCCL
cannot join a rank on a GPU with one on a CPU. So placement, handoffs, preemption and the
create-time fit check each look at one type at a time: an agent offering both counts as one agent
of its GPU slots and one of its CPU slots, and a multi-agent gang takes whole groups of one type.

Which type a trial gets: the experiment config has no field naming one (Determined's
`resources` has none either: there a resource pool's agents offer one kind), so any type that
can hold the trial will do, GPUs first. A trial takes GPU slots when they fit it now, else CPU
slots when those do (the user who added `--slots N` to a GPU agent asked for them to be used),
and otherwise waits or preempts, again on one type, the cheapest plan winning with GPUs first on
a tie. A cluster whose agents offer one type sees exactly the placement it always did.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from pedl_scheduler.scheduling.placement import PoolSlots
from pedl_scheduler.scheduling.state import DEFAULT_ENVIRONMENT, Agent

GPU, CPU = "gpu", "cpu"


def preference(slot_type: str) -> tuple[int, str]:
    """Sort key: GPU slots first, CPU slots last, any other type (or none reported) between."""
    return (0 if slot_type == GPU else 2 if slot_type == CPU else 1, slot_type)


def types_of(agent: Agent) -> dict[str, str]:
    """slot id -> type; a slot the agent reports no type for is of type ""."""
    types = agent.slot_types if len(agent.slot_types) == len(agent.slot_ids) else ()
    return {s: (types[i] if types else "") for i, s in enumerate(agent.slot_ids)}


def by_slot_type(agents: Sequence[Agent]) -> list[tuple[str, list[Agent]]]:
    """The agents as seen by each slot type, preferred type first.

    An agent of one type appears unchanged in its group; an agent offering several appears in
    each, holding only its slots of that type. Agents without slots go to the first group (they
    hold no gang, only CPU-only trials, which are placed apart), so there is always one group.
    """
    groups: dict[str, list[Agent]] = {}
    slotless: list[Agent] = []
    for agent in agents:
        types = types_of(agent)
        kinds = sorted(set(types.values()), key=preference)
        if not kinds:
            slotless.append(agent)
        elif len(kinds) == 1:
            groups.setdefault(kinds[0], []).append(agent)
        else:
            for kind in kinds:
                groups.setdefault(kind, []).append(_only(agent, kind, types))
    ordered = [(kind, groups[kind]) for kind in sorted(groups, key=preference)] or [("", [])]
    ordered[0][1].extend(slotless)
    return ordered


def _only(agent: Agent, kind: str, types: dict[str, str]) -> Agent:
    def keep(slots: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(s for s in slots if types.get(s) == kind)

    ids = keep(agent.slot_ids)
    return replace(
        agent,
        slot_ids=ids,
        free_slot_ids=keep(agent.free_slot_ids),
        handoff_slot_ids=keep(agent.handoff_slot_ids),
        slot_types=(kind,) * len(ids),
    )


def typed_pools(agents: Sequence[Agent]) -> list[PoolSlots]:
    """One `PoolSlots` per slot type of these agents (one pool's), preferred type first."""
    return [PoolSlots(group, kind) for kind, group in by_slot_type(agents)]


def could_ever_fit(agents: Sequence[Agent], slots: int, environment: str = DEFAULT_ENVIRONMENT) -> bool:
    """Whether slots of one type, all free, could ever hold the gang on these agents."""
    return any(pool.could_ever_fit(slots, environment) for pool in typed_pools(agents))
