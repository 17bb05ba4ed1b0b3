"""``jax.nn.dot_product_attention`` → the opset-23 ``Attention`` op, else a MatMul/Softmax chain.

Layouts: JAX takes (B, T, N, H) queries and (B, S, K, H) keys/values (K divides N: grouped-query
attention) and returns (B, T, N, H). ONNX Attention's 3-D form takes (B, T, N*H) with
``q_num_heads``/``kv_num_heads``, so one Reshape per tensor replaces the four Transposes the 4-D
(B, N, T, H) form would need.

Masking follows JAX: logits = QK^T * scale + bias; masked positions are *replaced* by a large
negative number before the softmax (never zeroed after it), so huge masked logits cannot leak.
For the Attention op the boolean mask becomes an additive float mask (0 / -0.7*max): adding it
gives the same large negative number, and a fully masked row gets JAX's uniform weights, where a
boolean ``attn_mask`` would not. onnxruntime wants the mask's last two dims to be (T, S): it is
expanded there. ``is_causal`` is the op's attribute (top-left aligned, as ``jnp.tril`` in JAX).

The chain is used where Attention does not fit: float64 (JAX computes the softmax in float32; the
chain casts around its Softmax to match, the op would not), opset < 23, symbolic head counts or
sizes. Sequence-length and local-window masks, other dtypes and implementations decline.

``jax.nn.dot_product_attention`` is a plain Python function: its calls are found by the equations
they emit (their traceback passes through it, ``Lowerings.register_library``); the parameters are
read back from them and verified by core's retrace. No ``jax.nn`` attribute is replaced.
"""

from __future__ import annotations

import numpy as np
from jax2onnx.plugin import Lowerings

from ._common import is_static_int

lowerings = Lowerings()

_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
_OPTIONAL = {"query_seq_lengths", "key_value_seq_lengths", "local_window_size", "implementation", "return_residual"}


def _call(original, arrays, params):
    """How the verifying retrace calls ``jax.nn.dot_product_attention`` with the recognized params."""
    q, k, v, *rest = arrays
    bias = rest.pop(0) if params["has_bias"] else None
    mask = rest.pop(0) if params["has_mask"] else None
    return original(q, k, v, bias, mask, scale=params["scale"], is_causal=params["is_causal"])


_PASS_THROUGH = {"reshape", "broadcast_in_dim", "convert_element_type", "transpose", "squeeze", "expand_dims"}


def _source(v, producers, inputs):
    """The region input ``v`` comes from through shape-only equations (``_ensure_4d``'s reshape,
    the head-grouping reshape), or None."""
    for _ in range(8):
        if v in inputs:
            return v
        eqn = producers.get(v)
        if eqn is None or eqn.primitive.name not in _PASS_THROUGH or not eqn.invars:
            return None
        v = eqn.invars[0]
    return None


def recognize_attention(site):
    """``dot_product_attention(q, k, v, bias, mask, scale=, is_causal=)`` (the XLA form, no sequence
    lengths or local window): a plain function, so its region's operands come in order of first
    use. Query and key are the first ``dot_general``'s operands, value the second's; the boolean
    operand is the mask, the remaining float one the bias. ``scale`` is the literal the logits
    are multiplied by; ``is_causal`` adds an ``iota`` comparison."""
    inputs = list(site.operands)
    eqns = site.eqns()
    dots = [e for e in site.body.jaxpr.eqns if e.primitive.name == "dot_general"]
    if len(dots) != 2 or not 3 <= len(inputs) <= 5:
        return None
    producers = {v: e for e in site.body.jaxpr.eqns for v in e.outvars}
    q, k = (_source(x, producers, inputs) for x in dots[0].invars)
    v = next((s for s in (_source(x, producers, inputs) for x in dots[1].invars) if s is not None), None)
    if q is None or k is None or v is None or len({q, k, v}) != 3:
        return None
    if any(np.dtype(x.aval.dtype) not in _FLOATS or x.aval.dtype != q.aval.dtype for x in (q, k, v)):
        return None
    rest = [x for x in inputs if x not in (q, k, v)]
    masks = [x for x in rest if np.dtype(x.aval.dtype) == np.bool_]
    biases = [x for x in rest if x not in masks]
    if len(masks) > 1 or len(biases) > 1:
        return None
    scaled = next((e for e in site.body.jaxpr.eqns if e.primitive.name == "mul" and dots[0].outvars[0] in e.invars), None)
    scale = next((float(x.val) for x in scaled.invars if hasattr(x, "val")), None) if scaled is not None else None
    if scale is None:
        return None
    params = {"has_bias": bool(biases), "has_mask": bool(masks), "scale": scale,
              "is_causal": any(e.primitive.name == "iota" for e in eqns)}
    order = [inputs.index(x) for x in (q, k, v, *biases, *masks)]
    return params, order


def _large_negative(dtype):
    # JAX's constant; it stays within float32 range since its softmax runs in float32.
    return np.asarray(-0.7 * min(np.finfo(dtype).max, np.finfo(np.float32).max), dtype=dtype)


