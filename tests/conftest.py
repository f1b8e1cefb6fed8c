"""Makes tests/support importable as `support`."""

import atexit
import os
import secrets
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

# Services refuse to start without a cluster secret (authentication is on by default). Tests that
# start one bare (a lone checkpoint store, a scheduler on PostgreSQL) share this one, and their
# clients present it too (pedl.auth falls back to $PEDL_CLUSTER_SECRET); support.processes'
# local_cluster makes its own secret and admin user.
os.environ.setdefault("PEDL_CLUSTER_SECRET", secrets.token_urlsafe(32))

# Never the user's own ~/.pedl: logins that tests save (auth.json, keyed by 127.0.0.1:PORT) would
# pile up there, and a later test whose service got a reused port would present a stale token.
_TEST_HOME = tempfile.mkdtemp(prefix="pedl-test-home-")
os.environ["PEDL_HOME"] = _TEST_HOME
atexit.register(shutil.rmtree, _TEST_HOME, True)

pytest_plugins = ["support.db_fixtures", "support.file_order"]
