"""The ``jax2onnx`` command line (commands; usage: its one-line errors and the checks before any work), and the docs' coverage tables it renders (coverage).

What a pack's verb (entry-point group ``jax2onnx.cli``: ``register(subparsers)``, the verb's function
run with the parsed arguments) needs is public here, and packs import it from ``jax2onnx.cli``, never
from its modules (tests/test_layout_rules.py):

- :class:`CliError`: a user mistake on the command line, printed as one line (exit status 2, or its ``code``);
- :func:`check_writable`: the output path (a file, or with ``folder=True`` a folder to replace) can be
  written, checked before any work;
- :func:`load_target`: the object a ``module:attr`` or ``path/to/file.py:attr`` argument names.
"""

from .commands import EXIT_CODES, load_target, main
from .usage import CliError, check_writable

__all__ = ["EXIT_CODES", "CliError", "check_writable", "load_target", "main"]
