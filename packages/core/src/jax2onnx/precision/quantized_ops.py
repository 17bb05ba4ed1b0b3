"""The nodes that replace a weight's float32 work: the int4 ``MatMulNBits``, the weight-only int8
matmuls (8-bit ``com.microsoft.MatMulNBits`` or ``DequantizeLinear`` + ``MatMul``) and the dynamic
ones (``com.microsoft.DynamicQuantizeMatMul`` or ``DynamicQuantizeLinear`` + ``MatMulInteger``),
int8/int4 embedding gathers, and int8 storage widened by one ``DequantizeLinear`` (convolution
kernels, large addends)."""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np
import onnx_ir as ir

from .options import Precision, PrecisionError
from .quantizers import int4_blocks, int4_dq_blocks, int4_packed, int8_blocks, int8_per_axis, int8_per_column
from .weight_sites import F32, Site, Weight, WeightMatmul, as_weight, attribute_value, part_values

MS_DOMAIN = "com.microsoft"
#: a constant added to activations is quantized (``conv="int8"``) from this many elements: below
#: it (biases, LayerNorm parameters) the bytes saved are noise
ADDEND_ELEMENTS = 16384
#: 8-bit MatMulNBits' block along K: a float32 scale per 128 codes keeps an int8 model near 0.26x
#: float32's bytes (blocks of 32 would make it 0.28x); a narrower weight is one block
INT8_BLOCK_SIZE = 128
#: 8-bit MatMulNBits' accuracy_level: 4, the one onnxruntime (1.32) gives the standard form it fuses
#: (DequantizeLinear + MatMul) and the only fast one on its CPU: the activations are rounded to int8
#: inside the kernel per block of K (1 computes in float32 but dequantizes the weight on every call,
#: 16-32x slower than float32 for one token; bench/results/precision.md)
INT8_ACCURACY_LEVEL = 4


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


