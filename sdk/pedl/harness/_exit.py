"""The harness's last act, shared by a spawned harness and a forked one."""

from __future__ import annotations

import os
import sys
import weakref

# At-exit finalizers that only undo this process's own in-memory state, which ends with it anyway.
# torch.library.Library leaves one per library (unregistering its kernels from torch's dispatcher):
# with torch._dynamo imported, about 170 of them, measured at 0.5-0.9 s of a harness's exit.
EXIT_ONLY_FINALIZERS = (("torch.library", "_del_library"),)


def skip_teardown_finalizers() -> int:
    """Stops the finalizers of EXIT_ONLY_FINALIZERS from running at exit (they still run if their
    object is collected before); every other at-exit finalizer, a TemporaryDirectory's cleanup or the
    trial's own, still runs. Returns how many were skipped."""
    targets = set()
    for module_name, attribute in EXIT_ONLY_FINALIZERS:
        module = sys.modules.get(module_name)
        function = getattr(module, attribute, None) if module is not None else None
        if function is not None:
            targets.add(function)
    if not targets:
        return 0
    skipped = 0
    # The registry of live finalizers is private to weakref, hence the care: where it is missing or
    # changed, every finalizer runs as usual.
    registry = getattr(weakref.finalize, "_registry", None)
    for finalizer in list(registry) if isinstance(registry, dict) else ():
        held = finalizer.peek()
        if held is not None and held[1] in targets and finalizer.atexit:
            finalizer.atexit = False
            skipped += 1
    return skipped


def flush_and_exit(code: int) -> None:
    """Flushes what the trial printed (a broken pipe must not stop the exit), then exits at once:
    no module teardown, which with torch loaded holds the slot for a good part of a second."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001 (exiting regardless)
            pass
    os._exit(code)
