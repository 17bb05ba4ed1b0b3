"""The nodes that replace a weight's float32 work: the int8/int4 weight matmuls, written by the
fitted precision form (:class:`jax2onnx.targets.precision_forms.WeightMatmulForm`: 8-bit or 4-bit
``com.microsoft.MatMulNBits``, ``DequantizeLinear`` + ``MatMul``, the dynamic
``com.microsoft.DynamicQuantizeMatMul`` or ``DynamicQuantizeLinear`` + ``MatMulInteger``),
int8/int4 embedding gathers, and int8 storage widened by one ``DequantizeLinear`` (convolution
kernels, large addends)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx_ir as ir

from ..targets.precision_forms import MS_DOMAIN, WeightMatmulForm, weight_form
from ..targets.weight_layouts import int4_blocks, int8_per_axis, int8_per_column
from .options import Precision, PrecisionError
from .weight_sites import F32, Site, Weight, WeightMatmul, as_weight, attribute_value, part_values

#: a constant added to activations is quantized (``conv="int8"``) from this many elements: below
#: it (biases, LayerNorm parameters) the bytes saved are noise
ADDEND_ELEMENTS = 16384


def use_ms_domain(owner: ir.Graph | ir.Function) -> None:
    if isinstance(owner, ir.Function):  # a function body imports the opsets its nodes use
        owner.opset_imports.setdefault(MS_DOMAIN, 1)


def weight_kn(m: WeightMatmul) -> tuple[int, int]:
    rows, cols = m.weight.shape[-2:]  # a stacked weight's one layer
    return (cols, rows) if m.transposed else (rows, cols)


def oriented(m: WeightMatmul, fn: Callable[[np.ndarray], tuple[np.ndarray, ...]]) -> Callable[[np.ndarray], tuple[np.ndarray, ...]]:
    """``fn`` applied to the weight as ``[K, N]``."""
    return (lambda w: fn(np.ascontiguousarray(w.T))) if m.transposed else fn


def replace_matmul(site: Site, m: WeightMatmul, nodes: list[ir.Node], out: ir.Value) -> None:
    if m.addend is not None:
        add = ir.Node("", "Add", [out, m.addend], outputs=[ir.Value(name=site.names(f"{out.name}_c"))],
                      name=f"{out.name}_add")
        nodes.append(add)
        out = add.outputs[0]
    old = m.node.outputs[0]
    out.type, out.shape = old.type, old.shape
    ir.convenience.replace_nodes_and_values(site.owner, m.node, [m.node], nodes, [old], [out])


def to_int4(site: Site, m: WeightMatmul, p: Precision, k: int,
            chosen: Callable[[np.ndarray], tuple[np.ndarray, ...]] | None = None) -> None:
    """``m`` as the int4 form's matmul (:func:`jax2onnx.targets.precision_forms.weight_form`).
    ``chosen``: a calibrated method's codes, scales and zero points of the ``[K, N]`` weight
    (:mod:`.calibration`), written in the form's layout; None: round-to-nearest."""
    _to_form(site, m, p, k, weight_form("int4", p.int4_kernel), chosen)


def to_int8(site: Site, m: WeightMatmul, p: Precision, k: int) -> None:
    """``m`` as the int8 form's matmul (weight-only or dynamic, as fitted)."""
    _to_form(site, m, p, k, weight_form("int8", p.int8_kernel, p.activations))


def _to_form(site: Site, m: WeightMatmul, p: Precision, k: int, form: WeightMatmulForm,
             chosen: Callable[[np.ndarray], tuple[np.ndarray, ...]] | None = None) -> None:
    K, N = weight_kn(m)
    specs = form.parts(K, N, p)
    if chosen is not None:
        pack = form.packer(p)
        fn = oriented(m, lambda w: pack(*chosen(w)))
    else:
        fn = oriented(m, form.quantizer(K, p))
    parts = part_values(site, m.weight, lambda w: fn(w)[: len(specs)], specs)
    nodes = form.matmul(site, m.a, parts, m.bias, K, N, p, k)
    replace_matmul(site, m, nodes, nodes[-1].outputs[0])


def is_embedding(node: ir.Node, main: ir.Graph) -> bool:
    return (node.op_type == "Gather" and node.domain in ("", "ai.onnx") and attribute_value(node, "axis", 0) == 0
            and as_weight(node.inputs[0], main) is not None)


