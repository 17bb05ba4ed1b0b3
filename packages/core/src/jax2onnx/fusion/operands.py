"""Lowering side: a region's operands by name, the body's equations, and weight helpers."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx_ir as ir

from ..compat import call_body, sub_jaxprs
from ..ir.constants import constant_array

# ---------------------------------------------------------------------------------------------
# Lowering side


class Operands:
    """The region's operands by name: ``ops["kernel"]`` (an ``ir.Value``) and ``ops.shape("kernel")``."""

    def __init__(self, ctx: Any, ins: Sequence[ir.Value]):
        names = ctx.marked.params["operands"]
        self._values = dict(zip(names, ins, strict=True))
        self._avals = dict(zip(names, ctx.avals_in, strict=True))

    def __getitem__(self, name: str) -> ir.Value:
        return self._values[name]

    def get(self, name: str) -> ir.Value | None:
        return self._values.get(name)

    def __contains__(self, name: str) -> bool:
        return name in self._values

    def aval(self, name: str) -> Any:
        return self._avals[name]

    def shape(self, name: str) -> tuple[Any, ...]:
        return tuple(self._avals[name].shape)


def one_output_like(ctx: Any, shape: Sequence[Any], dtype: Any = None) -> bool:
    """The equation is the forward call itself: one output of the expected shape (and ``dtype``).

    Under ``grad`` JAX splits the region into a forward part with the same name and inputs but
    extra (residual) outputs; that one must be lowered as its body, not fused.
    """
    outs = ctx.avals_out
    return (
        len(outs) == 1
        and (dtype is None or np.dtype(outs[0].dtype) == np.dtype(dtype))
        and [str(d) for d in outs[0].shape] == [str(d) for d in shape]
    )


def region_body(ctx: Any) -> Any:
    """The region's traced body (a closed jaxpr): the library's own equations."""

    return call_body(ctx.eqn)


def find_eqns(closed: Any, name: str) -> list[Any]:
    """Equations named ``name`` in ``closed`` and its nested jaxprs (the region's body)."""

    found = []
    stack = [closed]
    while stack:
        j = stack.pop()
        jaxpr = j.jaxpr if hasattr(j, "jaxpr") else j
        for eqn in jaxpr.eqns:
            if eqn.primitive.name == name:
                found.append(eqn)
            stack.extend(sub_jaxprs(eqn))
    return found


def static_ints(values: Sequence[Any]) -> bool:
    return all(isinstance(d, (int, np.integer)) for d in values)


#: The numpy value of a constant (an initializer, a folded value, a ``Constant`` node), else None;
#: ``lazy=False``: None for a lazy weight too (reading it would load it now, which a ``Weights``
#: source exists to avoid). Core's one constant reader (:mod:`jax2onnx.ir.constants`).
const_array = constant_array


def reshape_const(ctx: Any, v: ir.Value, shape: Sequence[int]) -> ir.Value:
    """A weight reshaped to a static ``shape``: a new initializer when the weight is one (the
    folding pass leaves large results of nodes with shared inputs, such as a pooled shape
    constant, unfolded), else a Reshape."""
    arr = const_array(v, lazy=False)
    if arr is not None:
        return ctx.const(arr.reshape(list(shape)))
    return ctx.op.Reshape(v, ctx.i64(list(shape)))


def concat_weights(ctx: Any, values: Sequence[ir.Value], axis: int) -> ir.Value:
    """Weights joined along ``axis`` by a Concat node, never by ``np.concatenate`` at lowering time:
    that joined copy would sit beside the caller's own weights for the whole export (GPT-2 small's
    fused Q|K|V: 81 MiB, a sixth of its weights). The folding pass joins small ones (the copy is
    then the only one the model keeps); onnxruntime folds the rest when it loads the model."""
    return ctx.op.Concat(*values, axis=axis)


def matmul_bias(ctx: Any, x: ir.Value, kernel: ir.Value, bias: ir.Value | None, x_rank: int) -> ir.Value:
    """``x @ kernel + bias``: Gemm for a 2-D ``x``, else MatMul (+ Add)."""
    if x_rank == 2:
        return ctx.op.Gemm(x, kernel, bias)
    y = ctx.op.MatMul(x, kernel)
    return y if bias is None else ctx.op.Add(y, bias)


