"""The login page's `next` goes only to a path on this site: every known way out is refused.

Before: `/login?next=/%5Cevil.example/` sent the browser to http://evil.example/."""

from __future__ import annotations

import pytest

from pedl_webui.redirects import DEFAULT, safe_next

BYPASSES = [
    "/\\evil.example/",
    "/%5Cevil.example/",
    "/%5cevil.example/",
    "/%255Cevil.example/",  # decoded twice on the way
    "\\\\evil.example",
    "//evil.example",
    "//evil.example/experiments",
    "/%2F/evil.example",
    "/\t/evil.example",
    "/\n/evil.example",
    "/%09/evil.example",
    "https:evil.example",
    "https://evil.example/",
    "http:/evil.example",
    "javascript:alert(1)",
    "JaVaScRiPt:alert(1)",
    "data:text/html,<script>alert(1)</script>",
    "evil.example",
    "experiments",
    " /experiments",
    "",
    None,
    42,
    ["/experiments"],
    "/" + "a" * 5000,
]


@pytest.mark.parametrize("value", BYPASSES, ids=[repr(v)[:40] for v in BYPASSES])
def test_a_way_off_the_site_goes_to_the_default_page(value: object) -> None:
    assert safe_next(value) == DEFAULT


@pytest.mark.parametrize(
    "value", ["/experiments", "/experiments/3", "/trials/12?tab=logs#end", "/cluster", "/a%20b"]
)
def test_a_path_on_this_site_is_kept(value: str) -> None:
    assert safe_next(value) == value
