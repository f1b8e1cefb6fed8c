"""The scheduler's restart in place after the database went away under a write: it comes back on
the port it had bound (a `--port 0` scheduler too), and only once the database answers."""

from __future__ import annotations

import pytest

from pedl_scheduler import db_restart
from pedl_scheduler.db_restart import restart_argv, wait_then_restart


def test_the_restart_keeps_the_bound_port() -> None:
    assert restart_argv(["/py", "/bin/pedl-scheduler", "--port", "0", "--db", "x"], 4321) == [
        "/py", "/bin/pedl-scheduler", "--port", "4321", "--db", "x",
    ]  # fmt: skip
    assert restart_argv(["/py", "-m", "pedl_scheduler.main", "--port=0"], 4321)[-1] == "--port=4321"
    assert restart_argv(["/py", "/bin/x"], 8080) == ["/py", "/bin/x", "--port", "8080"]


def test_it_waits_for_the_database_then_executes_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    answers = iter([False, False, True])
    checked: list[str] = []
    executed: list[list[str]] = []
    monkeypatch.setattr(db_restart.sys, "orig_argv", ["/py", "/bin/pedl-scheduler", "--port", "0"])
    monkeypatch.setattr(db_restart.time, "sleep", lambda s: None)

    def check(url: str) -> bool:
        checked.append(url)
        return next(answers)

    wait_then_restart("postgresql://db", 9999, "lost", 0.1, check, lambda path, argv: executed.append(argv))
    assert len(checked) == 3 and checked[0] == "postgresql://db"
    assert executed == [["/py", "/bin/pedl-scheduler", "--port", "9999"]]


def test_an_unreachable_database_is_reported_as_such() -> None:
    assert not db_restart.reachable("postgresql://nobody:x@127.0.0.1:1/none")
