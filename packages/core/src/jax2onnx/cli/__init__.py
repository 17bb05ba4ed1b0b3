"""The ``jax2onnx`` command line (commands; usage: its one-line errors and the checks before any work), and the docs' coverage tables it renders (coverage)."""

from .commands import EXIT_CODES, main

__all__ = ["EXIT_CODES", "main"]
