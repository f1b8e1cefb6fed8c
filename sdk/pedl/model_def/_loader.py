"""Finding the Trial class, `make_data_loaders` and `download_data` in a model definition.

Seeds 000/001/004: with no entrypoint the package `__init__.py` (or the only .py file of a
single-file model definition) must expose exactly one Trial subclass and `make_data_loaders`;
with an entrypoint `<module>:<object reference>` the class is looked up there, and the data
functions in that module first, then in `__init__.py`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from pedl.model_def._entrypoint import Entrypoint, parse_entrypoint
from pedl.model_def._importing import import_package, import_submodule
from pedl.model_def._suggest import suggested_entrypoint
from pedl.model_def.errors import ModelDefinitionError, describe
from pedl.trial import Trial, is_framework_base


@dataclass(frozen=True)
class ModelDefinition:
    directory: Path
    # Import name of the model definition's package.
    package: str
    trial_class: type[Trial]
    # None only for trial classes that declare `uses_make_data_loaders = False` (EstimatorTrial).
    make_data_loaders: Callable[[dict[str, Any], dict[str, Any]], Any] | None
    download_data: Callable[[dict[str, Any], dict[str, Any]], str] | None


def _module_file(module: ModuleType, root: Path) -> str:
    file = getattr(module, "__file__", None)
    if not file:
        return f"{module.__name__} (no __init__.py)"
    try:
        return str(Path(file).resolve().relative_to(root.resolve()))
    except ValueError:
        return file


def _trial_candidates(module: ModuleType) -> list[type[Trial]]:
    found: list[type[Trial]] = []
    for value in vars(module).values():
        if (
            isinstance(value, type)
            and issubclass(value, Trial)
            and not is_framework_base(value)
            and value not in found
        ):
            found.append(value)
    return found


def _single_file_module(package: ModuleType, directory: Path) -> ModuleType:
    sources = sorted(p for p in directory.glob("*.py"))
    if len(sources) != 1:
        listed = ", ".join(p.name for p in sources) or "none"
        raise ModelDefinitionError(
            f"model definition {directory} has no __init__.py and {len(sources)} Python files at its top "
            f"level ({listed}); add an __init__.py exposing the trial class and make_data_loaders, "
            "or set entrypoint: '<module>:<TrialClass>' in the experiment config"
        )
    return import_submodule(package, sources[0].stem, directory)


def _find_trial_without_entrypoint(module: ModuleType, directory: Path) -> type[Trial]:
    candidates = _trial_candidates(module)
    where = _module_file(module, directory)
    if len(candidates) == 1:
        return candidates[0]
    if not candidates:
        suggestion = suggested_entrypoint(directory)
        fix = (
            f"add `{suggestion}` to the experiment config"
            if suggestion
            else "set entrypoint: '<module>:<TrialClass>' in the experiment config"
        )
        raise ModelDefinitionError(
            f"{where} exposes no Trial subclass (such as a pedl.pytorch.PyTorchTrial); define or import "
            f"exactly one there, or {fix}"
        )
    listed = ", ".join(describe(c, directory) for c in candidates)
    raise ModelDefinitionError(
        f"{where} exposes {len(candidates)} Trial subclasses: {listed}; expose exactly one, or choose "
        "one with entrypoint: '<module>:<TrialClass>' in the experiment config"
    )


def _resolve_object(module: ModuleType, entrypoint: Entrypoint, directory: Path) -> Any:
    obj: Any = module
    walked: list[str] = []
    for part in entrypoint.object_ref.split("."):
        if not hasattr(obj, part):
            owner = ".".join(walked) or _module_file(module, directory)
            public = sorted(n for n in dir(obj) if not n.startswith("_"))
            raise ModelDefinitionError(
                f"entrypoint '{entrypoint}': {owner} has no attribute {part!r} "
                f"(it has: {', '.join(public) or 'nothing public'})"
            )
        obj = getattr(obj, part)
        walked.append(part)
    return obj


def _check_trial_class(obj: Any, origin: str, directory: Path) -> type[Trial]:
    if not (isinstance(obj, type) and issubclass(obj, Trial)):
        what = f"the class {describe(obj, directory)}" if isinstance(obj, type) else f"a {type(obj).__name__}"
        raise ModelDefinitionError(
            f"{origin} is {what}, not a subclass of a PEDL Trial interface such as pedl.pytorch.PyTorchTrial"
        )
    if is_framework_base(obj):
        raise ModelDefinitionError(f"{origin} is PEDL's own {obj.__qualname__}; name your subclass of it")
    missing = sorted(getattr(obj, "__abstractmethods__", ()))
    if missing:
        raise ModelDefinitionError(
            f"{describe(obj, directory)} does not implement the {obj.framework_interface} method(s): "
            f"{', '.join(missing)}"
        )
    return obj


def _find_function(modules: list[ModuleType], name: str, directory: Path) -> Callable[..., Any] | None:
    for module in modules:
        fn = getattr(module, name, None)
        if fn is None:
            continue
        if not callable(fn):
            raise ModelDefinitionError(
                f"{_module_file(module, directory)}: {name} must be a function, found a {type(fn).__name__}"
            )
        return fn
    return None


def _named_function(package: ModuleType, reference: str, field: str, directory: Path) -> Callable[..., Any]:
    """A data function PEDL 0.11's `entrypoints:` mapping names as '<module>:<name>'."""
    ep = parse_entrypoint(reference)
    module = import_submodule(package, ep.module, directory) if ep.module else package
    fn = _resolve_object(module, ep, directory)
    if not callable(fn):
        raise ModelDefinitionError(
            f"entrypoints.{field} '{reference}' is a {type(fn).__name__}, not a function"
        )
    return fn


