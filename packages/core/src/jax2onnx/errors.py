"""Errors a user can meet. Each message names the culprit and the fix."""

from __future__ import annotations


class Jax2OnnxError(Exception):
    """Base class of every error jax2onnx raises on purpose."""


class InputSpecError(Jax2OnnxError, ValueError):
    """An input spec (shape tuple, ShapeDtypeStruct, array) or ``input_params`` is malformed."""


class UnsupportedPrimitiveError(Jax2OnnxError, NotImplementedError):
    """No installed plugin pack lowers a primitive the traced function uses."""

    def __init__(self, primitive: str, location: str | None, pack_hint: str | None, installed: list[str]):
        self.primitive = primitive
        self.location = location
        self.pack_hint = pack_hint
        where = f" at {location}" if location else ""
        msg = f"No lowering for JAX primitive '{primitive}'{where}."
        if pack_hint and pack_hint not in installed:
            msg += f" It is provided by the plugin pack '{pack_hint}': pip install {pack_hint}"
        elif pack_hint:
            msg += f" The installed pack '{pack_hint}' should provide it but did not register it."
        else:
            msg += (
                " No known pack provides it; write a lowering with "
                "@jax2onnx.hookimpl def jax2onnx_lowerings(): ... (see jax2onnx.plugin)."
            )
        msg += f" Installed packs: {', '.join(installed) or 'none'}."
        super().__init__(msg)


class LoweringError(Jax2OnnxError):
    """A lowering failed; wraps the original error with the primitive and the user's line."""


class PluginConflictError(Jax2OnnxError):
    """Two plugin packs claim the same primitive at the same priority."""


class UserFunctionError(Jax2OnnxError):
    """The user's own function raised while being traced; the original is chained."""
