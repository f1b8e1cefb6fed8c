"""Finding and loading the Trial class (and its data functions) in an unpacked model definition."""

from pedl.model_def._entrypoint import Entrypoint, parse_entrypoint
from pedl.model_def._loader import ModelDefinition, load_model_definition
from pedl.model_def.errors import ModelDefinitionError, describe

__all__ = [
    "Entrypoint",
    "ModelDefinition",
    "ModelDefinitionError",
    "describe",
    "load_model_definition",
    "parse_entrypoint",
]
