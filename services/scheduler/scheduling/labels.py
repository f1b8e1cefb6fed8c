"""Agent labels (`pedl-agent --label`, `resources.agent_label`) as placement requirements.

A trial needs an agent offering its Python environment and carrying its label: an agent with label
L runs only trials asking for L, an unlabeled agent only trials asking for none. Both requirements
fold into one placement key per environment, so placement, preemption and the fit checks, which
already match a trial's environment against what each agent offers, honour labels unchanged.
"""

from __future__ import annotations

from collections.abc import Iterable

# Not allowed in a label (see `check_label`), so a key never mistakes one environment for another.
SEPARATOR = "@"


def placement_key(environment: str, label: str = "") -> str:
    """What a trial asks of an agent: `environment` on an agent labelled `label` ("" for none)."""
    return f"{environment}{SEPARATOR}{label}" if label else environment


def offered_keys(environments: Iterable[str], label: str = "") -> frozenset[str]:
    """The placement keys an agent with these environments and this label satisfies."""
    return frozenset(placement_key(e, label) for e in environments)


def check_label(label: str) -> str | None:
    """Why `label` cannot be an agent label, or None."""
    if not label.strip() or label != label.strip():
        return "a label is a non-empty name without surrounding spaces"
    if SEPARATOR in label:
        return f"a label may not contain {SEPARATOR!r}"
    return None
