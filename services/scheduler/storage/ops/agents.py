"""Which agents and slots an admin disabled (`det agent|slot disable`); slot "" is the whole agent."""

from __future__ import annotations

from sqlalchemy import bindparam, delete, insert, select

from pedl_scheduler.storage.connection import Storage
from pedl_scheduler.storage.tables import disabled_slots

_ALL = select(disabled_slots.c.agent_id, disabled_slots.c.slot_id).order_by(
    disabled_slots.c.agent_id, disabled_slots.c.slot_id
)
_DROP = delete(disabled_slots).where(
    disabled_slots.c.agent_id == bindparam("a"), disabled_slots.c.slot_id == bindparam("s")
)
_ADD = insert(disabled_slots).values(agent_id=bindparam("a"), slot_id=bindparam("s"))


def disabled(s: Storage) -> list[tuple[str, str]]:
    return [(r["agent_id"], r["slot_id"]) for r in s.rows(_ALL)]


def set_disabled(s: Storage, agent_id: str, slot_id: str, is_disabled: bool) -> None:
    """Idempotent: disabling twice keeps one row."""
    with s.transaction():
        s.run(_DROP, {"a": agent_id, "s": slot_id})
        if is_disabled:
            s.run(_ADD, {"a": agent_id, "s": slot_id})
