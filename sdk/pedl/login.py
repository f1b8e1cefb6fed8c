"""Kept for scripts that call `pedl.login.login(master, user, password)`; the code is pedl.auth.login."""

from pedl.auth.login import login

__all__ = ["login"]
