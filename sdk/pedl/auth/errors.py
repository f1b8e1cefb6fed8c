"""The one error every client-side auth module raises for input a user or operator must fix."""


class AuthConfigError(ValueError):
    """A secret, token or certificate file that cannot be used."""
