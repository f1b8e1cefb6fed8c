"""What a user request can be refused with (the API turns these into gRPC status codes)."""


class UserError(ValueError):
    """A request the user must fix; its message is shown as is."""


class NotFound(LookupError):
    pass