def load_model_definition(
    directory: Path | str,
    entrypoint: str | None = None,
    data_loaders_function: str | None = None,
    download_data_function: str | None = None,
) -> ModelDefinition:
    """Imports the model definition at `directory` and finds its trial class and data functions.

    The data functions are `make_data_loaders`/`download_data` beside the trial class (or in
    `__init__.py`), unless PEDL 0.11's `entrypoints:` mapping names them (the last two arguments).

    Raises ModelDefinitionError (naming file and line where it can) for anything wrong in it.
    """
    directory = Path(directory).resolve()
    if not directory.is_dir():
        raise ModelDefinitionError(f"model definition directory {directory} does not exist")
    package = import_package(directory)
    has_init = (directory / "__init__.py").is_file()

    if entrypoint:
        ep = parse_entrypoint(entrypoint)
        if not ep.module and not has_init:
            raise ModelDefinitionError(
                f"entrypoint ':{ep.object_ref}' names the top-level __init__.py, but {directory} has none"
            )
        module = import_submodule(package, ep.module, directory) if ep.module else package
        found = _resolve_object(module, ep, directory)
        trial_class = _check_trial_class(found, f"entrypoint '{ep.module}:{ep.object_ref}'", directory)
    else:
        module = package if has_init else _single_file_module(package, directory)
        trial_class = _check_trial_class(
            _find_trial_without_entrypoint(module, directory), "the trial class", directory
        )

    search = [module] if module is package else [module, package]
    make_data_loaders: Callable[..., Any] | None
    download_data: Callable[..., Any] | None
    if data_loaders_function is not None:
        make_data_loaders = _named_function(
            package, data_loaders_function, "data_loaders_function", directory
        )
    else:
        make_data_loaders = _find_function(search, "make_data_loaders", directory)
    if make_data_loaders is None and getattr(trial_class, "uses_make_data_loaders", True):
        where = " or ".join(_module_file(m, directory) for m in search)
        raise ModelDefinitionError(
            f"model definition {directory.name} defines no make_data_loaders(experiment_config, hparams) "
            f"in {where}"
        )
    if download_data_function is not None:
        download_data = _named_function(package, download_data_function, "download_data_function", directory)
    elif hasattr(trial_class, "trial_context_class"):
        # Determined's Trial API (built from a context) has no download_data hook: a function of
        # that name there is the example's own helper, which its trial calls itself with its own
        # arguments (0.15 to 0.20's cifar10_tf_keras: `from data import download_data` in model_def).
        download_data = None
    else:
        download_data = _find_function(search, "download_data", directory)
    return ModelDefinition(
        directory=directory,
        package=package.__name__,
        trial_class=trial_class,
        make_data_loaders=make_data_loaders,
        download_data=download_data,
    )
