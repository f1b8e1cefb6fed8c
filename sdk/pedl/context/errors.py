"""The one error type for packing and unpacking model definitions."""


class ContextError(ValueError):
    """A model definition that cannot be packed, or an archive that is unsafe to unpack."""
