"""Makes tests/support importable as `support`."""

import os
import secrets
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

# Services refuse to start without a cluster secret (authentication is on by default). Tests that
# start one bare (a lone checkpoint store, a scheduler on PostgreSQL) share this one, and their
# clients present it too (pedl.auth falls back to $PEDL_CLUSTER_SECRET); support.processes'
# local_cluster makes its own secret and admin user.
os.environ.setdefault("PEDL_CLUSTER_SECRET", secrets.token_urlsafe(32))

pytest_plugins = ["support.db_fixtures"]
