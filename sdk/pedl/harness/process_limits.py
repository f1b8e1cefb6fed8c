"""The agent's per-trial process limit (`pedl-agent --trial-pids-limit`) where no pids cgroup carries
it (the agent's `pids_cgroup` decides, and sets PEDL_TRIAL_PIDS_LIMIT only then), applied by the
harness to itself before any trial code runs: RLIMIT_NPROC, soft and hard, so the trial cannot raise
it again.

RLIMIT_NPROC counts the processes and threads of the Unix user the harness runs as, so trials sharing
a user share the bound: the agent uses it only where it runs one trial at a time. The kernel does not
enforce it for root."""

from __future__ import annotations

import os
import resource
from collections.abc import Mapping

PIDS_LIMIT_ENV = "PEDL_TRIAL_PIDS_LIMIT"
DEFAULT_PIDS_LIMIT = 8192


def apply_pids_limit(environ: Mapping[str, str] = os.environ) -> int:
    """Lowers this process's RLIMIT_NPROC to the agent's limit (never raises it); returns the limit
    applied, 0 when none is asked for."""
    wanted = int(environ.get(PIDS_LIMIT_ENV) or 0)
    if wanted <= 0:
        return 0
    soft, hard = resource.getrlimit(resource.RLIMIT_NPROC)
    limit = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    resource.setrlimit(resource.RLIMIT_NPROC, (limit, limit))
    return limit
