"""`log_policies`: Determined's checks hold; a policy only labels log lines unless it has an action.

pedl neither labels log lines nor acts on them, so policies without an action are accepted with a
warning (Determined's defaults, CUDA OOM and ECC Error, are in every config it exports), and an action
(`cancel_retries`, `exclude_node`) is refused naming it: the user would rely on it.
"""

from __future__ import annotations

from typing import Any

from pedl.config._checks import describe
from pedl.config.errors import FieldError, FieldPath

_ACTIONS = ("cancel_retries", "exclude_node")


def validate_log_policies(value: Any, path: FieldPath = ("log_policies",)) -> list[dict[str, Any]]:
    out = []
    for i, given in enumerate(value):  # its shape is checked by the schema
        item = (*path, i)
        policy = {k: v for k, v in given.items() if v is not None}
        if "name" not in policy and not ("pattern" in policy and "action" in policy):
            raise FieldError(
                item,
                "needs a name (and a pattern unless it disables a default policy), or a pattern and "
                "an action",
            )
        if "action" in policy:
            _check_action(policy["action"], (*item, "action"))
            raise FieldError(
                (*item, "action"),
                "is not supported by pedl: pedl does not act on log patterns (cancel retries, exclude a "
                "node); remove the action (max_restarts limits retries)",
            )
        out.append(policy)
    return out


def _check_action(action: Any, path: FieldPath) -> None:
    kind = action.get("type") if isinstance(action, dict) else action
    if kind not in _ACTIONS:
        raise FieldError(path, f"must be one of 'cancel_retries' or 'exclude_node', got {describe(kind)}")