def _to_4d(ctx, x, rank):
    return x if rank == 4 else ctx.op.Unsqueeze(x, ctx.i64(range(4 - rank)))


@lowerings.register_library("jax.nn.dot_product_attention", recognize=recognize_attention, call=_call)
def lower_dot_product_attention(ctx, q, k, v, *rest):
    p = ctx.marked.params
    avals = ctx.avals_in
    rank = len(avals[0].shape)
    qs = (1,) * (4 - rank) + tuple(avals[0].shape)
    ks = (1,) * (4 - rank) + tuple(avals[1].shape)
    B, T, N, H = qs
    S, K = ks[1], ks[2]
    dtype = np.dtype(avals[0].dtype)
    scale = float(1.0 / np.sqrt(H)) if p["scale"] is None else float(p["scale"])
    q, k, v = (_to_4d(ctx, t, rank) for t in (q, k, v))
    rest = list(rest)
    bias = rest.pop(0) if p["has_bias"] else None
    mask = rest.pop(0) if p["has_mask"] else None
    if bias is not None:
        bias = ctx.cast(_to_4d(ctx, bias, len(avals[3].shape)), dtype)
    if mask is not None:
        mask = _to_4d(ctx, mask, len(avals[-1].shape))
    static_heads = all(is_static_int(d) for d in (N, K, H))
    if static_heads and N % K:
        return None
    if dtype == np.float32 and dtype in ctx.kernel_dtypes("Attention") and static_heads:  # none before opset 23
        out = _attention_op(ctx, q, k, v, bias, mask, T, S, N, K, H, scale, p["is_causal"], dtype)
    elif static_heads or str(N) == str(K):
        out = _matmul_chain(ctx, q, k, v, bias, mask, T, S, N, K, scale, p["is_causal"], dtype)
    else:
        return None
    return out if rank == 4 else ctx.op.Squeeze(out, ctx.i64([0]))


def _attention_op(ctx, q, k, v, bias, mask, T, S, N, K, H, scale, is_causal, dtype):
    attn_mask = None
    if mask is not None:
        attn_mask = ctx.op.Where(mask, bias if bias is not None else ctx.const(0, dtype),
                                 ctx.const(_large_negative(dtype)))
    elif bias is not None:
        attn_mask = bias
    if attn_mask is not None:  # onnxruntime needs the (T, S) dims spelled out; B and N broadcast
        attn_mask = ctx.op.Expand(attn_mask, ctx.shape_tensor([1, 1, T, S]))
    flat = ctx.i64([0, 0, -1])  # (B, T, N, H) -> (B, T, N*H): 0 copies the dim
    y = ctx.op.Attention(ctx.op.Reshape(q, flat), ctx.op.Reshape(k, flat), ctx.op.Reshape(v, flat), attn_mask,
                         q_num_heads=int(N), kv_num_heads=int(K), scale=scale, is_causal=int(is_causal))
    return ctx.op.Reshape(y, ctx.i64([0, 0, int(N), int(H)]))


def _causal_mask(ctx, T, S):
    if is_static_int(T) and is_static_int(S):
        return ctx.const(np.tril(np.ones((int(T), int(S)), dtype=bool)))
    rows = ctx.op.Range(0, ctx.dim_scalar(T), 1)
    cols = ctx.op.Range(0, ctx.dim_scalar(S), 1)
    return ctx.op.GreaterOrEqual(ctx.op.Unsqueeze(rows, ctx.i64([1])), ctx.op.Unsqueeze(cols, ctx.i64([0])))


def _matmul_chain(ctx, q, k, v, bias, mask, T, S, N, K, scale, is_causal, dtype):
    if str(N) != str(K):  # grouped-query attention: query head n reads key/value head n // (N/K)
        heads = ctx.const(np.arange(int(N), dtype=np.int64) // (int(N) // int(K)))
        k, v = ctx.op.Gather(k, heads, axis=2), ctx.op.Gather(v, heads, axis=2)
    logits = ctx.op.MatMul(ctx.op.Transpose(q, perm=[0, 2, 1, 3]), ctx.op.Transpose(k, perm=[0, 2, 3, 1]))
    logits = ctx.op.Mul(logits, scale)
    if bias is not None:
        logits = ctx.op.Add(logits, bias)
    keep = mask
    if is_causal:
        causal = _causal_mask(ctx, T, S)
        keep = causal if keep is None else ctx.op.And(keep, causal)
    if keep is not None:
        logits = ctx.op.Where(keep, logits, ctx.const(_large_negative(dtype)))
    # JAX runs the softmax in float32 whatever the input dtype.
    probs = ctx.cast(ctx.op.Softmax(ctx.cast(logits, np.float32), axis=-1), dtype)
    out = ctx.op.MatMul(probs, ctx.op.Transpose(v, perm=[0, 2, 1, 3]))
    return ctx.op.Transpose(out, perm=[0, 2, 1, 3])

