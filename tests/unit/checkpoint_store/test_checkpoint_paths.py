import pytest

from pedl.checkpoints.paths import validate_relpath
from pedl_checkpoint_store.errors import InvalidArgument
from pedl_checkpoint_store.paths import validate_relpath as server_validate


@pytest.mark.parametrize("path", ["a", "a/b/c.pt", "model.state_dict", "x..y", ".hidden/file"])
def test_accepts_relative_paths(path: str) -> None:
    assert validate_relpath(path) == path


@pytest.mark.parametrize(
    ("path", "why"),
    [
        ("", "empty"),
        ("/etc/passwd", "absolute"),
        ("C:/x", "absolute"),
        ("../x", "'..'"),
        ("a/../../x", "'..'"),
        ("a//b", "empty or '.'"),
        ("a/./b", "empty or '.'"),
        ("a/", "empty or '.'"),
        ("a\\b", "backslash"),
        ("a\x00b", "NUL"),
    ],
)
def test_rejects_unsafe_paths_saying_why(path: str, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        validate_relpath(path)
    with pytest.raises(InvalidArgument, match=why):
        server_validate(path)
