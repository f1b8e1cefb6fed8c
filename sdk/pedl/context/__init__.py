"""Model definitions (context directories): pack them for upload, unpack them safely on agents."""

from pedl.context.errors import ContextError
from pedl.context.pack import DEFAULT_MAX_BYTES, PackedContext, model_definition_name, pack
from pedl.context.unpack import unpack

__all__ = ["ContextError", "DEFAULT_MAX_BYTES", "PackedContext", "model_definition_name", "pack", "unpack"]
