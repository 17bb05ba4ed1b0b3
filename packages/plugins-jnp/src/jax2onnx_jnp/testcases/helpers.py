"""Helpers for this pack's testcases: transformed variants, input domains and variant-aware checks."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import onnx
from jax2onnx.testing import Variant
from jax2onnx.testing.runner import op_types

Check = Callable[[onnx.ModelProto, Variant], None]


def grad_of_sum(fn: Callable[..., Any], argnums: int = 0) -> Callable[..., Any]:
    """``(loss, d loss / d x)`` for ``loss = sum(sin(fn(...)))``: the forward value feeds the
    backward pass, so a wrong forward result shows up in both outputs."""

    def loss(*args):
        return jnp.sum(jnp.sin(fn(*args)))

    return jax.value_and_grad(loss, argnums=argnums)


def fused_in_float32(*ops: str) -> dict[str, Any]:
    """Testcase fields for a lowering that emits ``ops`` in float32 and declines in float64, where
    onnxruntime has no exact double kernel for them and the lax decomposition is lowered instead:
    the float32 graph holds ``ops``, the float64 graph none of them."""

    def check(model: onnx.ModelProto, variant: Variant) -> None:
        if variant.double:
            present = [o for o in ops if o in op_types(model)]
            assert not present, f"float64 export uses {present}, which onnxruntime cannot run in double"

    return {"expected_ops": list(ops), "expected_ops_f64": (), "check": check}


def positive_and_negative(rng: np.random.Generator, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    """Values across [-6, 6], so clipping and saturating branches are all reached."""
    return rng.uniform(-6.0, 6.0, size=shape).astype(dtype)


def on_symbolic_expect(*ops: str) -> Check:
    """A ``check`` asserting ``ops`` in the symbolic variants (the static variant of the same case
    folds them to a constant)."""

    def check(model: onnx.ModelProto, variant: Variant) -> None:
        if variant.symbolic:
            found = op_types(model)
            missing = [o for o in ops if o not in found]
            assert not missing, f"symbolic export lacks {missing} (has {sorted(found)})"

    return check
