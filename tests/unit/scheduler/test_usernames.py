"""Usernames follow Determined 0.38.1's rules, so its users' names (and its e2e tests') are pedl's."""

from __future__ import annotations

import pytest

from pedl_scheduler.usernames import InvalidUsername, clean_username


@pytest.mark.parametrize(
    "name",
    [
        "rename-user-$64",
        "al",
        "first last",
        "a+b#c%d&e*f(g)h[i]{j}<k>'l\"m`n~o!p^q|r\\s/t,u;v:w=x?y",
        "x" * 255,
    ],
)
def test_any_printable_ascii_name_of_two_or_more_characters_is_kept(name: str) -> None:
    assert clean_username(name, current="someone", admin=False) == name


def test_surrounding_whitespace_is_dropped_as_determineds_master_does() -> None:
    assert clean_username("  bob \t", current="bob", admin=False) == "bob"


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("", "2 to 255 characters"),
        ("   a  ", "2 to 255 characters"),
        ("x" * 256, "2 to 255 characters"),
        ("zoë", "not 'ë'"),
        ("a\u00a0b", "not '\\xa0'"),  # a hidden space
        ("a\tb", "not '\\t'"),
        ("line\nbreak", "not '\\n'"),
    ],
)
def test_bad_names_are_refused_saying_why(name: str, why: str) -> None:
    with pytest.raises(InvalidUsername) as refused:
        clean_username(name, current="someone", admin=False)
    assert str(refused.value).startswith(f"invalid username {name!r}: ") and why in str(refused.value)


def test_only_an_admin_is_called_admin_and_nobody_becomes_determined() -> None:
    for name in ("admin", "Admin", " ADMIN "):
        with pytest.raises(InvalidUsername, match="only an admin may be called 'admin'"):
            clean_username(name, current="bob", admin=False)
    assert clean_username("Admin", current="root", admin=True) == "Admin"
    with pytest.raises(InvalidUsername, match="no user may become 'determined'"):
        clean_username("Determined", current="bob", admin=True)
    # The user already called so (Determined's e2e setup creates one) keeps the name.
    assert clean_username("determined", current="determined", admin=False) == "determined"
