"""``jnp.einsum`` → Einsum and ``jnp.matmul`` / ``@`` → MatMul.

Without this pack both become ``dot_general`` (plus transposes/reshapes for einsum's contraction
order); ONNX has an op that states the user's intent directly, with numpy's broadcasting rules.
"""

from __future__ import annotations

import functools

import numpy as np
from jax2onnx.dtypes import BF16
from jax2onnx.plugin import Lowerings, is_array

from ._common import mark, mark_name, no_extra_kwargs, patches_for

lowerings = Lowerings()


# ---------------------------------------------------------------------------------------------
# einsum


def _einsum_region(original, *operands, subscripts):
    return original(subscripts, *operands)


def _make_einsum(name, original):
    region = functools.partial(_einsum_region, original)

    @functools.wraps(original)
    def einsum(subscripts, *operands, **kwargs):
        if (
            isinstance(subscripts, str)
            and operands
            and all(is_array(o) for o in operands)
            and no_extra_kwargs(kwargs, out=None, precision=None, preferred_element_type=None)
        ):
            return mark("einsum", region, *operands, subscripts=subscripts)
        return original(subscripts, *operands, **kwargs)

    return einsum


def explicit_equation(subscripts: str) -> str:
    """The einsum equation with its output spelled out (numpy's implicit rule: the letters that
    occur once, sorted, after any ellipsis), so ONNX and JAX agree on the output's axis order."""
    eq = subscripts.replace(" ", "")
    if "->" in eq:
        return eq
    letters = eq.replace("...", "").replace(",", "")
    once = sorted(c for c in set(letters) if letters.count(c) == 1)
    return eq + "->" + ("..." if "..." in eq else "") + "".join(once)


def _align_ellipses(ctx, equation: str, xs: list) -> list:
    """Give every operand's ellipsis the same rank. numpy broadcasts ellipsis dims right-aligned;
    ONNX's shape inference wants equal ellipsis ranks, so size-1 axes are inserted where the
    shorter ellipsis starts."""
    terms = equation.split("->")[0].split(",")
    ranks = []
    for term, aval in zip(terms, ctx.avals_in, strict=True):
        letters = len(term.replace("...", ""))
        ranks.append(len(aval.shape) - letters if "..." in term else None)
    widest = max((r for r in ranks if r is not None), default=0)
    out = []
    for term, x, r in zip(terms, xs, ranks, strict=True):
        if r is not None and r < widest:
            pos = term.index("...")
            x = ctx.op.Unsqueeze(x, ctx.i64(range(pos, pos + widest - r)))
        out.append(x)
    return out


@lowerings.register_call(mark_name("einsum"))
def lower_einsum(ctx, *xs):
    dtype = np.dtype(ctx.avals_out[0].dtype)
    if dtype == np.bool_:
        return None  # ONNX's Einsum takes no bool (JAX's is any-of-ands): the lax body computes it in int32
    # ONNX's Einsum takes no bfloat16 either: float32 (exact products, one rounding at the end)
    compute = np.dtype(np.float32) if dtype == BF16 else dtype
    equation = explicit_equation(ctx.marked.params["subscripts"])
    xs = _align_ellipses(ctx, equation, [ctx.cast(x, compute) for x in xs])
    return ctx.cast(ctx.op.Einsum(*xs, equation=equation), dtype)


# ---------------------------------------------------------------------------------------------
# matmul


#: result dtypes ONNX's MatMul schema does not take
_NO_MATMUL = frozenset(np.dtype(t) for t in (np.bool_, np.int8, np.int16, np.uint8, np.uint16))


def _make_matmul(name, original):
    @functools.wraps(original)
    def matmul(a, b, *args, **kwargs):
        if (
            not args
            and is_array(a)
            and is_array(b)
            and np.ndim(a) >= 1
            and np.ndim(b) >= 1
            and no_extra_kwargs(kwargs, precision=None, preferred_element_type=None)
        ):
            return mark("matmul", original, a, b)
        return original(a, b, *args, **kwargs)

    return matmul


@lowerings.register_call(mark_name("matmul"))
def lower_matmul(ctx, a, b):
    # ONNX MatMul has numpy.matmul's semantics (1-D promotion, batch broadcasting); JAX promotes
    # mixed operand dtypes first, so casting to the result dtype is the same computation.
    dtype = ctx.avals_out[0].dtype
    if np.dtype(dtype) in _NO_MATMUL:
        return None  # ONNX's MatMul takes no bool or 8/16-bit ints: the lax body computes in int32
    return ctx.op.MatMul(ctx.cast(a, dtype), ctx.cast(b, dtype))


patches = patches_for("jax.numpy", ["einsum"], _make_einsum) + patches_for("jax.numpy", ["matmul"], _make_matmul)
