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

Nothing in the library is patched: ``jnp.linalg.solve``/``inv`` are jitted and
``jax.scipy.linalg.solve`` calls the jitted ``jax._src.scipy.linalg._solve``, so each call is a
``jit`` equation core recognizes (:mod:`._library`). What the lowering does not take lowers that
body, exactly what JAX computes: another target (generic, web, tensorrt: standard ONNX only), a
dtype the target's Inverse kernel lacks or that JAX computes otherwise (complex,
float16/bfloat16: declined), ``jax.scipy.linalg.solve(..., assume_a="pos")`` (Cholesky, not LU:
its body is not the LU one, the verifying re-trace declines), and ``grad`` of the call (its
transposed body differs). Integer operands are cast to the result dtype, as the library's
``promote_dtypes_inexact`` does. Inside ``jax.vmap`` the equation's body is the function
vmapped; the recognizer finds how (how many vmaps, which operand each maps: ``vmapped``,
``a_mapped``, ``b_mapped``) by re-tracing the few ways a call can be vmapped until one gives that
very body, and whether ``b`` is a vector per example (``vector``). The lowering aligns the remaining
batch axes as JAX's ``jnp.vectorize`` broadcasts them (right-aligned, size-1 axes inserted after the
vmapped ones). A matrix shared by vmapped right-hand sides (``vmap(solve, in_axes=(None, 0))``)
stays unbatched: one Inverse, and in the body one LU as in JAX's vmap, not one per example.

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
from collections.abc import Callable
from typing import Any

import jax
import numpy as np
import onnx_ir as ir
from jax2onnx.dtypes import HALF_FLOATS
from jax2onnx.plugin import Lowerings

from ._library import literal_value

lowerings = Lowerings()

#: the kernel table's name of onnxruntime's batched matrix inverse (jax2onnx.ir.runtime)
INVERSE = "com.microsoft.Inverse"

#: The ways a call may be vmapped that the recognizers try: per vmap level, whether ``a`` and
#: ``b`` are mapped (a matrix shared by mapped right-hand sides, or one right-hand side shared by
#: mapped matrices).
_MAPPINGS = ((True, True), (False, True), (True, False))


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
# recognizing a (possibly vmapped) call


def _vmapped(fn: Callable[..., Any], k: int, mapped: tuple[bool, ...]) -> Callable[..., Any]:
    for _ in range(k):
        fn = jax.vmap(fn, in_axes=tuple(0 if m else None for m in mapped))
    return fn


def _jit_bodies(closed: Any) -> list[str]:
    """The text of every jit body in a traced jaxpr (nested ones included)."""
    out = []

    def walk(jaxpr: Any) -> None:
        for e in jaxpr.eqns:
            inner = e.params.get("jaxpr")
            if inner is not None and hasattr(inner, "jaxpr"):
                out.append(str(inner))
                walk(inner.jaxpr)

    walk(closed.jaxpr)
    return out


def _find_mapping(site: Any, call: Callable[..., Any], params: dict[str, Any], ks: range) -> dict[str, Any] | None:
    """The first ``params`` + ``{"vmapped": k, "mapped": (...)}`` whose re-trace at the site's avals
    has the site's very body (core verifies the answer again), or None."""
    target = str(site.body)
    specs = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in site.avals_in]
    n = len(specs)
    for k in ks:
        for mapped in [(True,) * n] if k == 0 else [m[:n] for m in dict.fromkeys(_MAPPINGS)]:
            if n == 1 and k and mapped != (True,):
                continue
            candidate = {**params, "vmapped": k, "mapped": mapped}
            try:
                traced = jax.make_jaxpr(lambda *xs, c=candidate: call(None, xs, c))(*specs)
            except Exception:  # noqa: BLE001 - not a way this call can have been made
                continue
            if target in _jit_bodies(traced):
                return candidate
    return None


def _arrays_only(site: Any, n: int) -> bool:
    return len(site.operands) == n and all(literal_value(site, i) is None for i in range(n)) and all(
        np.dtype(a.dtype).kind != "c" for a in site.avals_in
    )


# ---------------------------------------------------------------------------------------------
# solve


def _solve_original() -> Callable[..., Any]:
    return jax.numpy.linalg.solve


def call_solve(original: Any, arrays: Any, params: dict[str, Any]) -> Any:
    """``solve(a, b)`` vmapped ``params["vmapped"]`` times with ``params["mapped"]`` in_axes."""
    fn = original if original is not None else _solve_original()
    return _vmapped(fn, params["vmapped"], params["mapped"])(*arrays)


