"""The command line's user mistakes: :class:`CliError` (one line on stderr, exit status 2 unless
said otherwise) and the checks that raise it before any work is done."""

from __future__ import annotations

import errno
import os
import tempfile


class CliError(Exception):
    """A user mistake on the command line; printed as one line, exit status ``code``."""

    def __init__(self, message: str, code: int = 2):
        super().__init__(message)
        self.code = code


def check_writable(output: str, *, folder: bool = False, flag: str = "-o") -> None:
    """Before converting: the output path is a file name (or with ``folder``, a folder to replace) in
    a folder this user can write (or create), so a typo in -o is a bad command line, not an error
    after minutes of converting. Packs' verbs call it too. ``flag``: the option named in the error."""
    path = os.path.abspath(output)
    if not folder and os.path.isdir(path):
        raise CliError(f"{flag} {output}: is a folder; give the path of the file to write (in it, or elsewhere)")
    if folder and os.path.exists(path) and not os.path.isdir(path):
        raise CliError(f"{flag} {output}: is a file; give the path of the folder to write (a new or an earlier export's)")
    parent = os.path.dirname(path)
    while not os.path.lexists(parent):  # the export creates missing folders: the nearest existing one counts
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent):  # a file (or a link to nothing) where the path needs a folder
        what = "a link to nothing" if os.path.islink(parent) and not os.path.exists(parent) else "a file, not a folder"
        raise CliError(f"{flag} {output}: {parent} is {what}, so nothing can be written under it; choose another path")
    problem = None if os.access(parent, os.W_OK | os.X_OK) else errno.EACCES
    if problem is None:
        try:  # access() says yes to root everywhere: a file without a name (gone when closed) says for sure
            with tempfile.TemporaryFile(dir=parent):
                pass
        except OSError as exc:
            problem = exc.errno if exc.errno is not None else exc
    if problem is not None:
        raise CliError(f"{flag} {output}: cannot write in {parent} ({_why_not_writable(problem)}); "
                       "choose a folder you can write to")


def _why_not_writable(problem: int | OSError) -> str:
    """What an ``OSError`` creating a file in an existing folder means, in words: the system's own
    text can mislead (``/proc`` answers "No such file or directory" for a folder that exists)."""
    if isinstance(problem, OSError):
        return problem.strerror or type(problem).__name__
    if problem in (errno.EACCES, errno.EPERM):
        return "permission denied"
    if problem == errno.EROFS:
        return "a read-only file system"
    if problem in (errno.ENOSPC, errno.EDQUOT):
        return "no space left on the device"
    if problem in (errno.ENOENT, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EINVAL):
        return "the folder takes no new files: a virtual or special file system, such as /proc or /sys"
    return os.strerror(problem)
