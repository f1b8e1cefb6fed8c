"""`pedl agent list` and `pedl slot list`."""

from __future__ import annotations

import argparse

from pedl.cli import render
from pedl.cli.client import connect


def register(groups: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    agent = groups.add_parser("agent", aliases=["a"], help="inspect agents", parents=[common])
    agent_commands = agent.add_subparsers(dest="command", required=True, metavar="COMMAND")
    agent_commands.add_parser("list", parents=[common], help="list connected agents").set_defaults(
        func=list_agents
    )

    slot = groups.add_parser("slot", aliases=["s"], help="inspect slots", parents=[common])
    slot_commands = slot.add_subparsers(dest="command", required=True, metavar="COMMAND")
    slot_commands.add_parser("list", parents=[common], help="list every agent's slots").set_defaults(
        func=list_slots
    )


def list_agents(args: argparse.Namespace) -> int:
    with connect(args) as client:
        print(render.agents_table(client.list_agents()))
    return 0


def list_slots(args: argparse.Namespace) -> int:
    with connect(args) as client:
        print(render.slots_table(client.list_agents()))
    return 0