def int4_specs(K: int, N: int, p: Precision) -> list[tuple[str, ir.DataType, tuple[int, ...]]]:
    blocks = -(-K // p.block_size)
    specs = [("q4", ir.DataType.UINT8, (N, blocks, p.block_size // 2)), ("scales", F32, (N, blocks))]
    if not p.symmetric:
        specs.append(("zero_points", ir.DataType.UINT8, (N, -(-blocks // 2))))
    return specs


def matmul_nbits(a: ir.Value, parts: list[ir.Value], bias: ir.Value | None, K: int, N: int, p: Precision,
                  name: str) -> ir.Node:
    inputs: list[ir.Value | None] = [a, *parts]
    if bias is not None:
        inputs += [None] * (5 - len(inputs)) + [bias]
    attrs = [ir.AttrInt64("K", K), ir.AttrInt64("N", N), ir.AttrInt64("bits", 4), ir.AttrInt64("block_size", p.block_size)]
    if p.accuracy_level is not None:  # "auto": 1 until .accuracy_levels measures each node
        attrs.append(ir.AttrInt64("accuracy_level", 1 if p.accuracy_level == "auto" else p.accuracy_level))
    return ir.Node(MS_DOMAIN, "MatMulNBits", inputs, attrs, outputs=[ir.Value(name=name)], name=name)


def to_int4(site: Site, m: WeightMatmul, p: Precision, k: int,
            chosen: Callable[[np.ndarray], tuple[np.ndarray, ...]] | None = None) -> None:
    """``chosen``: a calibrated method's codes, scales and zero points of the ``[K, N]`` weight
    (:mod:`.calibration`), written in the same layout; None: onnxruntime's round-to-nearest."""
    K, N = weight_kn(m)
    if chosen is not None:
        packed = functools.partial(int4_packed, block_size=p.block_size, symmetric=p.symmetric, kernel=p.int4_kernel)
        calibrated = oriented(m, lambda w: packed(*chosen(w)))
    if p.int4_kernel == "DequantizeLinear":
        _to_int4_dequantized(site, m, p, k, K, N, calibrated if chosen is not None else None)
        return
    specs = int4_specs(K, N, p)
    fn = calibrated if chosen is not None else oriented(
        m, functools.partial(int4_blocks, block_size=p.block_size, symmetric=p.symmetric))
    parts = part_values(site, m.weight, lambda w: fn(w)[: len(specs)], specs)
    node = matmul_nbits(m.a, parts, m.bias, K, N, p, site.names(f"matmul_q4_{k}"))
    replace_matmul(site, m, [node], node.outputs[0])


def outside_bodies(site: Site, widen: ir.Node) -> list[ir.Node]:
    """``widen`` (the ``DequantizeLinear`` of a weight's parts) placed where onnxruntime can run it:
    a control-flow body reading main-graph initializers gets their float32 weight from the main
    graph (onnxruntime 1.32 fuses a body's DequantizeLinear + MatMul into MatMulNBits and then fails
    the session on the outer-scope weight: "Missing required weight"); returns the nodes to place
    before the MatMul (none when moved)."""
    main = site.main
    if site.owner is main or isinstance(site.owner, ir.Function):
        return [widen]
    if not all(v is None or main.initializers.get(v.name) is v for v in widen.inputs):
        return [widen]  # a body's own constants (or slices of them): fused in place
    main.insert_before(next(iter(main)), widen)
    return []


def _to_int4_dequantized(site: Site, m: WeightMatmul, p: Precision, k: int, K: int, N: int,
                         calibrated: Callable[[np.ndarray], tuple[np.ndarray, ...]] | None) -> None:
    """Standard ONNX int4: uint4 codes ``[K, N]`` widened by one blocked ``DequantizeLinear`` (opset
    21, blocks of ``block_size`` along K), then the ``MatMul`` (+ bias). onnxruntime fuses the pair into
    its MatMulNBits kernel when the session starts (the weight is a constant)."""
    blocks = -(-K // p.block_size)
    specs = [("q4", ir.DataType.UINT4, (K, N)), ("scales", F32, (blocks, N)), ("zero_points", ir.DataType.UINT4, (blocks, N))]
    fn = calibrated or oriented(m, functools.partial(int4_dq_blocks, block_size=p.block_size, symmetric=p.symmetric))
    codes, scales, zero_points = part_values(site, m.weight, fn, specs)
    name = site.names(f"matmul_q4_{k}")
    weight = ir.Value(name=f"{name}_w", type=ir.TensorType(F32), shape=ir.Shape([K, N]))
    widen = ir.Node("", "DequantizeLinear", [codes, scales, zero_points],
                    [ir.AttrInt64("axis", 0), ir.AttrInt64("block_size", p.block_size)], outputs=[weight],
                    name=f"{name}_dq")
    nodes = [*outside_bodies(site, widen), ir.Node("", "MatMul", [m.a, weight], outputs=[ir.Value(name=name)], name=name)]
    if m.bias is not None:
        nodes.append(ir.Node("", "Add", [nodes[-1].outputs[0], m.bias], outputs=[ir.Value(name=f"{name}_b")],
                             name=f"{name}_bias"))
    replace_matmul(site, m, nodes, nodes[-1].outputs[0])


def int8_block_size(K: int) -> int:
    """8-bit MatMulNBits' block for a ``K``-long contraction: :data:`INT8_BLOCK_SIZE`, or for a
    narrower weight ``K`` rounded up to a power of two (16 at least, MatMulNBits' smallest)."""
    return min(INT8_BLOCK_SIZE, max(16, 1 << (K - 1).bit_length()))


def int8_specs(K: int, N: int, p: Precision) -> list[tuple[str, ir.DataType, tuple[int, ...]]]:
    """The parts of an int8 ``[K, N]`` weight in ``p.int8_kernel``'s layout: 8-bit MatMulNBits'
    blocks (uint8 ``[N, blocks, block]``, scales ``[N, blocks]``) or int8 codes ``[K, N]`` with a
    scale per column."""
    if p.int8_kernel == "MatMulNBits":
        block = int8_block_size(K)
        blocks = -(-K // block)
        return [("q8", ir.DataType.UINT8, (N, blocks, block)), ("scales", F32, (N, blocks))]
    return [("q8", ir.DataType.INT8, (K, N)), ("scales", F32, (N,))]


def int8_quantizer(K: int, p: Precision) -> Callable[[np.ndarray], tuple[np.ndarray, ...]]:
    """The quantizer of a ``[K, N]`` weight into :func:`int8_specs`' parts."""
    if p.int8_kernel == "MatMulNBits":
        return functools.partial(int8_blocks, block_size=int8_block_size(K))
    return int8_per_column


def int8_matmul(site: Site, a: ir.Value, parts: list[ir.Value], bias: ir.Value | None, K: int, N: int,
                p: Precision, k: int) -> list[ir.Node]:
    """The int8 matmul of ``a`` and the weight ``parts`` (:func:`int8_specs`) (+ ``bias``) in
    ``p.int8_kernel``'s form: the nodes, the last writes it."""
    name = site.names(f"matmul_q8_{k}")
    if p.int8_kernel == "MatMulNBits":
        inputs: list[ir.Value | None] = [a, *parts]
        if bias is not None:
            inputs += [None] * (5 - len(inputs)) + [bias]
        attrs = [ir.AttrInt64("K", K), ir.AttrInt64("N", N), ir.AttrInt64("bits", 8),
                 ir.AttrInt64("block_size", int8_block_size(K)), ir.AttrInt64("accuracy_level", INT8_ACCURACY_LEVEL)]
        return [ir.Node(MS_DOMAIN, "MatMulNBits", inputs, attrs, outputs=[ir.Value(name=name)], name=name)]
    codes, scales = parts
    if p.int8_kernel != "DequantizeLinear":
        return _dynamic_int8(site, a, codes, scales, bias, p, k)
    weight = ir.Value(name=f"{name}_w", type=ir.TensorType(F32), shape=ir.Shape([K, N]))
    widen = ir.Node("", "DequantizeLinear", [codes, scales], [ir.AttrInt64("axis", 1)], outputs=[weight], name=f"{name}_dq")
    nodes = [*outside_bodies(site, widen), ir.Node("", "MatMul", [a, weight], outputs=[ir.Value(name=name)], name=name)]
    if bias is not None:
        nodes.append(ir.Node("", "Add", [nodes[-1].outputs[0], bias], outputs=[ir.Value(name=f"{name}_b")],
                             name=f"{name}_bias"))
    return nodes


def _dynamic_int8(site: Site, a: ir.Value, codes: ir.Value, scales: ir.Value, bias: ir.Value | None, p: Precision,
                  k: int) -> list[ir.Node]:
    """The int8 matmul of ``a``, quantized per tensor at run time, and ``codes * scales`` (+ ``bias``)."""
    if p.int8_kernel == "DynamicQuantizeMatMul":
        inputs: list[ir.Value | None] = [a, codes, scales]
        if bias is not None:
            inputs += [None, bias]
        name = site.names(f"matmul_q8_{k}")
        return [ir.Node(MS_DOMAIN, "DynamicQuantizeMatMul", inputs, outputs=[ir.Value(name=name)], name=name)]

    def v(name: str, dtype: ir.DataType | None = None) -> ir.Value:
        return ir.Value(name=site.names(f"{name}_{k}"), type=ir.TensorType(dtype) if dtype is not None else None)

    quant = ir.Node("", "DynamicQuantizeLinear", [a], outputs=[v("a_q8", ir.DataType.UINT8), v("a_scale", F32),
                                                                v("a_zero_point", ir.DataType.UINT8)], name=f"a_q8_{k}")
    q, a_scale, a_zp = quant.outputs
    mm = ir.Node("", "MatMulInteger", [q, codes, a_zp], outputs=[v("matmul_i32", ir.DataType.INT32)], name=f"matmul_i32_{k}")
    to_float = ir.Node("", "Cast", [mm.outputs[0]], [ir.AttrInt64("to", int(F32))], outputs=[v("matmul_f32", F32)],
                       name=f"matmul_f32_{k}")
    scale = ir.Node("", "Mul", [a_scale, scales], outputs=[v("matmul_scale", F32)], name=f"matmul_scale_{k}")
    out = ir.Node("", "Mul", [to_float.outputs[0], scale.outputs[0]], outputs=[v("matmul_q8", F32)], name=f"matmul_q8_{k}")
    nodes = [quant, mm, to_float, scale, out]
    if bias is not None:
        nodes.append(ir.Node("", "Add", [out.outputs[0], bias], outputs=[v("matmul_q8_bias", F32)], name=f"matmul_q8_bias_{k}"))
    return nodes


def to_int8(site: Site, m: WeightMatmul, p: Precision, k: int) -> None:
    K, N = weight_kn(m)
    parts = part_values(site, m.weight, oriented(m, int8_quantizer(K, p)), int8_specs(K, N, p))
    nodes = int8_matmul(site, m.a, parts, m.bias, K, N, p, k)
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
