"""A text-filtered page of experiments: what matches, and where the next page goes on from."""

from __future__ import annotations

import json

from pedl_scheduler import experiment_listing


def _row(exp_id: int, description: str = "", labels: tuple[str, ...] = ()) -> dict:
    config = {"description": description, "searcher": {"name": "random"}}
    return {"id": exp_id, "config_json": json.dumps(config), "owner": "ann", "description": None,
            "labels_json": json.dumps(list(labels))}  # fmt: skip


ROWS = [_row(i, "needle" if i % 10 == 0 else "hay") for i in range(1, 101)]


def fetch(after_id: int, n: int) -> list[dict]:
    return [r for r in ROWS if r["id"] > after_id][:n]


def test_text_matches_id_description_owner_searcher_and_labels() -> None:
    row = _row(42, "Digits <b>", ("Fast",))
    for text in ("42", "digits <B>", "ANN", "random", "fast"):
        assert experiment_listing.matches_text(row, text), text
    assert not experiment_listing.matches_text(row, "grid")
    patched = _row(7, "old") | {"description": "new words"}
    assert experiment_listing.matches_text(patched, "new") and not experiment_listing.matches_text(
        patched, "old"
    )


def test_a_text_filter_fills_pages_across_reads_and_goes_on_after_the_last_match() -> None:
    rows, token = experiment_listing.page(fetch, 0, 3, "needle")
    assert [r["id"] for r in rows] == [10, 20, 30] and token == "30"
    rows, token = experiment_listing.page(fetch, 90, 3, "needle")
    assert [r["id"] for r in rows] == [100] and token == ""


def test_a_long_scan_answers_with_what_it_found_and_a_token_to_go_on() -> None:
    rows, token = experiment_listing.page(fetch, 0, 3, "needle", scan_rows=12)
    assert [r["id"] for r in rows] == [10] and token == "12"
    rows, token = experiment_listing.page(fetch, int(token), 3, "needle", scan_rows=12)
    assert [r["id"] for r in rows] == [20] and token == "24"


def test_without_text_a_page_is_one_read() -> None:
    rows, token = experiment_listing.page(fetch, 0, 4)
    assert [r["id"] for r in rows] == [1, 2, 3, 4] and token == "4"
