"""int4 mixture-of-experts weights: stacked per-expert matrices ``[E, ...]``, each expert quantized
in its own blocks, as the two forms onnxruntime runs.

- ``com.microsoft.MoE`` (a pack's fused experts) becomes ``com.microsoft.QMoE`` with
  ``expert_weight_bits=4``: fc1 ``[E, N, K]`` and fc2 as packed codes ``[E, N, K/2]``, scales
  ``[E, N, K/block]`` and (asymmetric blocks) zero points ``[E, N, ceil(blocks/2)]``: per expert
  exactly MatMulNBits' blocks of that expert's ``[K, N]`` matrix (onnxruntime's quantizer). QMoE
  needs the block to divide both K's (hidden and intermediate sizes): the precision's
  ``block_size`` or, for narrow experts, the largest power of two below it that does (16 at least);
  otherwise the op stays float32 and the result says so.
- a ``MatMul`` or ``Einsum`` reading a stacked float32 weight ``[E, K, N]`` (a library computing
  every expert with one batched einsum, on the standard path) reads it through one blocked ``DequantizeLinear``
  (opset 21: uint4 codes, scales and zero points ``[E, ceil(K/block), N]``, blocks along K), the
  same codes as the 2-D standard form (:func:`.quantizers.int4_dq_blocks`) per expert.
"""

from __future__ import annotations

import functools

import numpy as np
import onnx_ir as ir

from .options import Precision
from .quantized_ops import MS_DOMAIN
from .quantizers import int4_blocks, int4_dq_blocks
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


def to_qmoe(site: Site, weights: tuple[Weight, Weight], p: Precision, k: int) -> bool:
    """Replace the ``MoE`` at ``site`` by a 4-bit ``QMoE`` (same attributes); False when no block fits."""
    node = site.node
    fc1, fc2 = weights
    block = qmoe_block(p, [fc1.shape[2], fc2.shape[2]])
    if block is None:
        return False
    slots: list[ir.Value | None] = [None] * 13
    slots[0], slots[1] = node.inputs[0], node.inputs[1]
    for w, (w_slot, s_slot, z_slot), bias_slot in ((fc1, (_FC1, _FC1_SCALES, _FC1_ZP), _MOE_FC1_BIAS),
                                                   (fc2, (_FC2, _FC2_SCALES, _FC2_ZP), _MOE_FC2_BIAS)):
        experts, n, kk = w.shape
        blocks = kk // block
        specs = [("q4", ir.DataType.UINT8, (experts, n, kk // 2)), ("scales", F32, (experts, n, blocks))]
        if not p.symmetric:
            specs.append(("zero_points", ir.DataType.UINT8, (experts, n, -(-blocks // 2))))
        parts = part_values(site, w, functools.partial(_qmoe_parts, block=block, symmetric=p.symmetric), specs)
        slots[w_slot], slots[s_slot] = parts[0], parts[1]
        if not p.symmetric:
            slots[z_slot] = parts[2]
        slots[_FC1_BIAS if w is fc1 else _FC2_BIAS] = node.inputs[bias_slot] if len(node.inputs) > bias_slot else None
    while slots and slots[-1] is None:
        slots.pop()
    attrs = list(node.attributes.values())
    attrs += [ir.AttrInt64("expert_weight_bits", 4), ir.AttrInt64("block_size", block)]
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


def to_int4_stacked(site: Site, w: Weight, p: Precision, k: int) -> None:
    """``MatMul(a, W[E, K, N])`` → ``MatMul(a, DequantizeLinear(codes, scales, zero points))``, blocks
    of ``block_size`` along K of each expert."""
    experts, kk, n = w.shape
    blocks = -(-kk // p.block_size)
    specs = [("q4", ir.DataType.UINT4, (experts, kk, n)), ("scales", F32, (experts, blocks, n)),
             ("zero_points", ir.DataType.UINT4, (experts, blocks, n))]
    codes, scales, zero_points = part_values(
        site, w, functools.partial(_dq_parts, block=p.block_size, symmetric=p.symmetric), specs)
    name = site.names(f"experts_q4_{k}")
    weight = ir.Value(name=f"{name}_w", type=ir.TensorType(F32), shape=ir.Shape([experts, kk, n]))
    widen = ir.Node("", "DequantizeLinear", [codes, scales, zero_points],
                    [ir.AttrInt64("axis", 1), ir.AttrInt64("block_size", p.block_size)], outputs=[weight],
                    name=f"{name}_dq")
    site.owner.insert_before(site.node, widen)
    site.node.replace_input_with(1, weight)


__all__ = ["is_moe", "moe_weights", "qmoe_block", "stacked_matmul_weight", "to_int4_stacked",
           "to_qmoe"]
