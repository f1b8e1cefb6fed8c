"""Upload paths are checked by the same rules the client uses, reported as InvalidArgument."""

from __future__ import annotations

from pedl.checkpoints import paths as _paths
from pedl_checkpoint_store.errors import InvalidArgument

parent_dirs = _paths.parent_dirs


def validate_relpath(path: str) -> str:
    try:
        return _paths.validate_relpath(path)
    except ValueError as e:
        raise InvalidArgument(str(e)) from None


class FileTree:
    """The files of one checkpoint, added one by one: each path safe, new, and no file where
    another file needs a directory."""

    def __init__(self) -> None:
        self.files: set[str] = set()
        self._dirs: set[str] = set()

    def add(self, path: str) -> None:
        validate_relpath(path)
        if path in self.files:
            raise InvalidArgument(f"file {path!r} was sent twice")
        if path in self._dirs:
            raise InvalidArgument(f"file {path!r} clashes with a directory of the same name")
        for d in parent_dirs(path):
            if d in self.files:
                raise InvalidArgument(f"file {path!r} is inside {d!r}, which is a file")
        self.files.add(path)
        self._dirs.update(parent_dirs(path))
