"""Cursor pages for list RPCs: the token is the last id of the page before (opaque to clients)."""

from __future__ import annotations

DEFAULT_PAGE, MAX_PAGE = 500, 2000


class PageError(ValueError):
    pass


def page_size(requested: int) -> int:
    if requested < 0:
        raise PageError(f"page_size must be 0 or more, got {requested}")
    return min(requested or DEFAULT_PAGE, MAX_PAGE)


def after_id(token: str) -> int:
    """The id a page_token continues after; 0 for the first page."""
    if not token:
        return 0
    if not token.isdigit() or len(token) > 19:
        raise PageError(f"page_token {token[:40]!r} is not one this scheduler issued")
    return int(token)


def next_token(ids: list[int], limit: int) -> str:
    """ "" when the page came back short (nothing follows), else the page's last id."""
    return str(ids[-1]) if len(ids) == limit and ids else ""
