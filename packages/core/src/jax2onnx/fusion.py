"""The fusion kit: what a pack needs to turn a library's layer into one ONNX op.

A library pack (NNX, Linen, Equinox, Keras, ...) patches a layer's ``__call__`` to run it as a
:func:`jax2onnx.plugin.marked_call` region whose body is the library's own code, with the layer's
weights passed in as operands, and registers a ``call:<mark>`` lowering that emits the fused op or
returns ``None`` to decline (core then lowers the body). Everything here is independent of the
library: the pack supplies how to take its layer apart into named arrays and put it back together;
the kit does the rest.

- Region side: :func:`call_region` (the marked region with weights as named operands),
  :func:`path_name` (a pytree path as an operand name), :func:`static_bool`, and
  :func:`call_in_vmaps` (a layer called inside ``jax.vmap`` gets its region over the whole batch).
- Lowering side: :class:`Operands` (operands by name), :func:`one_output_like` (the forward call,
  not ``grad``'s forward part), :func:`region_body`/:func:`find_eqns` (read the library's own
  equations), weight helpers (:func:`const_array`, :func:`reshape_const`, :func:`concat_weights`,
  :func:`norm_weight`).
- Emission shared by several libraries: dense layers (:func:`lower_dense`,
  :func:`lower_dense_general`, :func:`lower_einsum_bias`), channels-last ↔ ONNX's channels-first layout
  (:func:`to_nchw`, :func:`to_nhwc`, :func:`channels_first`), convolutions read from the body's ``conv_general_dilated``
  (:func:`lower_conv_channels_last`, :func:`lower_conv_transpose_channels_last`), ``lax.reduce_window``
  pooling (:func:`pool_patches`, :func:`pool_region`, :func:`lower_max_pool_channels_last`,
  :func:`lower_avg_pool_channels_last`), the normalizations (:func:`lower_layer_norm`,
  :func:`lower_rms_norm`, :func:`lower_batch_norm`, :func:`lower_group_norm`,
  :func:`lower_instance_norm`) and attention (:func:`lower_dot_product_attention`,
  :func:`lower_multi_head_attention`, :func:`attention_inputs`, :func:`additive_mask`).

The normalization and channels-last lowerings read a region by convention: the input operand is
``"x"``, weights are ``"scale"``, ``"bias"``, ``"mean"``, ``"var"``, ``"kernel"``, and the static
params are named as each function says. A pack whose names differ uses the smaller helpers.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import onnx_ir as ir

from . import compat
from .dtypes import is_float
from .ir.constants import constant_array
from .plugin import Patch, is_array, marked_call

__all__ = [
    "Operands",
    "additive_mask",
    "attention_inputs",
    "body_conv",
    "call_in_vmaps",
    "call_region",
    "channels_first",
    "concat_weights",
    "conv_padding_mode",
    "dot_product_attention_region",
    "const_array",
    "find_eqns",
    "ints_per_axis",
    "is_array",
    "key_name",
    "lower_avg_pool_channels_last",
    "lower_batch_norm",
    "lower_conv_channels_last",
    "lower_dense",
    "lower_dense_general",
    "lower_einsum_bias",
    "lower_embedding_attend",
    "lower_embedding_lookup",
    "lower_conv_transpose_channels_last",
    "lower_dot_product_attention",
    "lower_group_norm",
    "lower_instance_norm",
    "lower_layer_norm",
    "lower_max_pool_channels_last",
    "lower_multi_head_attention",
    "lower_rms_norm",
    "matmul_bias",
    "max_pool",
    "max_pool_dtypes",
    "MAX_POOL_OPS",
    "norm_axes",
    "norm_weight",
    "one_output_like",
    "path_name",
    "pool_attrs",
    "pool_patches",
    "pool_region",
    "region_body",
    "reshape_const",
    "same_pads",
    "stash_type",
    "static_bool",
    "static_ints",
    "to_nchw",
    "to_nhwc",
]

# ---------------------------------------------------------------------------------------------
# Region side


def key_name(k: Any) -> str:
    """One entry of a pytree path as text: a dict key, an attribute name or a sequence index."""
    for attr in ("key", "name", "idx"):
        if hasattr(k, attr):
            return str(getattr(k, attr))
    return str(k)


def path_name(path: Sequence[Any], *, skip: int = 0, drop_trailing: Sequence[str] = ()) -> str:
    """A pytree path as an operand name (``"query/kernel"``): ``skip`` leading entries left out (a
    collection name), trailing entries in ``drop_trailing`` left out (a variable's own ``"value"``)."""
    parts = [key_name(k) for k in path[skip:]]
    while parts and parts[-1] in drop_trailing:
        parts.pop()
    return "/".join(parts)


def call_region(
    mark: str,
    run: Callable[..., Any],
    inputs: Mapping[str, Any],
    weights: Sequence[tuple[str, Any]],
    **static: Any,
) -> Any:
    """Evaluate ``run(weight_arrays, *input_arrays)`` as the marked region ``mark``.

    ``inputs`` are the call's array arguments (name → array), ``weights`` the layer's arrays
    (name → array, in the order ``run`` receives them as a list): both become the region's operands,
    so the region's body is a pure function of them and JAX can batch and differentiate it.
    ``static`` (hashable Python values) reaches the lowering as ``ctx.marked.params``, together with
    ``operands``: the names of all operands, which :class:`Operands` reads back.
    """
    names = tuple(inputs) + tuple(name for name, _ in weights)
    n_in = len(inputs)

    def region(*arrays: Any, **_: Any) -> Any:  # the static params come back as keywords
        return run(list(arrays[n_in:]), *arrays[:n_in])

    return marked_call(mark, region, *inputs.values(), *[v for _, v in weights], operands=names, **static)


def static_bool(x: Any) -> bool | None:
    """``x`` as a Python bool when it is static (Python/numpy bool), else None (a traced flag)."""
    if isinstance(x, (bool, np.bool_)):
        return bool(x)
    return None


# ---------------------------------------------------------------------------------------------
# Regions under ``jax.vmap``


def _vmap_of(xs: Sequence[Any], reads: Sequence[Any]) -> Any | None:
    """The innermost vmap trace ``xs`` belong to, when the call can run outside it: every input
    mapped by one vmap, everything else (unmapped inputs, ``reads``) a value from outside it."""

    trace = None
    for x in xs:
        parts = compat.vmap_parts(x) if x is not None else None
        if parts is None:
            continue
        if trace is None:
            trace = parts[0]
        elif parts[0] is not trace:
            return None
    if trace is None:
        return None
    parent = compat.vmap_parent(trace)
    for a in [*reads, *[x for x in xs if x is not None and compat.vmap_parts(x) is None]]:
        owner = compat.tracer_trace(a)
        if owner is not None and owner is not parent:
            return None
    return trace


def _with_batch_axis(x: Any, size: Any) -> Any:
    """``x`` with the vmap's axis in front (broadcast when the vmap does not map it)."""
    import jax.numpy as jnp


    parts = compat.vmap_parts(x)
    value, axis = (x, None) if parts is None else parts[1:]
    if axis is None:
        return jnp.broadcast_to(value, (size, *jnp.shape(value)))
    return value if axis == 0 else jnp.moveaxis(value, axis, 0)


def call_in_vmaps(build: Callable[..., Any], xs: Sequence[Any], *, reads: Sequence[Any] = ()) -> Any | None:
    """Build a layer's region over the whole batch when the call runs inside ``jax.vmap``.

    Inside ``vmap`` a layer sees per-example values; a region made there only gains the batch axis
    when JAX batches its body afterwards, and core then lowers the body instead of the fused op.
    When ``xs`` are per-example values of ``k`` nested vmaps (and ``reads``, the layer's weights,
    live outside them), ``build(batched_xs, k, vmapped)`` runs outside the vmaps on the inputs with
    the ``k`` batch axes in front (outermost first; a None stays None, one array passed twice
    stays one), and its result is handed back to the vmaps as the per-example value.
    ``vmapped(f)`` is ``jax.vmap`` applied ``k`` times: the region's body is the library's
    per-example code mapped, so a declining lowering still computes exactly what JAX's vmap does.
    Outside vmap (or when ``build`` declines there), ``build(xs, 0, identity)``. Returns ``build``'s
    result, None when it declines.
    """
    import contextlib

    import jax


    with contextlib.ExitStack() as outside:
        traces: list[Any] = []
        batched = list(xs)
        while (trace := _vmap_of(batched, reads)) is not None:
            size = compat.vmap_size(trace)
            outside.enter_context(compat.outside_vmap(trace))
            seen: dict[int, Any] = {}
            for i, x in enumerate(batched):
                if x is not None and id(x) not in seen:
                    seen[id(x)] = _with_batch_axis(x, size)
                batched[i] = None if x is None else seen[id(x)]
            traces.append(trace)
        out = None
        if traces:
            def vmapped(f: Callable[..., Any]) -> Callable[..., Any]:
                for _ in traces:
                    f = jax.vmap(f)
                return f

            out = build(batched, len(traces), vmapped)
    if out is None:
        return build(list(xs), 0, lambda f: f)
    for trace in reversed(traces):  # the outermost vmap's axis is in front
        out = compat.vmapped(trace, out, 0)
    return out


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

    return compat.call_body(ctx.eqn)


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
            stack.extend(compat.sub_jaxprs(eqn))
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


# ---------------------------------------------------------------------------------------------
# Dense layers: operands ``x``, ``kernel`` (in features..., out features...), optional ``bias``


def lower_dense(ctx: Any, *ins: ir.Value) -> ir.Value | None:
    """``x @ kernel + bias`` over the last axis → Gemm (2-D ``x``) or MatMul (+ Add)."""
    ops = Operands(ctx, ins)
    x_shape = ops.shape("x")
    if "kernel" not in ops or not one_output_like(ctx, (*x_shape[:-1], ops.shape("kernel")[-1])):
        return None
    dtype = ctx.avals_out[0].dtype
    bias = ctx.cast(ops["bias"], dtype) if "bias" in ops else None
    return matmul_bias(ctx, ctx.cast(ops["x"], dtype), ctx.cast(ops["kernel"], dtype), bias, len(x_shape))


def lower_dense_general(ctx: Any, *ins: ir.Value) -> ir.Value | None:
    """A contraction of ``x``'s trailing axes (param ``axes``, in order) with a kernel of shape
    (*in, *``out_features``) → Reshapes around one matrix product (Gemm or MatMul + Add)."""
    import math

    ops = Operands(ctx, ins)
    p = ctx.marked.params
    x_shape = ops.shape("x")
    rank = len(x_shape)
    axes, out_f = p["axes"], p["out_features"]
    lead = rank - len(axes)
    # Contracting over the trailing axes, in order, is a plain matrix product after flattening.
    if tuple(axes) != tuple(range(lead, rank)) or not one_output_like(ctx, (*x_shape[:lead], *out_f)):
        return None
    in_f = [x_shape[a] for a in axes]
    if not static_ints(in_f):
        return None
    n_in, n_out = math.prod(in_f), math.prod(out_f)
    dtype = ctx.avals_out[0].dtype
    x = ctx.cast(ops["x"], dtype)
    if len(axes) != 1:
        x = ctx.op.Reshape(x, ctx.i64([0] * lead + [-1]))
    kernel = ctx.cast(ops["kernel"], dtype)
    if ops.shape("kernel") != (n_in, n_out):
        kernel = reshape_const(ctx, kernel, [n_in, n_out])
    bias = None
    if "bias" in ops:
        bias = ctx.cast(ops["bias"], dtype)
        if ops.shape("bias") != (n_out,):
            bias = reshape_const(ctx, bias, [n_out])
    y = matmul_bias(ctx, x, kernel, bias, lead + 1)
    if len(out_f) != 1:
        y = ctx.op.Reshape(y, ctx.i64([0] * lead + list(out_f)))
    return y


def lower_einsum_bias(ctx: Any, *ins: ir.Value) -> ir.Value | None:
    """``einsum(equation, x, kernel) + bias`` (params ``equation``, ``bias_shape``: the bias
    reshaped to broadcast, None for no bias) → Einsum (+ Add)."""
    ops = Operands(ctx, ins)
    p = ctx.marked.params
    if len(ctx.avals_out) != 1:
        return None
    dtype = ctx.avals_out[0].dtype
    y = ctx.op.Einsum(ctx.cast(ops["x"], dtype), ctx.cast(ops["kernel"], dtype), equation=p["equation"])
    if "bias" in ops and p["bias_shape"] is not None:
        y = ctx.op.Add(y, reshape_const(ctx, ctx.cast(ops["bias"], dtype), p["bias_shape"]))
    return y


# ---------------------------------------------------------------------------------------------
# Embeddings: operand ``embedding`` (num_embeddings, features) with ``ids`` (lookup) or ``query``
# (``attend``, the tied output projection)


def lower_embedding_lookup(ctx: Any, *ins: ir.Value) -> ir.Value | None:
    """``embedding[ids]`` → Gather on axis 0.

    ``jnp.take`` in flax's lookup wraps negative ids like ``Gather`` does. Ids outside
    ``[-num_embeddings, num_embeddings)`` give NaN rows in JAX and an error in onnxruntime; a valid
    model never produces them, so the graph stays one Gather rather than growing a bounds check.
    """
    ops = Operands(ctx, ins)
    if "embedding" not in ops or not one_output_like(ctx, (*ops.shape("ids"), ops.shape("embedding")[-1])):
        return None
    return ctx.op.Gather(ctx.cast(ops["embedding"], ctx.avals_out[0].dtype), ops["ids"], axis=0)


def lower_embedding_attend(ctx: Any, *ins: ir.Value) -> ir.Value | None:
    """``query @ embedding.T`` → MatMul with the transposed table (a constant once folded)."""
    ops = Operands(ctx, ins)
    if "embedding" not in ops or not one_output_like(ctx, (*ops.shape("query")[:-1], ops.shape("embedding")[0])):
        return None
    dtype = ctx.avals_out[0].dtype
    table = ctx.op.Transpose(ctx.cast(ops["embedding"], dtype), perm=[1, 0])
    return ctx.op.MatMul(ctx.cast(ops["query"], dtype), table)


# ---------------------------------------------------------------------------------------------
# Layout


def to_nchw(ctx: Any, x: ir.Value, rank: int) -> ir.Value:
    """Channels-last (N, *spatial, C) to ONNX's channels-first (N, C, *spatial)."""
    return ctx.op.Transpose(x, perm=[0, rank - 1, *range(1, rank - 1)])


def to_nhwc(ctx: Any, y: ir.Value, rank: int) -> ir.Value:
    """Back from (N, C, *spatial) to (N, *spatial, C)."""
    return ctx.op.Transpose(y, perm=[0, *range(2, rank), 1])


def channels_first(ctx: Any, x: ir.Value, rank: int, channels_last: bool, op: Callable[[ir.Value], ir.Value]) -> ir.Value:
    """``op`` (a channels-first ONNX op) applied in ONNX's layout, transposing in and out when the
    layer is channels-last (the transpose pass cancels the pairs between layers)."""
    if not channels_last:
        return op(x)
    return to_nhwc(ctx, op(to_nchw(ctx, x, rank)), rank)


# ---------------------------------------------------------------------------------------------
# Convolution: the body's ``conv_general_dilated`` says strides, dilation, groups and padding


def ints_per_axis(v: Any, n: int) -> tuple[int, ...]:
    """A per-spatial-axis setting (strides, dilation) as ``n`` ints: None is all ones, an int repeats."""
    if v is None:
        return (1,) * n
    if isinstance(v, (int, np.integer)):
        return (int(v),) * n
    return tuple(int(d) for d in v)


def conv_padding_mode(padding: Any) -> str | None:
    """A convolution's padding as the static param :func:`conv_pads` reads: ``"SAME"``,
    ``"SAME_LOWER"``, ``"VALID"`` or ``"EXPLICIT"`` (pairs); None for what ONNX cannot express
    (``"CIRCULAR"``, ``"CAUSAL"``, ...)."""
    if isinstance(padding, str):
        return padding if padding in ("SAME", "SAME_LOWER", "VALID") else None
    return "EXPLICIT"


def body_conv(ctx: Any) -> Any | None:
    """The region's one ``conv_general_dilated`` equation, when it is the forward call."""
    found = find_eqns(region_body(ctx), "conv_general_dilated")
    if len(found) != 1:
        return None
    eqn = found[0]
    if eqn.params.get("batch_group_count", 1) != 1 or not one_output_like(ctx, eqn.outvars[0].aval.shape):
        return None
    return eqn


def conv_pads(eqn: Any, padding_mode: str | None) -> dict[str, Any] | None:
    """``pads`` from the body's padding, or ``auto_pad`` when the spatial sizes are symbolic (ONNX
    then computes SAME padding itself, as lax does); None for a crop or an unexpressible mode."""
    padding = eqn.params["padding"]
    if static_ints([d for pair in padding for d in pair]):
        if any(int(d) < 0 for pair in padding for d in pair):  # a crop: not a Conv pad
            return None
        return {"pads": [int(lo) for lo, _ in padding] + [int(hi) for _, hi in padding]}
    auto_pad = {"SAME": "SAME_UPPER", "SAME_LOWER": "SAME_LOWER", "VALID": "VALID"}.get(padding_mode or "")
    return None if auto_pad is None else {"auto_pad": auto_pad}


def conv_attrs(eqn: Any) -> dict[str, Any]:
    """Conv's strides, dilations and group from the body's equation."""
    return {"strides": [int(s) for s in eqn.params["window_strides"]],
            "dilations": [int(d) for d in eqn.params["rhs_dilation"]],
            "group": int(eqn.params["feature_group_count"])}


def _conv_region(ctx: Any, ins: tuple[ir.Value, ...], op_type: str, unit_param: str) -> tuple | None:
    """What both channels-last conv lowerings start from: (dtype, the body's conv equation, the
    operands, rank, spatial rank), or None (keep the lax path) when onnxruntime has no ``op_type``
    kernel for the dtype, the body has no single conv, or its ``unit_param`` (the dilation/stride
    the ONNX op cannot express) is not all ones."""
    dtype = np.dtype(ctx.avals_out[0].dtype)
    if dtype not in ctx.kernel_dtypes(op_type):
        return None
    eqn = body_conv(ctx)
    if eqn is None or any(d != 1 for d in eqn.params[unit_param]):
        return None
    ops = Operands(ctx, ins)
    rank = len(ops.shape("x"))
    return dtype, eqn, ops, rank, rank - 2


def lower_conv_channels_last(ctx: Any, *ins: ir.Value) -> ir.Value | None:
    """A channels-last convolution region (operands ``x`` (N, *spatial, C), ``kernel`` (*spatial, I, O),
    optional ``bias``; param ``padding_mode``) → Transpose, Conv with the bias, Transpose."""
    region = _conv_region(ctx, ins, "Conv", unit_param="lhs_dilation")
    if region is None:
        return None
    dtype, eqn, ops, rank, n = region
    pads = conv_pads(eqn, ctx.marked.params.get("padding_mode"))
    if pads is None:
        return None
    kernel = ctx.op.Transpose(ctx.cast(ops["kernel"], dtype), perm=[n + 1, n, *range(n)])  # HWIO → OIHW
    bias = ctx.cast(ops["bias"], dtype) if "bias" in ops else None
    y = ctx.op.Conv(to_nchw(ctx, ctx.cast(ops["x"], dtype), rank), kernel, bias, **conv_attrs(eqn), **pads)
    return to_nhwc(ctx, y, rank)


def _transposed_kernel(ctx: Any, ops: Operands, dtype: Any, n: int, transpose_kernel: bool) -> ir.Value:
    """The kernel in ConvTranspose's (I, O, spatial) layout.

    ``lax.conv_transpose`` convolves the stride-dilated input with the kernel as given (HWIO) unless
    ``transpose_kernel`` (then flipped and I/O-swapped); ONNX's ConvTranspose is the gradient of
    Conv, i.e. that convolution with the spatially flipped kernel.
    """
    perm = [n + 1, n, *range(n)] if transpose_kernel else [n, n + 1, *range(n)]
    arr = const_array(ops["kernel"])
    if arr is not None:
        w = np.transpose(arr, perm)
        if not transpose_kernel:
            w = w[(slice(None), slice(None), *[slice(None, None, -1)] * n)]
        return ctx.const(np.ascontiguousarray(w).astype(dtype))
    w = ctx.op.Transpose(ctx.cast(ops["kernel"], dtype), perm=perm)
    if transpose_kernel:
        return w
    # every spatial axis reversed: starts -1, ends "past the front", steps -1
    reverse = ctx.i64([-1] * n)
    return ctx.op.Slice(w, reverse, ctx.i64([np.iinfo(np.int64).min] * n), ctx.i64(range(2, n + 2)), reverse)


def lower_conv_transpose_channels_last(ctx: Any, *ins: ir.Value) -> ir.Value | None:
    """A channels-last ``lax.conv_transpose`` region (operands ``x``, ``kernel`` (*spatial, I, O),
    optional ``bias``; param ``transpose_kernel``) → Transpose, ConvTranspose, Transpose."""
    region = _conv_region(ctx, ins, "ConvTranspose", unit_param="window_strides")
    if region is None:
        return None
    dtype, eqn, ops, rank, n = region
    ksize = ops.shape("kernel")[:n]
    dilation = [int(d) for d in eqn.params["rhs_dilation"]]
    padding = eqn.params["padding"]
    if eqn.params["feature_group_count"] != 1 or not static_ints([d for pair in padding for d in pair]):
        return None
    # A conv over the stride-dilated input padded by (lo, hi) is ConvTranspose with pads
    # k_eff - 1 - lo / k_eff - 1 - hi; extra high padding (only zeros reach it) is output_padding.
    begins, ends, extra = [], [], []
    for k, d, (lo, hi) in zip(ksize, dilation, padding, strict=True):
        k_eff = (int(k) - 1) * d + 1
        begin, end = k_eff - 1 - int(lo), k_eff - 1 - int(hi)
        if begin < 0:
            return None
        begins.append(begin)
        ends.append(max(end, 0))
        extra.append(max(-end, 0))
    kernel = _transposed_kernel(ctx, ops, dtype, n, ctx.marked.params["transpose_kernel"])
    bias = ctx.cast(ops["bias"], dtype) if "bias" in ops else None
    y = ctx.op.ConvTranspose(to_nchw(ctx, ctx.cast(ops["x"], dtype), rank), kernel, bias,
                             strides=[int(s) for s in eqn.params["lhs_dilation"]], dilations=dilation,
                             pads=begins + ends, output_padding=extra if any(extra) else None)
    return to_nhwc(ctx, y, rank)


# ---------------------------------------------------------------------------------------------
# Pooling: ``lax.reduce_window`` over (batch, *spatial, features)


def max_pool_dtypes(ctx: Any) -> frozenset[np.dtype]:
    """The floats the target onnxruntime's MaxPool runs on (its int8/uint8 kernels are left out:
    :func:`max_pool`'s NaN handling is for floats, integer pools keep the lax path)."""
    return ctx.kernel_dtypes("MaxPool") & frozenset(np.dtype(t) for t in ("float16", "float32", "float64"))



def _static_padding(padding: Any) -> Any | None:
    """The padding as a hashable static value, or None when it is not one ONNX can express."""
    if isinstance(padding, str):
        return padding if padding in ("SAME", "VALID") else None
    try:
        pairs = tuple((int(lo), int(hi)) for lo, hi in padding)
    except (TypeError, ValueError):
        return None
    return pairs if all(lo >= 0 and hi >= 0 for lo, hi in pairs) else None


def pool_region(mark: str, original: Callable[..., Any], inputs: Any, window_shape: Any, strides: Any,
                padding: Any, *extra: Any, **static: Any) -> Any:
    """``original(inputs, window_shape, strides, padding, *extra)`` (a channels-last pooling
    function such as flax's ``max_pool``) as the region ``mark`` when its window, strides and
    padding are static and ONNX can express them; else the original call. ``static`` names the
    ``extra`` arguments for the lowering (``count_include_pad=True``)."""
    try:
        window = tuple(int(w) for w in window_shape)
        steps = tuple(int(s) for s in strides) if strides is not None else (1,) * len(window)
    except (TypeError, ValueError):
        return original(inputs, window_shape, strides, padding, *extra)
    pad = _static_padding(padding)
    if not is_array(inputs) or inputs.ndim != len(window) + 2 or pad is None or len(steps) != len(window):
        return original(inputs, window_shape, strides, padding, *extra)

    def body(x: Any, **_: Any) -> Any:
        return original(x, window, steps, pad, *extra)

    return marked_call(mark, body, inputs, window_shape=window, strides=steps, padding=pad, **static)


def pool_attrs(ctx: Any) -> dict[str, Any] | None:
    """kernel_shape/strides and pads (or auto_pad) for a :func:`pool_region`, None to decline."""
    p = ctx.marked.params
    shape = tuple(ctx.avals_in[0].shape)
    if len(ctx.avals_out) != 1 or len(ctx.avals_out[0].shape) != len(shape):
        return None
    window, strides, padding = p["window_shape"], p["strides"], p["padding"]
    attrs: dict[str, Any] = {"kernel_shape": list(window), "strides": list(strides)}
    spatial = shape[1:-1]
    if padding == "VALID":
        pairs: Any = [(0, 0)] * len(window)
    elif padding == "SAME" and not static_ints(spatial):
        attrs["auto_pad"] = "SAME_UPPER"  # JAX's SAME puts the odd element at the end
        return attrs
    elif padding == "SAME":
        attrs["pads"] = same_pads(spatial, window, strides)
        return attrs
    else:
        pairs = padding
    attrs["pads"] = [int(lo) for lo, _ in pairs] + [int(hi) for _, hi in pairs]
    return attrs


def same_pads(spatial: Sequence[Any], window: Sequence[int], strides: Sequence[int]) -> list[int]:
    """ONNX ``pads`` (all begins, then all ends) of JAX's ``"SAME"`` padding for static sizes."""
    import jax

    pairs = jax.lax.padtype_to_pads(tuple(int(d) for d in spatial), tuple(window), tuple(strides), "SAME")
    return [int(lo) for lo, _ in pairs] + [int(hi) for _, hi in pairs]


def pool_patches(module: str, avg_mark: str, max_mark: str) -> list[Any]:
    """Patches of ``<module>.avg_pool`` and ``<module>.max_pool``, functions with flax's signature
    ``(inputs, window_shape, strides=None, padding="VALID"[, count_include_pad=True])`` over
    channels-last inputs, making each call the region ``avg_mark``/``max_mark`` (see
    :func:`pool_region`; lowered by :func:`lower_avg_pool_channels_last` and
    :func:`lower_max_pool_channels_last`)."""

    def patch_avg_pool(original: Callable[..., Any]) -> Callable[..., Any]:
        def avg_pool(inputs: Any, window_shape: Any, strides: Any = None, padding: Any = "VALID",
                     count_include_pad: Any = True) -> Any:
            if not isinstance(count_include_pad, (bool, np.bool_)):
                return original(inputs, window_shape, strides, padding, count_include_pad)
            include = bool(count_include_pad)
            return pool_region(avg_mark, original, inputs, window_shape, strides, padding, include,
                               count_include_pad=include)

        return avg_pool

    def patch_max_pool(original: Callable[..., Any]) -> Callable[..., Any]:
        def max_pool(inputs: Any, window_shape: Any, strides: Any = None, padding: Any = "VALID") -> Any:
            return pool_region(max_mark, original, inputs, window_shape, strides, padding)

        return max_pool

    return [Patch(module, "avg_pool", patch_avg_pool), Patch(module, "max_pool", patch_max_pool)]


def lower_avg_pool_channels_last(ctx: Any, x: ir.Value) -> ir.Value | None:
    """A channels-last average-pool region (param ``count_include_pad``) → AveragePool."""
    attrs = pool_attrs(ctx) if np.dtype(ctx.avals_out[0].dtype) in ctx.kernel_dtypes("AveragePool") else None
    if attrs is None:
        return None
    include = int(ctx.marked.params["count_include_pad"])
    return channels_first(ctx, x, len(ctx.avals_in[0].shape), True,
                           lambda v: ctx.op.AveragePool(v, count_include_pad=include, **attrs))


#: The ops a float max pool exports as (:func:`max_pool`): what pack testcases expect.
MAX_POOL_OPS = ("MaxPool", "ReduceSum", "IsNaN", "If")


def max_pool(ctx: Any, x: ir.Value, dtype: Any, **attrs: Any) -> ir.Value:
    """``MaxPool(x, **attrs)`` in which a window holding a NaN is NaN, as XLA's max is
    (onnxruntime's MaxPool skips NaN: a window [nan, -inf] gives -inf). Every fused or lax max
    pool goes through here; ``dtype`` is ``x``'s (integers have no NaN: the bare MaxPool).

    A NaN in the input makes ``ReduceSum(x)`` NaN, so ``IsNaN(ReduceSum(x))`` picks, in an ``If``,
    the exact form (the NaN mask pooled with the same attributes, then ``Where``) or the plain
    pool's result. The sum is also NaN when +inf and -inf both occur (or its partial sums overflow
    both ways); such inputs take the exact form too, so the result never depends on it.

    Measured in onnxruntime 1.32 on one core, NCHW (8, 64, 56, 56) float32 (the layout inside a
    conv net, where the pool's Transposes cancel), median of 30 runs:

    =================  ==========  ======================  =============================
    pool               plain       mask + Where (always)   ReduceSum check + If (this)
    =================  ==========  ======================  =============================
    2×2 stride 2       0.35 ms     1.96 ms                 0.51 ms (2.05 ms with a NaN)
    3×3 stride 2 SAME  0.40 ms     2.37 ms                 0.54 ms (2.44 ms with a NaN)
    =================  ==========  ======================  =============================

    (an ``IsNaN`` → ``ReduceMax`` check instead of the sum: 1.15 / 1.33 ms, an elementwise pass
    more). NaN-free inputs, the normal case, pay one reduction over the input. A lone NHWC pool
    whose Transposes meet no Conv costs more: onnxruntime folds Transpose → MaxPool → Transpose
    into its NHWC kernel (0.4 ms) but not across the ``If``, 1.7 ms (mask + Where: 2.4 ms).
    """
    y = ctx.op.MaxPool(x, **attrs)
    if not is_float(dtype):
        return y
    exact = ctx.subgraph("max_pool_nan")
    mask = exact.op.MaxPool(exact.cast(exact.op.IsNaN(x), dtype), **attrs)
    picked = exact.op.Where(exact.op.Greater(mask, exact.const(0, dtype)), exact.const(np.nan, dtype), y)
    plain = ctx.subgraph("max_pool")
    any_nan = ctx.op.IsNaN(ctx.op.ReduceSum(x, keepdims=0))
    return ctx.op.If(any_nan, then_branch=exact.finish([picked]), else_branch=plain.finish([y]))


def lower_max_pool_channels_last(ctx: Any, x: ir.Value) -> ir.Value | None:
    """A channels-last max-pool region → MaxPool (NaN-propagating: :func:`max_pool`)."""
    dtype = np.dtype(ctx.avals_out[0].dtype)
    attrs = pool_attrs(ctx) if dtype in max_pool_dtypes(ctx) else None
    if attrs is None:
        return None
    return channels_first(ctx, x, len(ctx.avals_in[0].shape), True, lambda v: max_pool(ctx, v, dtype, **attrs))


# ---------------------------------------------------------------------------------------------
# Normalization


def norm_axes(axes: Any, ndim: int) -> tuple[int, ...]:
    """Axes (an int or several, negative allowed) as sorted non-negative ints: a static param."""
    if isinstance(axes, (int, np.integer)):
        axes = (axes,)
    return tuple(sorted({int(a) % ndim for a in axes}))


def stash_type(ctx: Any, dtype: Any) -> int:
    """Statistics precision: computed in at least float32, and in float64 for float64."""
    return int(ctx.onnx_dtype(np.float64 if np.dtype(dtype) == np.float64 else np.float32))


def norm_weight(ctx: Any, ops: Operands, name: str, shape: Sequence[Any], dtype: Any,
                default: float | None) -> ir.Value | None:
    """A per-feature weight as ``dtype``, reshaped to ``shape``; ``default`` fills a missing one
    (None: omit it)."""
    v = ops.get(name)
    if v is None:
        return None if default is None else ctx.const(np.full(list(shape), default, dtype=dtype))
    v = ctx.cast(v, dtype)
    return v if list(ops.shape(name)) == list(shape) else reshape_const(ctx, v, shape)


def _trailing_norm(ctx: Any, ins: Sequence[ir.Value], with_bias: bool) -> tuple[Any, ...] | None:
    """Common part of LayerNorm and RMSNorm: (x, scale, bias, axis) or None to decline."""
    ops = Operands(ctx, ins)
    p = ctx.marked.params
    shape = ops.shape("x")
    rank = len(shape)
    red, feat = p["reduction_axes"], p["feature_axes"]
    if not one_output_like(ctx, shape) or not red:
        return None
    start = red[0]
    # ONNX normalises over the trailing axes [axis, rank) with weights broadcast over them.
    if tuple(red) != tuple(range(start, rank)) or not set(feat) <= set(red):
        return None
    dtype = ctx.avals_out[0].dtype
    wshape = [shape[a] if a in feat else 1 for a in range(start, rank)]
    if not static_ints(wshape):
        return None
    x = ctx.cast(ops["x"], dtype)
    scale = norm_weight(ctx, ops, "scale", wshape, dtype, 1.0)
    bias = norm_weight(ctx, ops, "bias", wshape, dtype, None) if with_bias else None
    return x, scale, bias, start


def lower_layer_norm(ctx: Any, *ins: ir.Value) -> ir.Value | None:
    """A layer-norm region (params ``reduction_axes``, ``feature_axes``, ``epsilon``; operands
    ``x``, optional ``scale``/``bias``) over trailing axes → LayerNormalization."""
    parts = _trailing_norm(ctx, ins, with_bias=True)
    if parts is None:
        return None
    x, scale, bias, axis = parts
    return ctx.op.LayerNormalization(x, scale, bias, axis=axis, epsilon=ctx.marked.params["epsilon"],
                                     stash_type=stash_type(ctx, ctx.avals_out[0].dtype))


def lower_rms_norm(ctx: Any, *ins: ir.Value) -> ir.Value | None:
    """An RMS-norm region (as :func:`lower_layer_norm`, no bias) → RMSNormalization (opset 23)."""
    if np.dtype(ctx.avals_out[0].dtype) not in ctx.kernel_dtypes("RMSNormalization"):  # none before opset 23
        return None
    parts = _trailing_norm(ctx, ins, with_bias=False)
    if parts is None:
        return None
    x, scale, _, axis = parts
    return ctx.op.RMSNormalization(x, scale, axis=axis, epsilon=ctx.marked.params["epsilon"],
                                   stash_type=stash_type(ctx, ctx.avals_out[0].dtype))


def _low_precision_multiplier(ops: Operands, low: np.dtype, epsilon: float) -> np.ndarray | None:
    """``rsqrt(var + eps) * scale`` evaluated by JAX in ``low``, as the region's body does."""
    import jax
    import jax.numpy as jnp

    var = const_array(ops.get("var"))
    scale = const_array(ops.get("scale")) if "scale" in ops else None
    if var is None or ("scale" in ops and scale is None):
        return None
    var = jnp.asarray(var, low)
    scale = None if scale is None else jnp.asarray(scale, low)

    # Jitted over closed-over constants, as the library's model is when it runs jitted with its
    # weights: XLA then folds rsqrt at compile time, which rounds up to one ulp away from its
    # runtime kernel and from the eager op (seen with flax 0.10.6 under float64).
    @jax.jit
    def multiplier() -> Any:
        mul = jax.lax.rsqrt(var + epsilon)
        return mul if scale is None else mul * scale

    return np.asarray(multiplier()).reshape(-1)


def lower_batch_norm(ctx: Any, *ins: ir.Value) -> ir.Value | None:
    """An inference batch-norm region (params ``feature_axes`` (one axis), ``epsilon``; operands
    ``x``, ``mean``, ``var``, optional ``scale``/``bias``) → BatchNormalization, transposed for a
    channels-last input."""
    ops = Operands(ctx, ins)
    p = ctx.marked.params
    shape = ops.shape("x")
    rank = len(shape)
    feat = p["feature_axes"]
    if not one_output_like(ctx, shape) or rank < 2 or len(feat) != 1 or "mean" not in ops or "var" not in ops:
        return None
    axis = feat[0]
    # ONNX puts channels at axis 1: (N, C) and (N, C, ...) as they are, channels-last transposed.
    if axis != 1 and axis != rank - 1:
        return None
    channels = shape[axis]
    dtype = np.dtype(ctx.avals_out[0].dtype)
    x = ctx.cast(ops["x"], dtype)
    scale = norm_weight(ctx, ops, "scale", [channels], dtype, 1.0)
    bias = norm_weight(ctx, ops, "bias", [channels], dtype, 0.0)
    mean = norm_weight(ctx, ops, "mean", [channels], dtype, 0.0)
    var = norm_weight(ctx, ops, "var", [channels], dtype, 1.0)
    epsilon = p["epsilon"]
    found = find_eqns(region_body(ctx), "rsqrt")
    low = np.dtype(found[0].invars[0].aval.dtype) if found else None
    if low is not None and low != dtype:
        # The library computes rsqrt(var + eps) * scale in its statistics' precision (float32 under
        # a float64 export, as flax does); fold that multiplier, rounded as it rounds it, into the scale.
        multiplier = _low_precision_multiplier(ops, low, epsilon)
        if multiplier is None:
            return None
        scale = ctx.const(multiplier.astype(dtype))
        var, epsilon = ctx.const(np.ones([channels], dtype=dtype)), 0.0
    return channels_first(ctx, x, rank, axis != 1,
                           lambda v: ctx.op.BatchNormalization(v, scale, bias, mean, var, epsilon=epsilon))


def lower_group_norm(ctx: Any, *ins: ir.Value) -> ir.Value | None:
    """A channels-last group-norm region (params ``num_groups``, ``epsilon``; operands ``x``,
    optional per-channel ``scale``/``bias``) → GroupNormalization (opset 21)."""
    if not ctx.has_op("GroupNormalization"):  # per-channel scale/bias: none before opset 21 (-18 scaled per group)
        return None
    ops = Operands(ctx, ins)
    p = ctx.marked.params
    shape = ops.shape("x")
    rank = len(shape)
    if not one_output_like(ctx, shape):
        return None
    channels = shape[-1]
    dtype = ctx.avals_out[0].dtype
    x = ctx.cast(ops["x"], dtype)
    scale = norm_weight(ctx, ops, "scale", [channels], dtype, 1.0)
    bias = norm_weight(ctx, ops, "bias", [channels], dtype, 0.0)
    return channels_first(ctx, x, rank, rank > 2, lambda v: ctx.op.GroupNormalization(
        v, scale, bias, num_groups=p["num_groups"], epsilon=p["epsilon"], stash_type=stash_type(ctx, dtype)))


def lower_instance_norm(ctx: Any, *ins: ir.Value) -> ir.Value | None:
    """An instance-norm region (params ``feature_axes`` (axis 1 or last), ``epsilon``; operands
    ``x``, optional ``scale``/``bias``) → InstanceNormalization."""
    ops = Operands(ctx, ins)
    shape = ops.shape("x")
    rank = len(shape)
    feat = ctx.marked.params["feature_axes"]
    dtype = np.dtype(ctx.avals_out[0].dtype)
    if dtype not in ctx.kernel_dtypes("InstanceNormalization", exact=True) or not one_output_like(ctx, shape) or len(feat) != 1 or feat[0] not in (1, rank - 1):
        return None
    channels = shape[feat[0]]
    x = ctx.cast(ops["x"], dtype)
    scale = norm_weight(ctx, ops, "scale", [channels], dtype, 1.0)
    bias = norm_weight(ctx, ops, "bias", [channels], dtype, 0.0)
    return channels_first(ctx, x, rank, feat[0] != 1, lambda v: ctx.op.InstanceNormalization(
        v, scale, bias, epsilon=ctx.marked.params["epsilon"]))


# ---------------------------------------------------------------------------------------------
# Attention


def dot_product_attention_region(mark: str, original: Callable[..., Any], query: Any, key: Any, value: Any,
                                 bias: Any, mask: Any, kwargs: Mapping[str, Any], **static: Any) -> Any:
    """The region ``mark`` around a flax ``dot_product_attention(query, key, value, bias, mask, **kwargs)``
    call (``original``): operands ``q``, ``k``, ``v`` and the given ``bias``/``mask``, static params
    ``static``; the body is ``original`` itself."""
    operands = {"q": query, "k": key, "v": value}
    if bias is not None:
        operands["bias"] = bias
    if mask is not None:
        operands["mask"] = mask

    def body(*arrays: Any, operands: tuple[str, ...], **_static: Any) -> Any:
        named = dict(zip(operands, arrays, strict=True))
        return original(named["q"], named["k"], named["v"], named.get("bias"), named.get("mask"), **kwargs)

    return marked_call(mark, body, *operands.values(), operands=tuple(operands), **static)


def attention_inputs(query: Any, key: Any, value: Any, mask: Any = None) -> tuple[dict[str, Any], Callable[..., tuple]]:
    """The region inputs of an attention call and how the body gets ``(q, k, v, mask)`` back.

    Self-attention passes one array three times: it becomes one operand ``"q"`` (so the lowering
    can project Q|K|V with one MatMul); a distinct key/value adds ``"k"``/``"v"``, a mask ``"mask"``.
    """
    inputs = {"q": query}
    if key is not query:
        inputs["k"] = key
    if value is not key:
        inputs["v"] = value
    if mask is not None:
        inputs["mask"] = mask
    names = tuple(inputs)

    def unpack(*arrays: Any) -> tuple:
        named = dict(zip(names, arrays, strict=True))
        q = named["q"]
        k = named.get("k", q)
        return q, k, named.get("v", k), named.get("mask")

    return inputs, unpack


def additive_mask(ctx: Any, mask: ir.Value | None, bias: ir.Value | None, dtype: Any) -> ir.Value | None:
    """Attention's ``attn_mask`` from a boolean keep-mask and/or a float bias: masked logits get
    ``-0.7 * finfo.max`` (a large finite value, so a fully masked row stays finite and uniform, as
    the libraries' ``finfo.min`` fill makes it)."""
    if mask is None:
        return None if bias is None else ctx.cast(bias, dtype)
    keep = ctx.cast(mask, np.bool_)
    allowed = ctx.const(np.zeros((), dtype=dtype)) if bias is None else ctx.cast(bias, dtype)
    masked = ctx.const(np.asarray(-0.7 * np.finfo(np.dtype(dtype)).max, dtype=dtype))
    return ctx.op.Where(keep, allowed, masked)


def _mask_fits(shape: tuple[Any, ...] | None) -> bool:
    return shape is None or 2 <= len(shape) <= 4


def _attention(ctx: Any, q: ir.Value, k: ir.Value, v: ir.Value, attn_mask: ir.Value | None, heads: int,
               kv_heads: int) -> ir.Value:
    is_causal = bool(ctx.marked.params.get("is_causal", False))
    return ctx.op.Attention(q, k, v, attn_mask, q_num_heads=heads, kv_num_heads=kv_heads,
                            is_causal=1 if is_causal else None)


def _attention_runs(ctx: Any, exact: bool) -> bool:
    return np.dtype(ctx.avals_out[0].dtype) in ctx.kernel_dtypes("Attention", exact=exact)


def lower_dot_product_attention(ctx: Any, *ins: ir.Value, exact: bool = False) -> ir.Value | None:
    """A ``dot_product_attention`` region (operands ``q``, ``k``, ``v`` as (batch, seq, heads,
    depth), optional ``bias``/``mask``; param ``is_causal``) → the opset-23 ``Attention`` op on the
    (batch, seq, heads*depth) layout, for the element types the target runs ``Attention`` on (none
    before opset 23). ``exact``: only those its kernel computes exactly (onnxruntime's float64
    Attention is float32-accurate, 3e-8 off where JAX's float64 result is exact: the kernel table
    records it as inexact), so such a dtype keeps the library's decomposition."""
    if not _attention_runs(ctx, exact):
        return None
    ops = Operands(ctx, ins)
    q_shape, k_shape, v_shape = ops.shape("q"), ops.shape("k"), ops.shape("v")
    if len(q_shape) != 4 or len(k_shape) != 4 or len(v_shape) != 4:
        return None
    heads, kv_heads, depth_v = q_shape[2], k_shape[2], v_shape[3]
    if not one_output_like(ctx, (*q_shape[:3], depth_v)):
        return None
    if any(name in ops and not _mask_fits(ops.shape(name)) for name in ("bias", "mask")):
        return None
    dtype = ctx.avals_out[0].dtype
    flat = ctx.i64([0, 0, -1])
    q, k, v = (ctx.op.Reshape(ctx.cast(ops[n], dtype), flat) for n in ("q", "k", "v"))
    attn_mask = additive_mask(ctx, ops.get("mask"), ops.get("bias"), dtype)
    y = _attention(ctx, q, k, v, attn_mask, int(heads), int(kv_heads))
    return ctx.op.Reshape(y, ctx.i64([0, 0, int(heads), int(depth_v)]))


def lower_multi_head_attention(ctx: Any, *ins: ir.Value, exact: bool = False) -> ir.Value | None:
    """A multi-head attention layer's region → projections, ``Attention``, output projection.

    Operands: ``q`` (and ``k``/``v`` when they differ, see :func:`attention_inputs`), optional
    ``mask``; weights ``query``/``key``/``value`` ``/kernel`` (in, heads, depth) and ``/bias``
    (heads, depth), ``out/kernel`` (heads, depth, features) and ``out/bias``. Self-attention with
    constant weights projects Q|K|V with one MatMul and a Split. ``exact`` as in
    :func:`lower_dot_product_attention`.
    """
    if not _attention_runs(ctx, exact):
        return None
    ops = Operands(ctx, ins)
    names = ("query", "key", "value", "out")
    if any(f"{n}/kernel" not in ops for n in names):
        return None
    _, heads, depth = ops.shape("query/kernel")
    _, kv_heads, _ = ops.shape("key/kernel")
    _, _, depth_v = ops.shape("value/kernel")
    out_features = ops.shape("out/kernel")[2:]
    q_shape = ops.shape("q")
    if len(out_features) != 1 or not one_output_like(ctx, (*q_shape[:2], out_features[0])):
        return None
    if "mask" in ops and not _mask_fits(ops.shape("mask")):
        return None
    dtype = np.dtype(ctx.avals_out[0].dtype)
    widths = [heads * depth, kv_heads * depth, kv_heads * depth_v]

    def project(x: ir.Value, name: str, width: int) -> ir.Value:
        kernel = reshape_const(ctx, ctx.cast(ops[f"{name}/kernel"], dtype), [ops.shape(f"{name}/kernel")[0], width])
        y = ctx.op.MatMul(x, kernel)
        if f"{name}/bias" not in ops:
            return y
        return ctx.op.Add(y, reshape_const(ctx, ctx.cast(ops[f"{name}/bias"], dtype), [width]))

    x_q = ctx.cast(ops["q"], dtype)
    has_bias = [f"{n}/bias" in ops for n in names[:3]]
    weights = [ops[f"{n}/kernel"] for n in names[:3]] + [ops[f"{n}/bias"] for n, h in zip(names[:3], has_bias) if h]
    # Self-attention with constant weights: one MatMul (+ Add) on the Q|K|V weights, joined by a
    # Concat node (see concat_weights: no joined copy beside the caller's weights during export).
    if "k" not in ops and "v" not in ops and all(w.const_value is not None for w in weights):
        def flat(name: str, shape: list[int]) -> ir.Value:
            return reshape_const(ctx, ctx.cast(ops[name], dtype), shape)

        kernel = concat_weights(ctx, [flat(f"{n}/kernel", [ops.shape(f"{n}/kernel")[0], w])
                                      for n, w in zip(names[:3], widths, strict=True)], axis=1)
        qkv = ctx.op.MatMul(x_q, kernel)
        if any(has_bias):
            bias = concat_weights(ctx, [flat(f"{n}/bias", [w]) if h else ctx.const(np.zeros(w, dtype))
                                        for n, w, h in zip(names[:3], widths, has_bias, strict=True)], axis=0)
            qkv = ctx.op.Add(qkv, bias)
        q, k, v = ctx.op.Split(qkv, ctx.i64(widths), axis=-1, _outputs=3)
    else:
        x_k = ctx.cast(ops["k"], dtype) if "k" in ops else x_q
        x_v = ctx.cast(ops["v"], dtype) if "v" in ops else x_k
        q, k, v = project(x_q, "query", widths[0]), project(x_k, "key", widths[1]), project(x_v, "value", widths[2])
    y = _attention(ctx, q, k, v, additive_mask(ctx, ops.get("mask"), None, dtype), int(heads), int(kv_heads))
    out = ops.shape("out/kernel")[-1]
    y = ctx.op.MatMul(y, reshape_const(ctx, ctx.cast(ops["out/kernel"], dtype), [heads * depth_v, out]))
    return ctx.op.Add(y, ctx.cast(ops["out/bias"], dtype)) if "out/bias" in ops else y
