"""``jnp.einsum`` → Einsum (``jnp.matmul`` / ``@``: the lax body's MatMul, see the end of this module).

Without this pack both become ``dot_general`` (plus transposes/reshapes for einsum's contraction
order); ONNX has an op that states the user's intent directly, with numpy's broadcasting rules.

``einsum`` is found in the trace with nothing patched (:mod:`._library`). It calls an inline jit
(``_einsum``), so no ``jit`` equation is left: it is recognized as a plain function, by the
equations whose traceback passes through it. It names its
inlined call after the subscripts (``named_call``), so the equations' name stack carries the
equation as the user wrote it. The operands' order is the one whose trace is the region's
(a region's inputs come in order of first use, ``dot_general b a`` for ``"ij,jk"`` sometimes).
"""

from __future__ import annotations

import itertools

import jax
import numpy as np
from jax2onnx.dtypes import BF16
from jax2onnx.plugin import Lowerings

lowerings = Lowerings()

#: how many operands a region may have for its argument order to be searched (n! traces)
_MAX_PERMUTED = 4


def _argument_order(site, call):
    """The order ``(i, ...)`` in which the region's inputs are ``call``'s arguments: the one whose
    trace is the region's jaxpr, or None. ``call(arrays)`` calls the library function."""
    n = len(site.operands)
    if n == 0 or any(site.literal(i) is not None for i in range(n)):
        return None
    specs = [jax.ShapeDtypeStruct(a.shape, a.dtype, weak_type=bool(getattr(a, "weak_type", False)))
             for a in site.avals_in]
    want = str(site.body.jaxpr)
    orders = itertools.permutations(range(n)) if n <= _MAX_PERMUTED else [tuple(range(n))]
    for order in orders:
        try:
            got = jax.make_jaxpr(lambda *xs, order=order: call([xs[i] for i in order]))(*specs)
        except Exception:  # noqa: BLE001 - these operands do not fit in this order
            continue
        if not got.consts and str(got.jaxpr) == want:
            return order
    return None


# ---------------------------------------------------------------------------------------------
# einsum


#: the characters of an einsum equation (a name-stack entry made of others is not one)
_EQUATION_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ,.-> ")


def _subscripts(site) -> str | None:
    """The equation ``jnp.einsum`` named its inlined call after: the last name-stack entry of every
    equation of the region (the same for all of them), or None."""
    names = {str(e.source_info.name_stack).rpartition("/")[2] for e in site.body.jaxpr.eqns}
    if len(names) != 1:
        return None
    (name,) = names
    return name if name and set(name) <= _EQUATION_CHARS else None


def _call_einsum(original, arrays, params):
    return original(params["subscripts"], *arrays)


def recognize_einsum(site):
    """``jnp.einsum(subscripts, *operands)``: the subscripts from the name stack, the operands'
    order from the one trace of ``einsum`` with them that is the region."""
    subscripts = _subscripts(site)
    if subscripts is None or len(site.avals_out) != 1:
        return None
    order = _argument_order(site, lambda xs: jax.numpy.einsum(subscripts, *xs))
    return None if order is None else ({"subscripts": subscripts}, order)


def explicit_equation(subscripts: str) -> str:
    """The einsum equation with its output spelled out (numpy's implicit rule: the letters that
    occur once, sorted, after any ellipsis), so ONNX and JAX agree on the output's axis order."""
    eq = subscripts.replace(" ", "")
    if "->" in eq:
        return eq
    letters = eq.replace("...", "").replace(",", "")
    once = sorted(c for c in set(letters) if letters.count(c) == 1)
    return eq + "->" + ("..." if "..." in eq else "") + "".join(once)


