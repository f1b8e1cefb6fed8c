"""Page sizes and tokens of the scheduler's list RPCs."""

from __future__ import annotations

import pytest

from pedl_scheduler import paging


def test_page_size_defaults_and_caps() -> None:
    assert paging.page_size(0) == paging.DEFAULT_PAGE
    assert paging.page_size(7) == 7
    assert paging.page_size(10**6) == paging.MAX_PAGE
    with pytest.raises(paging.PageError, match="page_size must be 0 or more, got -1"):
        paging.page_size(-1)


def test_a_token_continues_after_the_last_id_of_a_full_page() -> None:
    assert paging.after_id("") == 0
    assert paging.next_token([3, 9], 2) == "9"
    assert paging.after_id(paging.next_token([3, 9], 2)) == 9
    assert paging.next_token([3], 2) == "" and paging.next_token([], 0) == ""


@pytest.mark.parametrize("token", ["abc", "-3", "1" * 25, "4 "])
def test_a_token_the_scheduler_did_not_issue_is_refused(token: str) -> None:
    with pytest.raises(paging.PageError, match="is not one this scheduler issued"):
        paging.after_id(token)
