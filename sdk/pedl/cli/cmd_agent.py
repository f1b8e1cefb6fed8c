"""`det agent list|enable|disable` and `det slot list|enable|disable`."""

from __future__ import annotations

import argparse

from pedl import records
from pedl.cli import output, render
from pedl.cli.client import connect


def register(agent: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    """Adds the group's commands to its parser (pedl.cli.main makes the parser, names and help)."""
    agent_commands = agent.add_subparsers(dest="command", required=True, metavar="COMMAND")
    agents = agent_commands.add_parser("list", parents=[common], help="list connected agents")
    output.add_format_flags(agents)
    agents.set_defaults(func=list_agents)
    for verb in ("enable", "disable"):
        parser = agent_commands.add_parser(
            verb,
            parents=[common],
            help=f"{verb} placing trials on an agent (disabling drains: running trials finish)",
        )
        which = parser.add_mutually_exclusive_group(required=True)
        which.add_argument("agent_id", nargs="?", metavar="AGENT_ID")
        which.add_argument("--all", action="store_true", help="every connected agent")
        if verb == "disable":
            parser.add_argument(
                "--drain", action="store_true", help="let running trials finish (pedl always does)"
            )
        parser.set_defaults(func=set_agent_enabled)


def register_slot(slot: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    slot_commands = slot.add_subparsers(dest="command", required=True, metavar="COMMAND")
    slots = slot_commands.add_parser("list", parents=[common], help="list every agent's slots")
    output.add_format_flags(slots)
    slots.set_defaults(func=list_slots)
    for verb in ("enable", "disable"):
        parser = slot_commands.add_parser(verb, parents=[common], help=f"{verb} placing trials on one slot")
        parser.add_argument("agent_id", metavar="AGENT_ID")
        parser.add_argument("slot_id", metavar="SLOT_ID")
        parser.set_defaults(func=set_slot_enabled)


def list_agents(args: argparse.Namespace) -> int:
    with connect(args) as client:
        listed = client.list_cluster()
    agents = sorted(listed.agents, key=lambda a: a.id)
    text = render.agents_table(agents) + render.pilot_jobs_text(listed.pilot_jobs)
    output.emit(args, [records.agent_record(a) for a in agents], text)
    return 0


def list_slots(args: argparse.Namespace) -> int:
    with connect(args) as client:
        listed = client.list_cluster()
    agents = list(listed.agents)
    text = render.slots_table(agents) + render.pilot_jobs_text(listed.pilot_jobs)
    output.emit(args, records.slot_records(agents), text)
    return 0


def set_agent_enabled(args: argparse.Namespace) -> int:
    enabled = args.command == "enable"
    with connect(args) as client:
        ids = sorted(a.id for a in client.list_agents()) if args.all else [args.agent_id]
        for agent_id in ids:
            client.set_agent_enabled(agent_id, "", enabled)
            if enabled:
                print(f"Enabled agent {agent_id}")
            else:
                print(f"Disabled agent {agent_id}: no new trials go there; running ones finish")
    return 0


def set_slot_enabled(args: argparse.Namespace) -> int:
    enabled = args.command == "enable"
    with connect(args) as client:
        client.set_agent_enabled(args.agent_id, args.slot_id, enabled)
    print(f"{'Enabled' if enabled else 'Disabled'} slot {args.slot_id} of agent {args.agent_id}")
    return 0
