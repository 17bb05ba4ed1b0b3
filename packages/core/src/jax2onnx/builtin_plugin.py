"""Core's own plugin: registered first, through the same hooks third-party packs use."""

from __future__ import annotations

from .hookspecs import hookimpl
from .plugin import Lowering


@hookimpl
def jax2onnx_lowerings() -> list[Lowering]:
    from .functions import FUNCTION_MARK, lower_function_call

    return [Lowering(f"call:{FUNCTION_MARK}", lower_function_call)]
