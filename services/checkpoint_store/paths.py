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
