"""lax ``dot_general`` → one ``MatMul`` where the dimension numbers map onto it, else ``Einsum``.

``MatMul`` follows numpy's matmul: ``[..., M, K] @ [..., K, N]``. ``dot_general`` puts batch dims
first, then the lhs free dims, then the rhs free dims, so MatMul fits when there is one
contracting dim and either (no batch dims and at most one rhs free dim: ``x @ W`` for any rank of
``x``) or (batch dims with exactly one free dim on each side: batched matmul). Operands are
transposed into that layout when needed; a constant operand's Transpose folds into its
initializer. Every other combination is one ``Einsum`` with the same contraction.
"""

from __future__ import annotations

import string

import numpy as np
from jax2onnx.plugin import Lowerings

from . import complex_pairs as cp

lowerings = Lowerings()

#: dtypes onnxruntime multiplies natively (MatMul and Einsum); narrower integers go through int32.
_NATIVE = {np.dtype(t) for t in ("float16", "float32", "float64", "int32", "int64", "uint32", "uint64")}


def _transpose(ctx, x, perm):
    if list(perm) == list(range(len(perm))):
        return x
    return ctx.op.Transpose(x, perm=list(perm))


def compute_dtype(dtype: np.dtype) -> np.dtype:
    if dtype in _NATIVE or dtype.name == "bfloat16":
        return dtype
    if dtype.kind in "iub":
        return np.dtype(np.int32)  # wraps modulo 2**8/2**16 like JAX once cast back
    return dtype


def _einsum(ctx, lhs, rhs, lc, rc, lb, rb, lrank, rrank):
    letters = iter(string.ascii_letters)
    lhs_sub = [""] * lrank
    rhs_sub = [""] * rrank
    for dl, dr in zip(lb, rb, strict=True):
        lhs_sub[dl] = rhs_sub[dr] = next(letters)
    for dl, dr in zip(lc, rc, strict=True):
        lhs_sub[dl] = rhs_sub[dr] = next(letters)
    for d in range(lrank):
        lhs_sub[d] = lhs_sub[d] or next(letters)
    for d in range(rrank):
        rhs_sub[d] = rhs_sub[d] or next(letters)
    lfree = [d for d in range(lrank) if d not in lc and d not in lb]
    rfree = [d for d in range(rrank) if d not in rc and d not in rb]
    out = [lhs_sub[d] for d in lb] + [lhs_sub[d] for d in lfree] + [rhs_sub[d] for d in rfree]
    equation = f"{''.join(lhs_sub)},{''.join(rhs_sub)}->{''.join(out)}"
    return ctx.op.Einsum(lhs, rhs, equation=equation)


@lowerings.register("dot_general")
def lower_dot_general(ctx, lhs, rhs):
    (lc, rc), (lb, rb) = ctx.params["dimension_numbers"]
    lc, rc, lb, rb = (tuple(int(d) for d in ds) for ds in (lc, rc, lb, rb))
    lrank, rrank = len(ctx.avals_in[0].shape), len(ctx.avals_in[1].shape)
    out_dtype = np.dtype(ctx.avals_out[0].dtype)
    dims = (lc, rc, lb, rb, lrank, rrank)
    if cp.is_complex(out_dtype):
        return _complex_dot(ctx, lhs, rhs, dims, cp.part_dtype(out_dtype))
    compute = compute_dtype(out_dtype)
    if np.dtype(ctx.avals_in[0].dtype) != compute:
        lhs = ctx.cast(lhs, compute)
    if np.dtype(ctx.avals_in[1].dtype) != compute:
        rhs = ctx.cast(rhs, compute)
    out = _real_dot(ctx, lhs, rhs, dims)
    return out if compute == out_dtype else ctx.cast(out, out_dtype)


def _complex_dot(ctx, lhs, rhs, dims, part):
    """(A + Bi)(C + Di) = (AC - BD) + (AD + BC)i: four real products (XLA's complex dot forms the
    same sums; Gauss's three-product trick would round differently). A real operand has no
    imaginary part, so its products with it are skipped."""
    def parts(v, aval):
        if cp.is_complex(aval):
            return [cp.real_part(ctx, v), cp.imag_part(ctx, v)]
        return [v if np.dtype(aval.dtype) == part else ctx.cast(v, part), None]

    (a, b), (c, d) = parts(lhs, ctx.avals_in[0]), parts(rhs, ctx.avals_in[1])
    products = {}
    for name, x, y in (("ac", a, c), ("bd", b, d), ("ad", a, d), ("bc", b, c)):
        if x is not None and y is not None:
            products[name] = _real_dot(ctx, x, y, dims)
    re = ctx.op.Sub(products["ac"], products["bd"]) if "bd" in products else products["ac"]
    im = [products[k] for k in ("ad", "bc") if k in products]
    if not im:  # two real operands with a complex preferred type
        return cp.from_real(ctx, re, len(ctx.avals_out[0].shape))
    return cp.from_parts(ctx, re, ctx.op.Add(*im) if len(im) == 2 else im[0])


def _real_dot(ctx, lhs, rhs, dims):
    lc, rc, lb, rb, lrank, rrank = dims
    lfree = [d for d in range(lrank) if d not in lc and d not in lb]
    rfree = [d for d in range(rrank) if d not in rc and d not in rb]
    plain = not lb and len(rfree) <= 1  # x @ W, x of any rank, W of shape [K] or [K, N]
    batched = lb and len(lfree) == 1 and len(rfree) == 1
    if len(lc) == 1 and (plain or batched):
        a = _transpose(ctx, lhs, [*lb, *lfree, *lc])
        b = _transpose(ctx, rhs, [*rb, *rc, *rfree])
        return ctx.op.MatMul(a, b)
    return _einsum(ctx, lhs, rhs, lc, rc, lb, rb, lrank, rrank)
