"""The version the agent reports when it registers."""

from __future__ import annotations

from importlib import metadata


def _version() -> str:
    # From the installed distribution: `pedl.__version__` is missing when pedl imports as a namespace.
    try:
        return metadata.version("pedl")
    except metadata.PackageNotFoundError:
        return "0.0.0+unknown"


AGENT_VERSION = _version()
