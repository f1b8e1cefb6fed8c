"""Determined commands that have no pedl counterpart: each is accepted by the parser (so
`det notebook list` does not print a usage dump) and refused with one line saying why."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from pedl.cli.errors import CliError

# Determined groups (with their aliases) that pedl does not have, and why.
GROUPS: dict[str, tuple[tuple[str, ...], str]] = {
    "notebook": (("notebooks",), "pedl runs no Jupyter notebooks; run Jupyter next to `det` instead"),
    "shell": (("shells",), "pedl runs no interactive shells on agents"),
    "command": (("cmd", "commands"), "pedl runs no ad-hoc commands on agents; only experiments"),
    "template": (("tpl", "templates"), "pedl has no config templates; pass the whole experiment config"),
    "project": (("p", "projects"), "pedl has no projects; experiments are listed flat"),
    "workspace": (("w", "workspaces"), "pedl has no workspaces; experiments are listed flat"),
    "model": (("m",), "pedl has no model registry; use `det e download` or `det checkpoint download`"),
    "oauth": ((), "pedl has no OAuth clients; log in with `det user login`"),
    "deploy": ((), "pedl deploys locally with `pedl cluster up`; see deploy/ for other setups"),
}

# Verbs of groups pedl has, which pedl does not support (yet), and why.
VERBS: dict[str, dict[str, str]] = {
    "experiment": {
        "move": "pedl has no projects to move experiments between",
        "continue": "continuing an experiment with a new config is not supported by pedl",
        "fork": "forking an experiment is not supported by pedl; create a new one from `det e config ID`",
    },
}


def _refuse(message: str) -> Callable[[argparse.Namespace], int]:
    def refuse(args: argparse.Namespace) -> int:
        raise CliError(message)

    return refuse


def register(groups: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    for name, (aliases, why) in GROUPS.items():
        parser = groups.add_parser(name, aliases=list(aliases), help=f"(not in pedl) {why}", parents=[common])
        parser.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
        parser.set_defaults(func=_refuse(f"`det {name}`: {why}"))


def register_verbs(group: str, commands: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """The refused verbs of one pedl group, under its subcommands."""
    for verb, why in VERBS.get(group, {}).items():
        parser = commands.add_parser(verb, help=f"(not in pedl) {why}", parents=[common])
        parser.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
        parser.set_defaults(func=_refuse(f"`det {group} {verb}`: {why}"))
