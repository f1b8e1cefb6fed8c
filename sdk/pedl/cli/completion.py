"""Shell completion through argcomplete when it is installed: commands, flags, and experiment or
trial ids asked of the scheduler (`eval "$(register-python-argcomplete det)"` turns it on)."""

from __future__ import annotations

import argparse
import os
from typing import Any, cast


def _experiment_ids(prefix: str, parsed_args: argparse.Namespace, **_: Any) -> list[str]:
    from pedl.cli.client import connect

    try:
        with connect(parsed_args) as client:
            return [str(e.id) for e in client.list_experiments() if str(e.id).startswith(prefix)]
    except Exception:  # completion must never print a traceback into the user's shell
        return []


def _trial_ids(prefix: str, parsed_args: argparse.Namespace, **_: Any) -> list[str]:
    from pedl.cli.client import connect

    try:
        with connect(parsed_args) as client:
            ids: list[str] = []
            for experiment in client.list_experiments():
                trials = client.get_experiment(experiment.id).trials
                ids.extend(str(t.id) for t in trials if str(t.id).startswith(prefix))
            return ids
    except Exception:
        return []


def _attach(parser: argparse.ArgumentParser) -> None:
    for action in parser._actions:
        if action.dest in ("experiment_id", "experiment_ids"):
            cast(Any, action).completer = _experiment_ids  # argcomplete reads this attribute
        elif action.dest == "trial_id":
            cast(Any, action).completer = _trial_ids
        elif isinstance(action, argparse._SubParsersAction):
            for sub in set(action.choices.values()):
                _attach(sub)


def requested() -> bool:
    """Whether the shell asked for completions (argcomplete's hook sets _ARGCOMPLETE)."""
    return "_ARGCOMPLETE" in os.environ


def enable(parser: argparse.ArgumentParser) -> None:
    """Answers a completion request and exits when the shell asked for one; otherwise returns."""
    if not requested():
        return
    try:
        import argcomplete
    except ImportError:
        return
    _attach(parser)
    argcomplete.autocomplete(parser)
