"""`det agent list` and `det slot list` (enable/disable are refused in cmd_refused)."""

from __future__ import annotations

import argparse

from pedl import records
from pedl.cli import cmd_refused, output, render
from pedl.cli.client import connect


def register(groups: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    agent = groups.add_parser("agent", aliases=["a"], help="inspect agents", parents=[common])
    agent_commands = agent.add_subparsers(dest="command", required=True, metavar="COMMAND")
    agents = agent_commands.add_parser("list", parents=[common], help="list connected agents")
    output.add_format_flags(agents)
    agents.set_defaults(func=list_agents)
    cmd_refused.register_verbs("agent", agent_commands, common)

    slot = groups.add_parser("slot", aliases=["s"], help="inspect slots", parents=[common])
    slot_commands = slot.add_subparsers(dest="command", required=True, metavar="COMMAND")
    slots = slot_commands.add_parser("list", parents=[common], help="list every agent's slots")
    output.add_format_flags(slots)
    slots.set_defaults(func=list_slots)
    cmd_refused.register_verbs("slot", slot_commands, common)


def list_agents(args: argparse.Namespace) -> int:
    with connect(args) as client:
        agents = sorted(client.list_agents(), key=lambda a: a.id)
    output.emit(args, [records.agent_record(a) for a in agents], render.agents_table(agents))
    return 0


def list_slots(args: argparse.Namespace) -> int:
    with connect(args) as client:
        agents = client.list_agents()
    output.emit(args, records.slot_records(agents), render.slots_table(agents))
    return 0
