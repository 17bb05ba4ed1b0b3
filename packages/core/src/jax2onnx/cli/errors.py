"""The command line's own error: a user mistake, printed as one line with its exit status."""

from __future__ import annotations


class CliError(Exception):
    """A user mistake on the command line; printed as one line, exit status ``code``."""

    def __init__(self, message: str, code: int = 2):
        super().__init__(message)
        self.code = code
