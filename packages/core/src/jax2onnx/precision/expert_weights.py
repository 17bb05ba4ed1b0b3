"""int4 / int8 mixture-of-experts weights: stacked per-expert matrices ``[E, ...]``, each expert
quantized in its own blocks, as the two forms onnxruntime runs.

- ``com.microsoft.MoE`` (a pack's fused experts) becomes ``com.microsoft.QMoE`` with
  ``expert_weight_bits=4``: fc1 ``[E, N, K]`` and fc2 as packed codes ``[E, N, K/2]``, scales
  ``[E, N, K/block]`` and (asymmetric blocks) zero points ``[E, N, ceil(blocks/2)]``: per expert
  exactly MatMulNBits' blocks of that expert's ``[K, N]`` matrix (onnxruntime's quantizer). QMoE
  needs the block to divide both K's (hidden and intermediate sizes): the precision's
  ``block_size`` or, for narrow experts, the largest power of two below it that does (16 at least);
  otherwise the op stays float32 and the result says so. Under int8, ``expert_weight_bits=8``: uint8
  codes ``[E, N, K]`` with one symmetric scale per output row ``[E, N]`` (zero point 128).
- a ``MatMul`` or ``Einsum`` reading a stacked float32 weight ``[E, K, N]`` (a library computing
  every expert with one batched einsum, on the standard path) reads it through one blocked ``DequantizeLinear``
  (opset 21: uint4 codes, scales and zero points ``[E, ceil(K/block), N]``, blocks along K), the
  same codes as the 2-D standard form (:func:`jax2onnx.targets.weight_layouts.int4_dq_blocks`) per expert.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import onnx_ir as ir

from ..targets.precision_forms import MS_DOMAIN
from ..targets.weight_layouts import int4_blocks, int4_dq_blocks
from .options import Precision
from .weight_sites import F32, Site, Weight, as_weight, attribute_value, part_values

#: QMoE's input slots (onnxruntime's contrib schema): the weights, scales, biases and zero points
_FC1, _FC1_SCALES, _FC1_BIAS, _FC2, _FC2_SCALES, _FC2_BIAS, _FC1_ZP, _FC2_ZP = 2, 3, 4, 5, 6, 7, 11, 12
#: MoE's: input, router, fc1 weights, fc1 bias, fc2 weights, fc2 bias (fc3 unsupported here)
_MOE_FC1, _MOE_FC1_BIAS, _MOE_FC2, _MOE_FC2_BIAS = 2, 3, 4, 5
_MIN_BLOCK = 16


def is_moe(node: ir.Node) -> bool:
    return node.domain == MS_DOMAIN and node.op_type == "MoE"


def qmoe_block(p: Precision, ks: list[int]) -> int | None:
    """The block QMoE quantizes with: ``p.block_size`` or the largest power of two below it that
    divides every K (QMoE's condition), None when none of at least 16 does."""
    block = p.block_size
    while block >= _MIN_BLOCK:
        if all(k % block == 0 for k in ks):
            return block
        block //= 2
    return None


def moe_weights(node: ir.Node, main: ir.Graph) -> tuple[Weight, Weight] | None:
    """fc1 ``[E, N1, K1]`` and fc2 ``[E, N2, K2]`` of a ``MoE`` as weights, or None (not constant,
    an fc3 given: a form this rewrite does not handle)."""
    if len(node.inputs) > 6 and any(v is not None for v in node.inputs[6:]):
        return None
    fc1 = as_weight(node.inputs[_MOE_FC1], main, ndim=3)
    fc2 = as_weight(node.inputs[_MOE_FC2], main, ndim=3)
    return None if fc1 is None or fc2 is None else (fc1, fc2)


def _qmoe_parts(w: np.ndarray, block: int, symmetric: bool) -> tuple[np.ndarray, ...]:
    """``[E, N, K]`` → packed codes ``[E, N, K/2]``, scales ``[E, N, K/block]`` (and zero points)."""
    experts, n, k = w.shape
    per = [int4_blocks(np.ascontiguousarray(w[e].T), block, symmetric) for e in range(experts)]
    codes = np.stack([q.reshape(n, k // 2) for q, _, _ in per])
    scales = np.stack([s.reshape(n, -1) for _, s, _ in per]).astype(np.float32)
    if symmetric:
        return codes, scales
    return codes, scales, np.stack([z.reshape(n, -1) for _, _, z in per])


def _q8_rows(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``[..., N, K]`` → uint8 codes (zero point 128, QMoE's 8-bit default) and one symmetric scale
    per row (``max |w| / 127``: core's int8 weight scale) ``[..., N]``."""
    scales = np.abs(w).max(axis=-1) / 127.0
    scales = np.where(scales == 0, 1.0, scales).astype(np.float32)
    codes = np.clip(np.round(w / scales[..., None]), -127, 127) + 128
    return codes.astype(np.uint8), scales


def to_qmoe(site: Site, weights: tuple[Weight, Weight], p: Precision, k: int) -> bool:
    """Replace the ``MoE`` at ``site`` by a ``QMoE`` (same attributes): int4 blocks, or under int8
    one scale per output row of each expert; False when no int4 block fits."""
    fc1, fc2 = weights
    if p.kind == "int8":
        return _replace_moe(site, weights, k, 8, None, [
            [("q8", ir.DataType.UINT8, w.shape), ("scales", F32, w.shape[:2])] for w in weights], _q8_rows)
    block = qmoe_block(p, [fc1.shape[2], fc2.shape[2]])
    if block is None:
        return False
    specs = []
    for w in weights:
        experts, n, kk = w.shape
        blocks = kk // block
        specs.append([("q4", ir.DataType.UINT8, (experts, n, kk // 2)), ("scales", F32, (experts, n, blocks))])
        if not p.symmetric:
            specs[-1].append(("zero_points", ir.DataType.UINT8, (experts, n, -(-blocks // 2))))
    return _replace_moe(site, weights, k, 4, block, specs,
                        functools.partial(_qmoe_parts, block=block, symmetric=p.symmetric))


def _replace_moe(site: Site, weights: tuple[Weight, Weight], k: int, bits: int, block: int | None,
                 specs: list[list[tuple[str, ir.DataType, tuple[int, ...]]]], fn: Any) -> bool:
    node = site.node
    fc1, _ = weights
    slots: list[ir.Value | None] = [None] * 13
    slots[0], slots[1] = node.inputs[0], node.inputs[1]
    for w, w_specs, (w_slot, s_slot, z_slot), bias_slot in (
            (fc1, specs[0], (_FC1, _FC1_SCALES, _FC1_ZP), _MOE_FC1_BIAS),
            (weights[1], specs[1], (_FC2, _FC2_SCALES, _FC2_ZP), _MOE_FC2_BIAS)):
        parts = part_values(site, w, fn, w_specs)
        slots[w_slot], slots[s_slot] = parts[0], parts[1]
        if len(parts) > 2:
            slots[z_slot] = parts[2]
        slots[_FC1_BIAS if w is fc1 else _FC2_BIAS] = node.inputs[bias_slot] if len(node.inputs) > bias_slot else None
    while slots and slots[-1] is None:
        slots.pop()
    attrs = list(node.attributes.values())
    attrs.append(ir.AttrInt64("expert_weight_bits", bits))
    if block is not None:
        attrs.append(ir.AttrInt64("block_size", block))
    name = site.names(f"qmoe_{k}")
    out = ir.Value(name=name, type=node.outputs[0].type, shape=node.outputs[0].shape)
    qmoe = ir.Node(MS_DOMAIN, "QMoE", slots, attrs, outputs=[out], name=name)
    ir.convenience.replace_nodes_and_values(site.owner, node, [node], [qmoe], [node.outputs[0]], [out])
    return True


def stacked_matmul_weight(node: ir.Node, main: ir.Graph) -> Weight | None:
    """The stacked ``[E, K, N]`` float32 weight a batched product reads as its second operand, or
    None: a ``MatMul``, or an ``Einsum`` whose weight term keeps its first index (the expert) and
    its last in the output and contracts its middle one (``th,ehm->etm``, ``eti,eih->eth``; not an
    attention projection's ``[hidden, heads, head]`` kernel, whose first index is contracted)."""
    if node.domain not in ("", "ai.onnx") or len(node.inputs) != 2 or node.op_type not in ("MatMul", "Einsum"):
        return None
    a = node.inputs[0]
    if a is None or a.type is None or a.dtype != F32:
        return None
    if node.op_type == "Einsum":
        equation = str(attribute_value(node, "equation", "")).replace(" ", "")
        terms, _, out = equation.partition("->")
        parts = terms.split(",")
        if not out or len(parts) != 2 or len(parts[1]) != 3 or "." in equation:
            return None
        e, k, n = parts[1]
        if len({e, k, n}) != 3 or e not in out or n not in out or k in out:
            return None
    return as_weight(node.inputs[1], main, ndim=3)


def _dq_parts(w: np.ndarray, block: int, symmetric: bool) -> tuple[np.ndarray, ...]:
    per = [int4_dq_blocks(w[e], block, symmetric) for e in range(w.shape[0])]
    return tuple(np.stack([part[i] for part in per]) for i in range(3))


def _dq8_parts(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``[E, K, N]`` → int8 codes and one symmetric scale per expert and column ``[E, 1, N]``."""
    scales = np.abs(w).max(axis=1, keepdims=True) / 127.0
    scales = np.where(scales == 0, 1.0, scales).astype(np.float32)
    return np.clip(np.round(w / scales), -127, 127).astype(np.int8), scales


def to_int4_stacked(site: Site, w: Weight, p: Precision, k: int) -> None:
    """``MatMul(a, W[E, K, N])`` → ``MatMul(a, DequantizeLinear(codes, scales, zero points))``, blocks
    of ``block_size`` along K of each expert (int8: one block of all K, a scale per expert and
    column, weight-only as core's int8 convolution kernels)."""
    experts, kk, n = w.shape
    if p.kind == "int8":
        specs = [("q8", ir.DataType.INT8, (experts, kk, n)), ("scales", F32, (experts, 1, n))]
        block, parts = kk, part_values(site, w, _dq8_parts, specs)
    else:
        blocks = -(-kk // p.block_size)
        specs = [("q4", ir.DataType.UINT4, (experts, kk, n)), ("scales", F32, (experts, blocks, n)),
                 ("zero_points", ir.DataType.UINT4, (experts, blocks, n))]
        block = p.block_size
        parts = part_values(site, w, functools.partial(_dq_parts, block=p.block_size, symmetric=p.symmetric), specs)
    name = site.names(f"experts_q{'8' if p.kind == 'int8' else '4'}_{k}")
    weight = ir.Value(name=f"{name}_w", type=ir.TensorType(F32), shape=ir.Shape([experts, kk, n]))
    widen = ir.Node("", "DequantizeLinear", parts, [ir.AttrInt64("axis", 1), ir.AttrInt64("block_size", block)],
                    outputs=[weight], name=f"{name}_dq")
    site.owner.insert_before(site.node, widen)
    site.node.replace_input_with(1, weight)


__all__ = ["is_moe", "moe_weights", "qmoe_block", "stacked_matmul_weight", "to_int4_stacked",
           "to_qmoe"]
