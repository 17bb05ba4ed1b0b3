"""``jnp.linalg.solve``, ``jnp.linalg.inv`` and ``jax.scipy.linalg.solve`` under ``target="onnxruntime"``:
onnxruntime's batched ``com.microsoft.Inverse`` instead of the unrolled LU.

The standard-ONNX lowering of a solve is JAX's own: LU with partial pivoting, one straight-line
step of ~16 nodes per column, then two triangular solves (the lax pack's ``lu`` and
``triangular_solve``). onnxruntime spends ~1 us per node whatever the node computes at these
sizes, so n = 64 costs ~1 ms where JAX-jit (LAPACK) takes 0.04 ms. ``com.microsoft.Inverse`` (a
contrib op of onnxruntime's CPU provider: Eigen's partial-pivoting LU inverse, ``[*, M, M]``
batched, float16/float32/float64 as the kernel table measures) is one node; a solve is then

    X0 = inv(A) B;   R = B - A X0;   X = X0 + inv(A) R

— the product with the inverse and one step of iterative refinement in working precision, which
brings the residual ``||A X - B|| / (||A|| ||X||)`` to JAX's (LAPACK getrs) level or below
(bench/results/linalg.md). ``inv`` is the Inverse node and one refinement step too,
``X + X (I - A X)``: Inverse alone has JAX's residual ``||A X - I|| / (||A|| ||X||)`` (n = 64 / 256,
float32, median of 5: 4.9e-8 / 1.1e-7 against JAX's 4.6e-8 / 1.1e-7), the step brings it to
1.1e-8 / 1.1e-8 for 0.034 -> 0.041 ms and 1.58 -> 1.89 ms (one thread).

Each call is a marked region whose body is the library's own function (``_common.mark``), so
whatever the lowering here does not take runs exactly what JAX computes: another target (generic,
web, tensorrt: standard ONNX only), a dtype the target's Inverse kernel lacks or that JAX computes
otherwise (complex, float16/bfloat16: declined), ``jax.scipy.linalg.solve(..., assume_a="pos")``
(Cholesky, not LU), and ``grad`` of the call (its transposed body differs from the recorded one).
Integer operands are cast to the result dtype, as the library's ``promote_dtypes_inexact`` does.
Inside ``jax.vmap`` the region is built outside the vmap(s) on the batched operands
(:func:`jax2onnx.fusion.call_in_vmaps`), its body the library function vmapped; the lowering
knows how many leading axes the vmaps added (``vmapped``) and whether ``b`` is a vector per
example (``vector``), and aligns the remaining batch axes as JAX's ``jnp.vectorize`` broadcasts
them (right-aligned, size-1 axes inserted after the vmapped ones). A matrix from outside the vmaps
shared by vmapped right-hand sides (``vmap(solve, in_axes=(None, 0))``) stays unbatched
(``a_mapped=False``): one Inverse, and in the body one LU as in JAX's vmap, not one per example.
Under nested vmaps such a shared matrix (a value from outside all of them) keeps the body: the
fusion kit lifts a region only when its outside values belong to the innermost vmap's parent.

Singular matrices: JAX (LAPACK getrf/getrs) and Inverse (Eigen's PartialPivLU) both divide by the
zero pivot and return inf/NaN, without an error; the Inverse node's own entries are JAX's ``inv``
entries, inf and NaN in the same places (zero, rank-1, repeated-row and repeated-column 3x3
matrices). The refinement step's products then spread that inf/NaN to every entry (``0 * inf``
is NaN): ``inv`` and ``solve`` of a singular matrix are NaN throughout (each affected right-hand
side of a solve), where JAX's have inf, -inf and NaN entries, and some finite ones (``solve`` of
the repeated-column matrix: ``[-inf, inf, 0.17]``). So ours is non-finite wherever JAX's is, but
NaN where JAX's may be inf or finite (tests/test_linalg_inverse.py). Reproducing JAX's pattern
would mean checking the pivots, the nodes this form saves.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

import jax
import numpy as np
import onnx_ir as ir
from jax2onnx import compat
from jax2onnx.dtypes import HALF_FLOATS
from jax2onnx.fusion import call_in_vmaps
from jax2onnx.plugin import Lowerings, is_array

from ._common import mark, mark_name, patches_for

lowerings = Lowerings()

#: the kernel table's name of onnxruntime's batched matrix inverse (jax2onnx.ir.runtime)
INVERSE = "com.microsoft.Inverse"


def _fused_dtype(ctx: Any) -> np.dtype | None:
    """The dtype the Inverse form computes in for this export, or None to lower the library's body:
    only where the export's target runs onnxruntime's contrib ops (``target="onnxruntime"``, asked of
    the export's target, never a module switch), and only the dtypes its Inverse kernel runs that JAX
    computes in themselves (not half floats)."""
    if not ctx.target.allows("Inverse", "com.microsoft"):
        return None
    dtype = np.dtype(ctx.avals_out[0].dtype)
    return dtype if dtype in ctx.kernel_dtypes(INVERSE, without=HALF_FLOATS) else None


def _inverse(ctx: Any, a: ir.Value, dtype: np.dtype) -> ir.Value:
    out = ctx.op.Inverse(a, _domain="com.microsoft")
    out.type = ir.TensorType(ir.DataType.from_numpy(dtype))  # no ONNX schema types a contrib op
    return out


# ---------------------------------------------------------------------------------------------
# solve


def _region(fn: Callable[..., Any], *arrays: Any, **_static: Any) -> Any:
    """A region's body: the library function (vmapped as the call was); the static params are the
    lowering's, not the function's."""
    return fn(*arrays)


def _solve_call(original: Callable[..., Any], a: Any, b: Any) -> Any:
    """``original(a, b)`` as the ``linalg_solve`` region (built outside enclosing vmaps)."""
    vector = np.ndim(b) == 1  # per example: inside a vmap, b is the per-example value here
    if compat.vmap_parts(a) is None and compat.vmap_parts(b) is not None:
        # one matrix, vmapped right-hand sides: ``a`` stays unbatched (one Inverse, and one LU in
        # the body rather than one per example, as JAX's own vmap of the solve)
        def shared(xs: list[Any], k: int, vmapped: Callable[..., Any]) -> Any:
            body = original
            for _ in range(k):
                body = jax.vmap(body, in_axes=(None, 0))
            return mark("linalg_solve", functools.partial(_region, body), a, xs[0], vector=vector, vmapped=k,
                        a_mapped=k == 0)

        return call_in_vmaps(shared, [b], reads=[a])

    def build(xs: list[Any], k: int, vmapped: Callable[..., Any]) -> Any:
        return mark("linalg_solve", functools.partial(_region, vmapped(original)), *xs, vector=vector, vmapped=k,
                    a_mapped=True)

    return call_in_vmaps(build, [a, b])


def _solvable(a: Any, b: Any) -> bool:
    return is_array(a) and is_array(b) and np.ndim(a) >= 2 and np.ndim(b) >= 1


def _make_solve(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def solve(a, b, *args, **kwargs):
        if not args and not kwargs and _solvable(a, b):
            return _solve_call(original, a, b)
        return original(a, b, *args, **kwargs)

    return solve


def _make_scipy_solve(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
    signature = inspect.signature(original)

    @functools.wraps(original)
    def solve(a, b, *args, **kwargs):
        try:
            bound = signature.bind(a, b, *args, **kwargs)
        except TypeError:
            bound = None
        # assume_a "gen"/"sym"/"her" is jnp.linalg.solve's LU in jax.scipy (lower, overwrite_*,
        # debug and check_finite unused); "pos" is a Cholesky solve: left to the library
        if bound is not None and bound.arguments.get("assume_a", "gen") in ("gen", "sym", "her") and _solvable(a, b):
            rest = {k: v for k, v in bound.arguments.items() if k not in ("a", "b")}
            return _solve_call(functools.partial(_scipy_solve_with, original, rest), a, b)
        return original(a, b, *args, **kwargs)

    return solve


def _scipy_solve_with(original: Callable[..., Any], options: dict[str, Any], a: Any, b: Any) -> Any:
    return original(a, b, **options)


@lowerings.register_call(mark_name("linalg_solve"))
def lower_solve(ctx: Any, a: ir.Value, b: ir.Value) -> ir.Value | None:
    dtype = _fused_dtype(ctx)
    if dtype is None:
        return None
    params = ctx.marked.params
    k, vector = int(params["vmapped"]), bool(params["vector"])
    k_a = k if params["a_mapped"] else 0  # a matrix shared by the vmapped right-hand sides has no vmapped axes
    a_aval, b_aval = ctx.avals_in
    a, b = ctx.cast(a, dtype), ctx.cast(b, dtype)
    if vector:
        b = ctx.op.Unsqueeze(b, ctx.i64([-1]))
    # jnp.vectorize broadcasts the batch axes of one example right-aligned; MatMul would align the
    # vmapped axes with them, so the shorter example's batch gets size-1 axes after the vmapped ones
    # (MatMul itself supplies the vmapped axes an unmapped matrix lacks: they are in front)
    a_batch = len(a_aval.shape) - k_a - 2
    b_batch = len(b_aval.shape) - k - (1 if vector else 2)
    if a_batch < b_batch:
        a = ctx.op.Unsqueeze(a, ctx.i64(range(k_a, k_a + b_batch - a_batch)))
    elif b_batch < a_batch:
        b = ctx.op.Unsqueeze(b, ctx.i64(range(k, k + a_batch - b_batch)))
    a_inv = _inverse(ctx, a, dtype)
    x = ctx.op.MatMul(a_inv, b)
    # one step of iterative refinement: the residual of the explicit-inverse product, solved again
    residual = ctx.op.Sub(b, ctx.op.MatMul(a, x))
    x = ctx.op.Add(x, ctx.op.MatMul(a_inv, residual))
    return ctx.op.Squeeze(x, ctx.i64([-1])) if vector else x


# ---------------------------------------------------------------------------------------------
# inv


def _make_inv(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def inv(a, *args, **kwargs):
        if not args and not kwargs and is_array(a) and np.ndim(a) >= 2:
            def build(xs: list[Any], k: int, vmapped: Callable[..., Any]) -> Any:
                return mark("linalg_inv", functools.partial(_region, vmapped(original)), xs[0])

            return call_in_vmaps(build, [a])
        return original(a, *args, **kwargs)

    return inv


@lowerings.register_call(mark_name("linalg_inv"))
def lower_inv(ctx: Any, a: ir.Value) -> ir.Value | None:
    dtype = _fused_dtype(ctx)
    if dtype is None:
        return None
    a = ctx.cast(a, dtype)
    x = _inverse(ctx, a, dtype)
    # one step of iterative refinement, X + X (I - A X): the residual ||A X - I|| / (||A|| ||X||)
    # falls 4-10x below JAX's for 20% more time at n = 256 (module docstring); written with the
    # identity, not as 2X - X A X, whose cancellation would lose the correction
    n = ctx.avals_in[0].shape[-1]
    if isinstance(n, (int, np.integer)):
        eye = ctx.const(np.eye(int(n), dtype=dtype))
    else:
        eye = ctx.cast(ctx.op.EyeLike(ctx.op.ConstantOfShape(ctx.op.Shape(a, start=-2))), dtype)
    return ctx.op.Add(x, ctx.op.MatMul(x, ctx.op.Sub(eye, ctx.op.MatMul(a, x))))


patches = (
    patches_for("jax.numpy.linalg", ["solve"], _make_solve, reexports=())
    + patches_for("jax.numpy.linalg", ["inv"], _make_inv, reexports=())
    + patches_for("jax.scipy.linalg", ["solve"], _make_scipy_solve, reexports=())
)
