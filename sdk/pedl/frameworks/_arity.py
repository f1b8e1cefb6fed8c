"""Trial methods whose arguments changed across releases (`build_model(self, hparams)` in the seed,
`build_model(self)` in PEDL 0.11 and Determined): the harness always passes hparams, so methods a
subclass defines without them are wrapped to ignore them."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterable
from typing import Any


def _positional(fn: Callable[..., Any]) -> int | None:
    params = list(inspect.signature(fn).parameters.values())
    if any(p.kind is p.VAR_POSITIONAL for p in params):
        return None
    return len([p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)])


def accept_hparams(cls: type, names: Iterable[str]) -> None:
    """Lets `cls.<name>(self)` also be called as `cls.<name>(self, hparams)`."""
    for name in names:
        fn = cls.__dict__.get(name)
        if not inspect.isfunction(fn) or _positional(fn) != 1:
            continue

        def make(method: Callable[..., Any]) -> Callable[..., Any]:
            @functools.wraps(method)
            def without_hparams(self: Any, *_ignored: Any) -> Any:
                return method(self)

            return without_hparams

        setattr(cls, name, make(fn))
