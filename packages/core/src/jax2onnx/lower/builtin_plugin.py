"""Core's own plugin: registered first, through the same hooks third-party packs use."""

from __future__ import annotations

from ..plugin import Lowering, hookimpl
from .functions import FUNCTION_MARK, lower_function_call


@hookimpl
def jax2onnx_lowerings() -> list[Lowering]:
    return [Lowering(f"call:{FUNCTION_MARK}", lower_function_call)]
