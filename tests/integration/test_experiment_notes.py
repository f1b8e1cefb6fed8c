"""Notes on an experiment from the CLI (`pedl experiment note`) and the SDK (Experiment.notes /
set_notes) against a real cluster: kept as written, readable by anyone, changed only by the owner or an
admin; a second user is refused with one line and the notes stay as they were."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from pedl.experimental import ClientError
from pedl.experimental._session import Session
from pedl.experimental.client import ExperimentClient
from support.processes import BIN, LocalCluster, local_cluster
from tests.integration.test_auth import create_user, scheduler, submit

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with local_cluster(tmp_path_factory.mktemp("notes") / "cluster", agents=0) as c:
        yield c


def pedl(cluster: LocalCluster, token: str, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PEDL_MASTER=cluster.master, PEDL_TOKEN=token)
    return subprocess.run(
        [str(BIN / "pedl"), *args], input=stdin, env=env, capture_output=True, text=True, timeout=60
    )


def sdk_as(monkeypatch: pytest.MonkeyPatch, cluster: LocalCluster, token: str, exp: int) -> ExperimentClient:
    """The SDK's experiment as a user: their token in PEDL_TOKEN, as after `export PEDL_TOKEN=...`."""
    monkeypatch.setenv("PEDL_TOKEN", token)
    return ExperimentClient(exp, Session(cluster.master))


def test_the_cli_sets_prints_and_clears_notes_and_refuses_a_second_user(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    dana, erik = create_user(cluster, "dana"), create_user(cluster, "erik")
    exp = submit(scheduler(cluster.master, dana), tmp_path).id
    set_ = pedl(cluster, dana, "experiment", "note", str(exp), "--set", "lr > 0.3 diverges")
    assert set_.returncode == 0, set_.stderr
    assert pedl(cluster, erik, "e", "note", str(exp)).stdout == "lr > 0.3 diverges\n"  # anyone reads

    refused = pedl(cluster, erik, "e", "note", str(exp), "--set", "erik was here")
    assert refused.returncode != 0
    assert refused.stderr.strip().splitlines() == [
        f"error: permission denied: experiment {exp} belongs to user 'dana': "
        "only its owner or an admin may change it"
    ]
    assert pedl(cluster, dana, "e", "note", str(exp)).stdout == "lr > 0.3 diverges\n"

    notes_file = tmp_path / "notes.md"
    notes_file.write_text("# findings\n\n- width 2 wins\n")
    assert pedl(cluster, cluster.token, "e", "note", str(exp), "--file", str(notes_file)).returncode == 0
    assert pedl(cluster, dana, "e", "note", str(exp)).stdout == "# findings\n\n- width 2 wins\n"
    assert pedl(cluster, dana, "e", "note", str(exp), "--file", "-", stdin="from stdin").returncode == 0
    assert pedl(cluster, dana, "e", "note", str(exp)).stdout == "from stdin\n"
    assert pedl(cluster, dana, "e", "note", str(exp), "--set", "").returncode == 0
    assert pedl(cluster, dana, "e", "note", str(exp)).stdout == ""


def test_the_cli_refuses_bad_inputs_in_one_line(cluster: LocalCluster, tmp_path: Path) -> None:
    exp = submit(scheduler(cluster.master, cluster.token), tmp_path).id
    missing = pedl(cluster, cluster.token, "e", "note", str(exp), "--file", str(tmp_path / "absent.md"))
    assert missing.returncode != 0 and len(missing.stderr.strip().splitlines()) == 1
    assert "cannot read notes from" in missing.stderr and "absent.md" in missing.stderr
    huge = pedl(cluster, cluster.token, "e", "note", str(exp), "--file", "-", stdin="x" * 40_000)
    assert huge.returncode != 0 and "notes are longer than 32768 characters" in huge.stderr
    both = pedl(cluster, cluster.token, "e", "note", str(exp), "--set", "a", "--file", "b")
    assert both.returncode == 2 and "not allowed with argument" in both.stderr
    unknown = pedl(cluster, cluster.token, "e", "note", "99999")
    assert unknown.returncode != 0 and "99999" in unknown.stderr


def test_the_sdk_reads_and_sets_notes_owner_or_admin_only(
    cluster: LocalCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dana, erik = create_user(cluster, "dana"), create_user(cluster, "erik")
    exp = submit(scheduler(cluster.master, dana), tmp_path).id
    with sdk_as(monkeypatch, cluster, dana, exp) as mine:
        mine.set_notes("seed 3 is an outlier")
        assert mine.notes == "seed 3 is an outlier"
    with sdk_as(monkeypatch, cluster, erik, exp) as theirs:
        assert theirs.notes == "seed 3 is an outlier"
        with pytest.raises(ClientError, match="only its owner or an admin may change it"):
            theirs.set_notes("erik was here")
    with sdk_as(monkeypatch, cluster, cluster.token, exp) as admin:
        admin.set_notes("")
        assert admin.notes == ""