def embedding_int8(site: Site, table: Weight, k: int) -> None:
    node = site.node
    ids = node.inputs[1]
    V, D = table.shape

    def rows(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        codes, scale = int8_per_column(w, axis=1)
        return codes, scale.reshape(V, 1)

    codes, scales = part_values(site, table, rows, [("q8", ir.DataType.INT8, (V, D)), ("scales", F32, (V, 1))])

    def v(base: str) -> ir.Value:
        return ir.Value(name=site.names(f"{base}_{k}"))

    g_codes = ir.Node("", "Gather", [codes, ids], outputs=[v("embedding_q8")], name=f"embedding_q8_{k}")
    g_scale = ir.Node("", "Gather", [scales, ids], outputs=[v("embedding_scale")], name=f"embedding_scale_{k}")
    to_float = ir.Node("", "Cast", [g_codes.outputs[0]], [ir.AttrInt64("to", int(F32))],
                       outputs=[v("embedding_f32")], name=f"embedding_f32_{k}")
    out = ir.Node("", "Mul", [to_float.outputs[0], g_scale.outputs[0]], outputs=[v("embedding")], name=f"embedding_{k}")
    old = node.outputs[0]
    new = out.outputs[0]
    new.type, new.shape = old.type, old.shape
    ir.convenience.replace_nodes_and_values(site.owner, node, [node], [g_codes, g_scale, to_float, out], [old], [new])


def embedding_int4(site: Site, table: Weight, p: Precision, k: int) -> None:
    """int4 tables: ``com.microsoft.GatherBlockQuantized`` over 4-bit rows, blocks of
    ``block_size`` along each row with a scale and a zero point each (the MatMulNBits layout of the
    transposed table: ``[V, D/2]`` bytes, ``[V, D/block]`` scales)."""
    node = site.node
    V, D = table.shape
    blocks = D // p.block_size

    def rows(w: np.ndarray) -> tuple[np.ndarray, ...]:
        q, scales, zero_points = int4_blocks(np.ascontiguousarray(w.T), p.block_size, False)
        return q.reshape(V, D // 2), scales.reshape(V, blocks), zero_points

    parts = part_values(site, table, rows, [("q4", ir.DataType.UINT8, (V, D // 2)), ("scales", F32, (V, blocks)),
                                             ("zero_points", ir.DataType.UINT8, (V, -(-blocks // 2)))])
    out = ir.Value(name=site.names(f"embedding_q4_{k}"))
    gather = ir.Node(MS_DOMAIN, "GatherBlockQuantized", [parts[0], node.inputs[1], parts[1], parts[2]],
                     [ir.AttrInt64("gather_axis", 0), ir.AttrInt64("quantize_axis", 1),
                      ir.AttrInt64("block_size", p.block_size), ir.AttrInt64("bits", 4)], outputs=[out], name=out.name)
    old = node.outputs[0]
    out.type, out.shape = old.type, old.shape
    ir.convenience.replace_nodes_and_values(site.owner, node, [node], [gather], [old], [out])




def is_conv(node: ir.Node, main: ir.Graph) -> bool:
    if node.op_type != "Conv" or node.domain not in ("", "ai.onnx") or len(node.inputs) < 2:
        return False
    w = as_weight(node.inputs[1], main, ndim=None)
    return w is not None and len(w.shape) >= 3


def addend_slot(node: ir.Node, main: ir.Graph) -> int | None:
    """The input slot of a large float32 constant this ``Add`` adds to an activation, or None."""
    if node.op_type != "Add" or node.domain not in ("", "ai.onnx") or len(node.inputs) != 2:
        return None
    for k in (0, 1):
        other = node.inputs[1 - k]
        if other is None or as_weight(other, main, ndim=None) is not None:
            continue
        v = node.inputs[k]
        if v is None or v.shape is None or len(v.shape) < 2 or not all(isinstance(d, int) for d in v.shape):
            continue
        if int(np.prod([int(d) for d in v.shape])) < ADDEND_ELEMENTS:
            continue
        w = as_weight(v, main, ndim=None)
        if w is not None and (w.lazy or np.all(np.isfinite(w.load()))):  # a -inf mask stays float32
            return k
    return None


def dequantized_input(site: Site, slot: int, w: Weight, axis: int) -> None:
    """``site.node``'s input ``slot`` read from int8 codes and per-``axis`` scales through one
    ``DequantizeLinear``."""
    def quantize(arr: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if not np.all(np.isfinite(arr)):  # a streamed constant is first seen here; int8 has no infinity
            raise PrecisionError(f"weight {w.name!r} holds inf or NaN, which int8 cannot store; leave it float32 with "
                                 f"exclude=[{w.name!r}] (or conv=None)")
        return int8_per_axis(arr, axis)

    codes, scales = part_values(site, w, quantize, [("q8", ir.DataType.INT8, w.shape), ("scales", F32, (w.shape[axis],))])
    out = ir.Value(name=site.names(f"{w.name}_dequantized"), type=ir.TensorType(F32), shape=ir.Shape(list(w.shape)))
    dq = ir.Node("", "DequantizeLinear", [codes, scales], [ir.AttrInt64("axis", axis)], outputs=[out],
                 name=f"{out.name}_node")
    site.owner.insert_before(site.node, dq)
    site.node.replace_input_with(slot, out)
