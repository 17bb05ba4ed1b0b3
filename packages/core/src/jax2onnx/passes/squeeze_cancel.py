"""Cancel ``Squeeze``/``Unsqueeze`` pairs, also across elementwise ops, and Reshapes of squeezes.

An unbatched call to a library layer that ONNX only has in a batched form (an Equinox ``Conv2d`` on
one ``(C, H, W)`` image, a pool) is lowered as ``Unsqueeze → Conv → Squeeze``, so consecutive
layers meet as ``Squeeze → [Relu …] → Unsqueeze``. This pass removes such pairs.

Rules (axes must be constants; both ranks known):
- ``Unsqueeze(a)`` reading ``Squeeze(a)`` of ``x`` (the same axes, counted in ``x``'s rank):
  its readers read ``x`` (a Squeeze only drops size-1 axes, which the Unsqueeze puts back);
- ``Unsqueeze(a)`` reading a chain of elementwise ops (each read only by the next), whose top op
  reads only ``Squeeze(a)`` values of one rank and size-1 constants of no higher rank than the
  squeezed values (which broadcast the same with or without the size-1 axes), while the ops below
  it have one such non-constant input: the chain computes on the unsqueezed values and both go;
- ``Reshape`` to a constant shape without zeros (``0`` would copy an input dim) reading a
  ``Squeeze``/``Unsqueeze``: it reads the value under it (the element order is the same);
- an Unsqueeze producing an output of its graph stays (the output keeps its name).
Runs to a fixed point on every graph (function and control-flow bodies included).
"""

from __future__ import annotations

import onnx_ir as ir

from ..ir.constants import constant_ints, constant_tensor, is_size_one_constant, rank
from .manager import RewriteToFixedPoint, is_op
from .transpose_cancel import elementwise_chain


def _axes(node: ir.Node) -> tuple[int, ...] | None:
    """The node's axes, non-negative in the rank they index (Squeeze's input's, Unsqueeze's
    output's); None when they are not constants or that rank is unknown. Before shape inference
    one side's rank is often all there is (a jaxpr value's), so the other side's is derived."""
    if len(node.inputs) > 1 and node.inputs[1] is not None:
        axes = constant_ints(node.inputs[1])
    elif "axes" in node.attributes:
        axes = [int(a) for a in node.attributes["axes"].value]
    else:
        return None  # a Squeeze without axes drops every size-1 axis: which ones depends on the data
    if axes is None:
        return None
    wide, narrow = (node.inputs[0], node.outputs[0]) if node.op_type == "Squeeze" else (node.outputs[0], node.inputs[0])
    rank = _wide_rank(wide, narrow, tuple(axes))
    if rank is None:
        return tuple(sorted(axes)) if all(a >= 0 for a in axes) else None
    return tuple(sorted(a % rank for a in axes))


def _wide_rank(wide: ir.Value, narrow: ir.Value, axes: tuple[int, ...]) -> int | None:
    """The rank with the size-1 axes: ``wide``'s, or ``narrow``'s plus the axes."""
    if rank(wide) is not None:
        return rank(wide)
    return None if rank(narrow) is None else rank(narrow) + len(axes)


def _with_ones(shape: ir.Shape | None, axes: tuple[int, ...]) -> ir.Shape | None:
    """``shape`` with the size-1 axes put back (``axes`` count in the result's rank)."""
    if shape is None:
        return None
    dims = list(shape)
    for a in axes:
        dims.insert(a, 1)
    return ir.Shape(dims)


def _squeezed(v: ir.Value | None) -> tuple[ir.Value, tuple[int, ...]] | None:
    """(the value under it, its axes) when ``v`` is a Squeeze's output."""
    node = None if v is None else v.producer()
    if not is_op(node, "Squeeze") or node.inputs[0] is None:
        return None
    axes = _axes(node)
    return None if axes is None else (node.inputs[0], axes)


class SqueezeCancelPass(RewriteToFixedPoint):
    def rewrite_once(self, graph: ir.Graph | ir.Function) -> bool:
        outputs = {id(v) for v in graph.outputs}
        for node in list(graph):
            if not node.inputs or node.inputs[0] is None:
                continue
            if (is_op(node, "Unsqueeze") and id(node.outputs[0]) not in outputs
                    and self._cancel_unsqueeze(graph, node, outputs)):
                return True
            if is_op(node, "Reshape") and self._reshape_past(node):
                return True
        return False

    @staticmethod
    def _cancel_unsqueeze(graph: ir.Graph | ir.Function, node: ir.Node, outputs: set[int]) -> bool:
        axes = _axes(node)
        if axes is None:
            return False
        pair = _squeezed(node.inputs[0])
        if pair is not None:  # Unsqueeze(Squeeze(x)) directly
            if pair[1] != axes:
                return False
            ir.convenience.replace_all_uses_with(node.outputs[0], pair[0])
            graph.remove(node, safe=True)
            return True

        def squeezed_the_same(u: ir.Value) -> bool:
            under = _squeezed(u)
            return under is not None and under[1] == axes

        found = elementwise_chain(node.inputs[0], outputs, squeezed_the_same)
        if found is None:
            return False
        chain, reads = found
        undone = [(i, u, _squeezed(u)) for i, u in reads]
        # One rank under every Squeeze (then the same axes keep the operands' broadcasting); it is
        # the Unsqueeze's output rank, which _axes knew.
        ranks = {_wide_rank(node.outputs[0], node.inputs[0], axes)} | {_wide_rank(p[0], u, axes) for _, u, p in undone}
        if len(ranks - {None}) != 1 or (None in ranks and any(_wide_rank(p[0], u, axes) is None for _, u, p in undone)):
            return False
        (wide_rank,) = ranks - {None}
        squeezed_rank = wide_rank - len(axes)
        for op in chain:  # a size-1 constant of higher rank would broadcast differently
            for u in op.inputs:
                if u is not None and is_size_one_constant(u) and len(constant_tensor(u).shape) > squeezed_rank:
                    return False
        for i, _, (source, _) in undone:
            chain[-1].replace_input_with(i, source)
        # Every op of the chain now computes on the unsqueezed values.
        for op in chain:
            op.outputs[0].shape = node.outputs[0].shape or _with_ones(op.outputs[0].shape, axes)
        ir.convenience.replace_all_uses_with(node.outputs[0], chain[0].outputs[0])
        graph.remove(node, safe=True)
        return True

    @staticmethod
    def _reshape_past(node: ir.Node) -> bool:
        inner = node.inputs[0].producer()
        if not (is_op(inner, "Squeeze") or is_op(inner, "Unsqueeze")) or inner.inputs[0] is None:
            return False
        if node.attributes.get("allowzero") is not None and node.attributes["allowzero"].value:
            return False
        shape = constant_ints(node.inputs[1] if len(node.inputs) > 1 else None)
        if shape is None or 0 in shape:
            return False
        node.replace_input_with(0, inner.inputs[0])
        return True