def _solve_params(site: Any, call: Callable[..., Any], static: dict[str, Any]) -> dict[str, Any] | None:
    if not _arrays_only(site, 2):
        return None
    a, b = site.avals_in
    if len(a.shape) < 2 or len(b.shape) < 1:
        return None
    found = _find_mapping(site, call, static, range(0, max(len(a.shape) - 2, len(b.shape) - 1) + 1))
    if found is None:
        return None
    k, b_mapped = found["vmapped"], found["mapped"][1]
    # per example: b's rank without its vmapped axes (jnp.linalg.solve: a vector when 1-D)
    found["vector"] = len(b.shape) - (k if b_mapped else 0) == 1
    return found


def recognize_solve(site: Any) -> dict[str, Any] | None:
    """``solve(a, b)``: nothing static; under vmap, how the call was vmapped."""
    return _solve_params(site, call_solve, {})


def call_scipy_solve(original: Any, arrays: Any, params: dict[str, Any]) -> Any:
    from jax._src.scipy import linalg as scipy_linalg  # the jitted _solve jax.scipy.linalg.solve calls

    fn = functools.partial(original if original is not None else scipy_linalg._solve, assume_a=params["assume_a"],
                           lower=params["lower"])
    return _vmapped(fn, params["vmapped"], params["mapped"])(*arrays)


def recognize_scipy_solve(site: Any) -> dict[str, Any] | None:
    """``_solve(a, b, assume_a, lower)``: "gen", "sym" and "her" are the same LU solve (one body);
    "pos" is a Cholesky solve, whose body the re-trace of an LU one does not match."""
    return _solve_params(site, call_scipy_solve, {"assume_a": "gen", "lower": False})


def _lower_solve(ctx: Any, a: ir.Value, b: ir.Value) -> ir.Value | None:
    dtype = _fused_dtype(ctx)
    if dtype is None:
        return None
    params = ctx.marked.params
    k, vector = int(params["vmapped"]), bool(params["vector"])
    a_mapped, b_mapped = params["mapped"]
    k_a, k_b = (k if a_mapped else 0), (k if b_mapped else 0)  # an unmapped operand has no vmapped axes
    a_aval, b_aval = ctx.avals_in
    a, b = ctx.cast(a, dtype), ctx.cast(b, dtype)
    if vector:
        b = ctx.op.Unsqueeze(b, ctx.i64([-1]))
    # jnp.vectorize broadcasts the batch axes of one example right-aligned; MatMul would align the
    # vmapped axes with them, so the shorter example's batch gets size-1 axes after the vmapped ones
    # (MatMul itself supplies the vmapped axes an unmapped operand lacks: they are in front)
    a_batch = len(a_aval.shape) - k_a - 2
    b_batch = len(b_aval.shape) - k_b - (1 if vector else 2)
    if a_batch < b_batch:
        a = ctx.op.Unsqueeze(a, ctx.i64(range(k_a, k_a + b_batch - a_batch)))
    elif b_batch < a_batch:
        b = ctx.op.Unsqueeze(b, ctx.i64(range(k_b, k_b + a_batch - b_batch)))
    a_inv = _inverse(ctx, a, dtype)
    x = ctx.op.MatMul(a_inv, b)
    # one step of iterative refinement: the residual of the explicit-inverse product, solved again
    residual = ctx.op.Sub(b, ctx.op.MatMul(a, x))
    x = ctx.op.Add(x, ctx.op.MatMul(a_inv, residual))
    return ctx.op.Squeeze(x, ctx.i64([-1])) if vector else x


lowerings.register_library("jax.numpy.linalg.solve", recognize=recognize_solve, call=call_solve)(_lower_solve)
lowerings.register_library("jax._src.scipy.linalg:_solve", recognize=recognize_scipy_solve,
                           call=call_scipy_solve)(_lower_solve)


# ---------------------------------------------------------------------------------------------
# inv


def call_inv(original: Any, arrays: Any, params: dict[str, Any]) -> Any:
    fn = original if original is not None else jax.numpy.linalg.inv
    return _vmapped(fn, params["vmapped"], (True,))(*arrays)


def recognize_inv(site: Any) -> dict[str, Any] | None:
    """``inv(a)``: nothing static; under vmap, how many vmaps."""
    if not _arrays_only(site, 1) or len(site.avals_in[0].shape) < 2:
        return None
    return _find_mapping(site, call_inv, {}, range(0, len(site.avals_in[0].shape) - 1))


@lowerings.register_library("jax.numpy.linalg.inv", recognize=recognize_inv, call=call_inv)
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
