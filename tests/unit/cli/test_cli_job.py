"""`det job update|update-batch`: what names no experiment job, or asks what a fair-share pool has no
meaning for, is refused in one line before anything is sent."""

from __future__ import annotations

import pytest

from pedl.cli.main import main


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["job", "update", "slurm-7", "--weight", "2"], "job slurm-7 is a Slurm pilot job"),
        (["job", "update", "7", "--priority", "3"], "no job 7"),
        (["job", "update", "experiment-7", "--resource-pool", "gpu"], "resource pool is fixed by its config"),
        (["job", "update-batch", "experiment-7.weight=heavy"], "job experiment-7: weight must be a number"),
        (["job", "update-batch", "experiment-7.colour=red"], "write JOB_ID.weight=W or JOB_ID.priority=P"),
        (["job", "update-batch", "experiment-7.resource-pool=gpu"], "resource pool is fixed"),
    ],
)
def test_a_bad_job_update_is_one_line(argv: list[str], said: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--master", "127.0.0.1:1", *argv]) == 2
    err = capsys.readouterr().err
    assert said in err and err.count("\n") == 1, err
