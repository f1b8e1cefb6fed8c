"""ScriptTrial: the Trial class standing for a Simple Model Definition's script.

It lets the script go through the same model-definition and controller-building code as every
Trial (harness, local mode, test mode): its controller (picked by `pedl.harness.controllers`)
runs the script up to its `model.fit(...)` and returns a KerasTrialController for the captured call.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from pedl.trial import Trial

if TYPE_CHECKING:
    from pedl.harness.distributed import ProcessGroup


class ScriptTrial(Trial):
    framework_interface = "Simple Model Definition (Keras script)"
    # The script loads its own data.
    uses_make_data_loaders = False
    directory: ClassVar[Path]
    script: ClassVar[str]
    args: ClassVar[tuple[str, ...]]
    # The script's model, set by the controller once model.fit() is captured.
    model: Any

    @classmethod
    def for_script(cls, directory: Path, script: str, args: Sequence[str] = ()) -> type[ScriptTrial]:
        """A ScriptTrial class bound to `script` (relative to `directory`) and its arguments."""
        return type(
            cls.__name__,
            (cls,),
            {"directory": Path(directory).resolve(), "script": script, "args": tuple(str(a) for a in args)},
        )

    @classmethod
    def start_workers(cls, group: ProcessGroup) -> None:
        """On several slots: starts this process's MultiWorkerMirroredStrategy before the script
        runs; the script then runs under its scope (see `pedl.simple`)."""
        from pedl.keras._distributed import start_workers

        start_workers(group)
