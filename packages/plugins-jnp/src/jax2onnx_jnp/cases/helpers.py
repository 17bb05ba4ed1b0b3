"""Helpers for this pack's testcases: transformed variants and dtype-aware op checks."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import onnx
from jax2onnx.testing.runner import op_types


def grad_of_sum(fn: Callable[..., Any], argnums: int = 0) -> Callable[..., Any]:
    """``(loss, d loss / d x)`` for ``loss = sum(sin(fn(...)))``: the forward value feeds the
    backward pass, so a wrong forward result shows up in both outputs."""

    def loss(*args):
        return jnp.sum(jnp.sin(fn(*args)))

    return jax.value_and_grad(loss, argnums=argnums)


def _first_input_is_f32(model: onnx.ModelProto) -> bool:
    for inp in model.graph.input:
        return inp.type.tensor_type.elem_type == onnx.TensorProto.FLOAT
    return False


def on_f32_expect(*ops: str) -> Callable[[onnx.ModelProto], None]:
    """A ``check`` asserting ``ops`` in float32 exports. In float64 the lowering declines (no
    onnxruntime kernel for the op in double), and the decomposition must be there instead."""

    def check(model: onnx.ModelProto) -> None:
        found = op_types(model)
        if _first_input_is_f32(model):
            missing = [o for o in ops if o not in found]
            assert not missing, f"float32 export lacks {missing} (has {sorted(found)})"
        else:
            present = [o for o in ops if o in found]
            assert not present, f"float64 export uses {present}, which onnxruntime cannot run in double"

    return check


def positive_and_negative(rng: np.random.Generator, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    """Values across [-6, 6], so clipping and saturating branches are all reached."""
    return rng.uniform(-6.0, 6.0, size=shape).astype(dtype)


def on_symbolic_expect(*ops: str) -> Callable[[onnx.ModelProto], None]:
    """A ``check`` asserting ``ops`` when the export has a symbolic input dim (the static variant
    of the same case folds to a constant)."""

    def check(model: onnx.ModelProto) -> None:
        symbolic = any(d.dim_param for i in model.graph.input for d in i.type.tensor_type.shape.dim)
        if symbolic:
            found = op_types(model)
            missing = [o for o in ops if o not in found]
            assert not missing, f"symbolic export lacks {missing} (has {sorted(found)})"

    return check
