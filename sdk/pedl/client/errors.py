"""The one error type of a failed conversation with the scheduler, whoever the caller is."""

from __future__ import annotations


class ClientError(Exception):
    """The scheduler refused or could not be reached; `message` is one line for a person.

    `bad_input` marks a mistake in what the user gave (an address, an id) rather than a cluster
    failure: the CLI exits 2 for it, as argparse does for usage errors."""

    def __init__(self, message: str, bad_input: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.bad_input = bad_input
