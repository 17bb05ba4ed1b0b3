"""The command line's user mistakes: :class:`CliError` (one line on stderr, exit status 2 unless
said otherwise) and the checks that raise it before any work is done."""

from __future__ import annotations

import os
import tempfile


class CliError(Exception):
    """A user mistake on the command line; printed as one line, exit status ``code``."""

    def __init__(self, message: str, code: int = 2):
        super().__init__(message)
        self.code = code


def check_writable(output: str, *, folder: bool = False) -> None:
    """Before converting: the output path is a file name (or with ``folder``, a folder to replace) in
    a folder this user can write (or create), so a typo in -o is a bad command line, not an error
    after minutes of converting. Packs' verbs call it too."""
    path = os.path.abspath(output)
    if not folder and os.path.isdir(path):
        raise CliError(f"-o {output}: is a folder; give the path of the file to write (in it, or elsewhere)")
    parent = os.path.dirname(path)
    while not os.path.exists(parent):  # the export creates missing folders: the nearest existing one counts
        parent = os.path.dirname(parent)
    problem = None if os.path.isdir(parent) and os.access(parent, os.W_OK | os.X_OK) else "permission denied"
    if problem is None:
        try:  # access() says yes to root everywhere: a file without a name (gone when closed) says for sure
            with tempfile.TemporaryFile(dir=parent):
                pass
        except OSError as exc:
            problem = exc.strerror or type(exc).__name__
    if problem is not None:
        raise CliError(f"-o {output}: cannot write in {parent} ({problem}); choose a folder you can write to")