def _align_ellipses(ctx, equation: str, xs: list) -> tuple[list, list[list]]:
    """Give every operand's ellipsis the same rank. numpy broadcasts ellipsis dims right-aligned;
    ONNX's shape inference wants equal ellipsis ranks, so size-1 axes are inserted where the
    shorter ellipsis starts. Returns the operands and their shapes after that."""
    terms = equation.split("->")[0].split(",")
    ranks = []
    for term, aval in zip(terms, ctx.avals_in, strict=True):
        letters = len(term.replace("...", ""))
        ranks.append(len(aval.shape) - letters if "..." in term else None)
    widest = max((r for r in ranks if r is not None), default=0)
    out, shapes = [], []
    for term, x, r, aval in zip(terms, xs, ranks, ctx.avals_in, strict=True):
        shape = list(aval.shape)
        if r is not None and r < widest:
            pos = term.index("...")
            x = ctx.op.Unsqueeze(x, ctx.i64(range(pos, pos + widest - r)))
            shape[pos:pos] = [1] * (widest - r)
        out.append(x)
        shapes.append(shape)
    return out, shapes


def _broadcast_labels(ctx, equation: str, xs: list, shapes: list[list]) -> list:
    """Expand a lettered axis of size 1 to the size the same letter has in another operand.

    JAX's einsum broadcasts a size-1 axis against its letter's size elsewhere (``"...BTNH,
    ...BSNH"`` with B = 1 in one operand and 2 in the other), as it does ellipsis dims; ONNX's
    Einsum wants a letter's sizes equal (shape inference rejects the model), so the size-1 axes are
    expanded first (an ``Expand`` to the other operand's size, from its ``Shape`` when symbolic)."""
    terms = equation.split("->")[0].split(",")
    axes_of = []  # per operand: letter -> its axes (ellipsis dims skipped)
    for term, shape in zip(terms, shapes, strict=True):
        head, _, tail = term.partition("...")
        letters = dict.fromkeys(head + tail)
        ellipsis = len(shape) - len(head) - len(tail) if "..." in term else 0
        positions = [*range(len(head)), *range(len(head) + ellipsis, len(shape))]
        axes = {c: [] for c in letters}
        for c, axis in zip(head + tail, positions, strict=True):
            axes[c].append(axis)
        axes_of.append(axes)
    size_of = {}
    for axes, shape in zip(axes_of, shapes, strict=True):
        for c, where in axes.items():
            for axis in where:
                if not (isinstance(shape[axis], int) and shape[axis] == 1):
                    size_of.setdefault(c, shape[axis])
    out = []
    for x, axes, shape in zip(xs, axes_of, shapes, strict=True):
        # Expand broadcasts: the axes that keep their size are 1 in its shape
        target: list = [1] * len(shape)
        expanded = False
        for c, where in axes.items():
            for axis in where:
                if isinstance(shape[axis], int) and shape[axis] == 1 and c in size_of:
                    target[axis], expanded = size_of[c], True
        if expanded:
            x = ctx.op.Expand(x, ctx.op.Concat(*[ctx.dim(d) for d in target], axis=0))
        out.append(x)
    return out


@lowerings.register_library("jax.numpy.einsum", recognize=recognize_einsum, call=_call_einsum)
def lower_einsum(ctx, *xs):
    dtype = np.dtype(ctx.avals_out[0].dtype)
    if dtype == np.bool_:
        return None  # ONNX's Einsum takes no bool (JAX's is any-of-ands): the lax body computes it in int32
    # ONNX's Einsum takes no bfloat16 either: float32 (exact products, one rounding at the end)
    compute = np.dtype(np.float32) if dtype == BF16 else dtype
    equation = explicit_equation(ctx.marked.params["subscripts"])
    xs, shapes = _align_ellipses(ctx, equation, [ctx.cast(x, compute) for x in xs])
    xs = _broadcast_labels(ctx, equation, xs, shapes)
    return ctx.cast(ctx.op.Einsum(*xs, equation=equation), dtype)


# ---------------------------------------------------------------------------------------------
# matmul


# ``jnp.matmul`` is ``jit(matmul, inline=True)``: its inlined equations are re-bound where the jit is
# called (no jit equation, no frame through ``matmul``), so nothing in the trace names it and no
# library lowering can key on it. Its lax body lowers to MatMul wherever dot_general maps onto one;
# batch axes that broadcast against each other (a squeeze, a dot_general, a transpose) are put back
# into one MatMul by the rewrite stage (``jax2onnx.passes.rewrite.matmul_broadcast``). No patch.

