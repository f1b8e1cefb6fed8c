"""Running the user's script up to its `keras.Model.fit(...)` call and capturing that call.

The script runs with runpy as `__main__` (sys.argv = [script, *args], cwd and sys.path[0] = the
model definition directory) with `keras.Model.fit` patched. The patched fit records the model
and its arguments and raises `FitIntercepted`, a BaseException so that a script's
`except Exception` does not swallow it; the script is unwound and PEDL trains the captured
model itself. So `fit` never returns to the script and code after it does not run. Keras 2's
`fit_generator`, `evaluate_generator` and `predict_generator` (removed in Keras 3) are there while
the script runs, as aliases of `fit`, `evaluate` and `predict`.
"""

from __future__ import annotations

import contextlib
import inspect
import os
import runpy
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pedl.model_def.errors import ModelDefinitionError, from_user_exception


@dataclass(frozen=True)
class FitCall:
    """One `model.fit(...)` call: the model and every argument by name (defaults filled in)."""

    model: Any
    arguments: dict[str, Any]
    # "train.py:42", the line of the script (or its helper modules) that called fit.
    where: str


class FitIntercepted(BaseException):
    """Unwinds the script once its fit call is captured."""


def script_path(directory: Path, script: str) -> Path:
    """The script's path inside `directory`, or a ModelDefinitionError saying what is missing."""
    path = (directory / script).resolve()
    if not path.is_relative_to(directory.resolve()):
        raise ModelDefinitionError(
            f"entrypoint script {script!r} lies outside the model definition {directory}"
        )
    if not path.is_file():
        listed = ", ".join(sorted(p.name for p in directory.glob("*.py"))) or "none"
        raise ModelDefinitionError(
            f"entrypoint script {script!r} not found in the model definition {directory} "
            f"(its top-level Python files: {listed})"
        )
    return path


def _caller(directory: Path) -> str:
    """`file.py:line` of the innermost frame inside the model definition that called fit."""
    frame = inspect.currentframe()
    root = directory.resolve()
    while frame is not None:
        try:
            rel = Path(frame.f_code.co_filename).resolve().relative_to(root)
        except ValueError:
            frame = frame.f_back
            continue
        return f"{rel}:{frame.f_lineno}"
    return "model.fit"


@contextlib.contextmanager
def _patched_fit(directory: Path, calls: list[FitCall]) -> Iterator[None]:
    import keras

    original = keras.Model.fit
    owned = "fit" in vars(keras.Model)
    signature = inspect.signature(original)

    def fit(self: Any, *args: Any, **kwargs: Any) -> Any:
        where = _caller(directory)
        try:
            bound = signature.bind(self, *args, **kwargs)
        except TypeError as e:
            raise TypeError(f"{where}: model.fit(): {e}") from None
        bound.apply_defaults()
        arguments = dict(bound.arguments)
        model = arguments.pop("self")
        arguments.update(arguments.pop("kwargs", None) or {})
        calls.append(FitCall(model, arguments, where))
        raise FitIntercepted()

    fit.__doc__ = "PEDL's stand-in for keras.Model.fit: captures the call; PEDL runs the training."
    keras.Model.fit = fit
    added = [name for name in KERAS2_ALIASES if not hasattr(keras.Model, name)]
    for name in added:
        setattr(keras.Model, name, KERAS2_ALIASES[name])
    try:
        yield
    finally:
        for name in added:
            delattr(keras.Model, name)
        if owned:
            keras.Model.fit = original
        else:
            del keras.Model.fit


# Keras 2's loader knobs (max_queue_size, workers, use_multiprocessing) are accepted and unused:
# PEDL draws a generator's batches in order in the trial process, as a replay must see them.


def _fit_generator(
    self: Any,
    generator: Any,
    steps_per_epoch: int | None = None,
    epochs: int = 1,
    verbose: Any = 1,
    callbacks: Any = None,
    validation_data: Any = None,
    validation_steps: int | None = None,
    validation_freq: int = 1,
    class_weight: Any = None,
    max_queue_size: int = 10,
    workers: int = 1,
    use_multiprocessing: bool = False,
    shuffle: bool = True,
    initial_epoch: int = 0,
) -> Any:
    """Keras 2's `fit_generator`, as `fit(generator, ...)` (Keras 3 removed it)."""
    return self.fit(
        generator,
        steps_per_epoch=steps_per_epoch,
        epochs=epochs,
        verbose=verbose,
        callbacks=callbacks,
        validation_data=validation_data,
        validation_steps=validation_steps,
        validation_freq=validation_freq,
        class_weight=class_weight,
        shuffle=shuffle,
        initial_epoch=initial_epoch,
    )


def _evaluate_generator(
    self: Any,
    generator: Any,
    steps: int | None = None,
    callbacks: Any = None,
    max_queue_size: int = 10,
    workers: int = 1,
    use_multiprocessing: bool = False,
    verbose: Any = 0,
) -> Any:
    """Keras 2's `evaluate_generator`, as `evaluate(generator, steps=...)`."""
    return self.evaluate(generator, steps=steps, callbacks=callbacks, verbose=verbose)


def _predict_generator(
    self: Any,
    generator: Any,
    steps: int | None = None,
    callbacks: Any = None,
    max_queue_size: int = 10,
    workers: int = 1,
    use_multiprocessing: bool = False,
    verbose: Any = 0,
) -> Any:
    """Keras 2's `predict_generator`, as `predict(generator, steps=...)`."""
    return self.predict(generator, steps=steps, callbacks=callbacks, verbose=verbose)


KERAS2_ALIASES = {
    "fit_generator": _fit_generator,
    "evaluate_generator": _evaluate_generator,
    "predict_generator": _predict_generator,
}


@contextlib.contextmanager
def _script_process_state(directory: Path, argv: list[str]) -> Iterator[None]:
    """sys.argv, cwd and sys.path[0] as `python script args...` run in `directory` would have them:
    the script's own folder first (a nested script imports its siblings), then the model
    definition's root (packages beside the script's folder import too)."""
    saved_argv, saved_cwd = sys.argv, os.getcwd()
    sys.argv = argv
    os.chdir(directory)
    for text in dict.fromkeys([str(directory), str(Path(argv[0]).parent)]):
        if text in sys.path:
            sys.path.remove(text)
        sys.path.insert(0, text)
    try:
        yield
    finally:
        sys.argv = saved_argv
        os.chdir(saved_cwd)


def run_until_fit(directory: Path, script: str, args: Sequence[str] = ()) -> FitCall:
    """Runs `script` in `directory` until its first `model.fit(...)`; returns that call."""
    directory = Path(directory).resolve()
    path = script_path(directory, script)
    calls: list[FitCall] = []
    with _patched_fit(directory, calls), _script_process_state(directory, [str(path), *args]):
        try:
            runpy.run_path(str(path), run_name="__main__")
        except FitIntercepted:
            pass
        except SystemExit as e:
            if not calls and e.code not in (None, 0):
                raise ModelDefinitionError(
                    f"entrypoint script {script} exited with status {e.code!r} before calling model.fit() "
                    f"(arguments: {list(args)})"
                ) from None
        except Exception as exc:
            if not calls:
                raise from_user_exception(f"running {script}", exc, directory) from exc
    if not calls:
        raise ModelDefinitionError(
            f"entrypoint script {script} finished without calling model.fit(); a Simple Model "
            "Definition trains through one keras.Model.fit(...) call, which PEDL takes over"
        )
    return calls[0]
