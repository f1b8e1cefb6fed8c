"""What a harness may hold: its own trial's checkpoint-store token, never the agent's cluster secret."""

from __future__ import annotations

from pedl import auth


def harness_credentials(env: dict[str, str], checkpoint_token: str) -> None:
    """Edits a harness's environment in place: PEDL_TOKEN is the trial's token (or absent)."""
    env.pop(auth.ENV_CLUSTER_SECRET, None)
    env.pop(auth.ENV_TOKEN, None)
    if checkpoint_token:
        env[auth.ENV_TOKEN] = checkpoint_token
