"""Where a Trial class lives inside a context directory, as an entrypoint."""

from __future__ import annotations

import inspect
import sys
from pathlib import Path
from typing import Any

from pedl.model_def import ModelDefinitionError


def entrypoint_for(trial_def: type, context_dir: Path) -> str:
    """`<module>:<object reference>` of `trial_def` relative to `context_dir` (seed 001's form)."""
    source = inspect.getsourcefile(trial_def)
    if source is None:
        raise ModelDefinitionError(f"cannot tell which file defines {trial_def.__qualname__}")
    root = context_dir.resolve()
    path = Path(source).resolve()
    if not path.is_relative_to(root):
        raise ModelDefinitionError(
            f"trial_def {trial_def.__qualname__} is defined in {path}, outside context_dir {root}: "
            "the context directory must hold the code of the trial"
        )
    relative = path.relative_to(root).with_suffix("")
    parts = list(relative.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return f"{'.'.join(parts)}:{trial_def.__qualname__}"


def data_functions(trial_def: type) -> tuple[Any, Any]:
    """`make_data_loaders` (required unless the interface builds its own data) and `download_data`
    from the module defining the trial."""
    module = sys.modules.get(trial_def.__module__)
    make = getattr(module, "make_data_loaders", None)
    if make is None and getattr(trial_def, "uses_make_data_loaders", True):
        raise ModelDefinitionError(
            f"module {trial_def.__module__} defining {trial_def.__qualname__} has no make_data_loaders()"
        )
    return make, getattr(module, "download_data", None)
