"""jax2onnx: convert JAX functions and Flax NNX models to ONNX.

    from jax2onnx import to_onnx
    model = to_onnx(fn, [("B", 30)])

Importing this package is cheap: plugin packs are found and loaded on the first conversion.
"""

from . import _lazy_imports  # noqa: F401  (first: keeps sympy out of the import path)
from ._version import __version__
from .errors import (
    InputSpecError,
    InvalidModelError,
    Jax2OnnxError,
    LoweringError,
    MissingDependencyError,
    PluginConflictError,
    TargetUnsupportedError,
    UnsupportedPrimitiveError,
    UserFunctionError,
)
from .export.allclose_compat import allclose, allclose_onnxruntime_web
from .export.conversion import to_onnx
from .export.program import ExportProgram, export_program
from .export.weights import Weights
from .lower import legacy_plugins as _legacy_plugins
from .lower.functions import onnx_function
from .plugin import hookimpl
from .precision import Precision, PrecisionError
from .verification.greedy import GreedyCheck
from .verification.options import Verify
from .verification.report import ExportReport, VerificationError, verify

_legacy_plugins.install()  # 0.17's plugin module paths (jax2onnx.plugins.plugin_system) onto the lowering API

__all__ = [
    "ExportProgram",
    "ExportReport",
    "GreedyCheck",
    "InputSpecError",
    "InvalidModelError",
    "Jax2OnnxError",
    "LoweringError",
    "MissingDependencyError",
    "PluginConflictError",
    "Precision",
    "PrecisionError",
    "TargetUnsupportedError",
    "UnsupportedPrimitiveError",
    "UserFunctionError",
    "VerificationError",
    "Verify",
    "Weights",
    "__version__",
    "allclose",
    "allclose_onnxruntime_web",
    "export_program",
    "hookimpl",
    "onnx_function",
    "to_onnx",
    "verify",
]
