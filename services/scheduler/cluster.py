"""Connected agents, their slots, and the outgoing message queue of each agent's stream."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

from pedl._timeutil import utc_now
from pedl.v1 import agent_pb2, common_pb2, scheduler_pb2

CLOSE_STREAM = object()  # put on an agent's queue to end its stream


@dataclass
class AgentHandle:
    id: str
    hostname: str
    address: str
    resource_pool: str
    environments: list[str]
    slots: list[common_pb2.Slot]
    # `pedl-agent --label`: it runs only trials with that resources.agent_label ("" for none).
    label: str = ""
    outbox: asyncio.Queue = field(default_factory=asyncio.Queue)
    connected_at: str = field(default_factory=utc_now)
    last_heartbeat: str = field(default_factory=utc_now)
    last_seen: float = field(default_factory=time.monotonic)
    # slot id -> trial id
    used: dict[str, int] = field(default_factory=dict)
    # slot id -> the trial that takes it over when its holder in `used` exits (a handoff).
    next: dict[str, int] = field(default_factory=dict)
    # The agent takes ConnectResponse.batch: what is queued for it goes out as one message.
    accepts_batches: bool = False
    # The agent holds a StartTrial with `after` until those runs exit (handoffs).
    accepts_handoffs: bool = False
    # How the agent confines its trials ("bwrap", "none"; "" from an agent that does not say).
    isolation: str = ""
    # `det agent|slot disable`: nothing new is placed there; running trials finish (a drain).
    disabled: bool = False
    disabled_slots: set[str] = field(default_factory=set)

    def send(self, message: agent_pb2.ConnectResponse | object) -> None:
        """A message for the agent, or CLOSE_STREAM."""
        self.outbox.put_nowait(message)

    def free_slots(self) -> tuple[str, ...]:
        if self.disabled:
            return ()
        return tuple(s.id for s in self.slots if s.id not in self.used and s.id not in self.disabled_slots)

    def handoff_slots(self, exiting: set[int]) -> tuple[str, ...]:
        """Slots held by the `exiting` trials (told to terminate) that nobody takes over yet."""
        if not self.accepts_handoffs or self.disabled:
            return ()
        return tuple(
            s.id
            for s in self.slots
            if self.used.get(s.id) in exiting and s.id not in self.next and s.id not in self.disabled_slots
        )

    def hold(self, slot_id: str, trial_id: int) -> int | None:
        """Gives the slot to the trial: now if free, else as its holder exits (returns that holder)."""
        holder = self.used.get(slot_id)
        if holder is None or holder == trial_id:
            self.used[slot_id] = trial_id
            return None
        self.next[slot_id] = trial_id
        return holder

    def to_proto(self) -> scheduler_pb2.Agent:
        slots = []
        for s in self.slots:
            slot = common_pb2.Slot()
            slot.CopyFrom(s)
            slot.trial_id = self.used.get(s.id, 0)
            slot.disabled = s.id in self.disabled_slots
            slots.append(slot)
        return scheduler_pb2.Agent(
            id=self.id,
            slots=slots,
            connected_at=self.connected_at,
            last_heartbeat=self.last_heartbeat,
            hostname=self.hostname,
            environments=self.environments,
            resource_pool=self.resource_pool,
            isolation=self.isolation,
            disabled=self.disabled,
            label=self.label,
            address=self.address,
        )


class Cluster:
    """Who is connected and which slots they hold."""

    def __init__(self) -> None:
        self.agents: dict[str, AgentHandle] = {}
        # Kept here, not on the handle, so an agent that reconnects stays disabled.
        self.disabled_agents: set[str] = set()
        self.disabled_slots: dict[str, set[str]] = {}
        # The Slurm pools' pilot jobs as squeue last listed them (slurm/service.py), for listings.
        self.pilot_jobs: list[scheduler_pb2.PilotJob] = []

    def connect(self, register: agent_pb2.RegisterAgent) -> AgentHandle:
        old = self.agents.get(register.agent_id)
        if old is not None:
            old.send(CLOSE_STREAM)
        agent = AgentHandle(
            id=register.agent_id,
            hostname=register.hostname,
            address=register.address,
            resource_pool=register.resource_pool or "default",
            environments=list(register.environments) or ["default"],
            slots=list(register.slots),
            accepts_batches=register.accepts_batches,
            accepts_handoffs=register.accepts_handoffs,
            isolation=register.isolation,
            disabled=register.agent_id in self.disabled_agents,
            disabled_slots=self.disabled_slots.setdefault(register.agent_id, set()),
            label=register.label,
        )
        self.agents[agent.id] = agent
        return agent

    def disconnect(self, agent: AgentHandle) -> bool:
        """Forgets the agent unless a newer stream of the same id replaced it; True if forgotten."""
        if self.agents.get(agent.id) is agent:
            del self.agents[agent.id]
            return True
        return False

    def restore_disabled(self, disabled: list[tuple[str, str]]) -> None:
        """What admins disabled before a restart (agent id, slot id; "" for the whole agent)."""
        for agent_id, slot_id in disabled:
            if slot_id:
                self.disabled_slots.setdefault(agent_id, set()).add(slot_id)
            else:
                self.disabled_agents.add(agent_id)

    def set_enabled(self, agent_id: str, slot_id: str, enabled: bool) -> tuple[AgentHandle, str]:
        """Enables or disables a connected agent (or one of its slots): the agent and the slot's id ("" for
        the whole agent), to be stored; KeyError names what is unknown."""
        agent = self.agents.get(agent_id)
        if agent is None:
            raise KeyError(f"agent {agent_id!r} is not connected")
        if slot_id:
            ids = [s.id for s in agent.slots]
            if slot_id not in ids and slot_id.isdigit() and int(slot_id) < len(ids):
                slot_id = ids[int(slot_id)]  # Determined numbers an agent's slots 0, 1, ...
            if slot_id not in ids:
                raise KeyError(f"agent {agent_id!r} has no slot {slot_id!r}")
            (agent.disabled_slots.discard if enabled else agent.disabled_slots.add)(slot_id)
        else:
            agent.disabled = not enabled
            (self.disabled_agents.discard if enabled else self.disabled_agents.add)(agent_id)
        return agent, slot_id

    def heartbeat(self, agent: AgentHandle) -> None:
        agent.last_heartbeat = utc_now()
        agent.last_seen = time.monotonic()

    def release(self, trial_id: int) -> None:
        """The trial's run is gone: its slots pass to the trials taking them over, or become free."""
        for agent in self.agents.values():
            for slot_id in [s for s, t in agent.next.items() if t == trial_id]:
                del agent.next[slot_id]
            for slot_id in [s for s, t in agent.used.items() if t == trial_id]:
                successor = agent.next.pop(slot_id, None)
                if successor is None:
                    del agent.used[slot_id]
                else:
                    agent.used[slot_id] = successor
