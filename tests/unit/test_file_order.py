"""The suite's ordering (tests/support/file_order.py): the files that take longest start first,
so the two xdist workers of scripts/test finish together instead of one running a long file alone
at the end; a file's tests stay together and in their order."""

from __future__ import annotations

from support.file_order import longest_files_first, per_file


def test_longer_files_go_first_and_each_file_keeps_its_tests_together_in_order() -> None:
    ids = ["a.py::t1", "a.py::t2", "b.py::t1", "c.py::t1", "c.py::t2", "d.py::t1"]
    order = longest_files_first(ids, {"c.py": 90.0, "b.py": 10.0})
    assert [ids[i] for i in order] == ["c.py::t1", "c.py::t2", "b.py::t1", "a.py::t1", "a.py::t2", "d.py::t1"]


def test_without_figures_the_collection_order_stays() -> None:
    ids = ["b.py::x", "a.py::y", "a.py::z"]
    assert longest_files_first(ids, {}) == [0, 1, 2]


def test_recorded_tests_add_up_per_file() -> None:
    assert per_file({"a.py::t1": 1.5, "a.py::t2[x]": 2.0, "b.py::t": 3.0}) == {"a.py": 3.5, "b.py": 3.0}
