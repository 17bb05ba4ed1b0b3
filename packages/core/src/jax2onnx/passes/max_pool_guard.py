"""Move a max pool's NaN guard past the layout Transposes of a lone channels-last pool.

:func:`jax2onnx.fusion.max_pool` puts its guard right after the ``MaxPool``, in ONNX's channels-first
layout: ``If(IsNaN(ReduceSum(t)), exact, y)`` with ``y = MaxPool(t)``. Between two convolutions
the layout Transposes cancel and that is the cheapest place. A channels-last pool whose Transposes
stay (``x → Transpose → MaxPool → If → Transpose``: a pool before a flatten, or alone) keeps
onnxruntime from running ``Transpose → MaxPool → Transpose`` as its one channels-last kernel, which
the ``If`` between them hides (``bench/max_pool_nan_guard.py``: 0.38 ms bare, 1.19 ms guarded).

This pass, after :class:`~.transpose_cancel.TransposeCancelPass`, rewrites such a guard as

    w = Transpose(q)(MaxPool(Transpose(p)(x)));  If(IsNaN(ReduceSum(x)), exact(x) → Transpose(q), w)

The check reads ``x`` itself (a sum of every element, in any layout NaN exactly when ``t``'s is, or
else only by an overflow that sends it to the exact branch, which is right for any input); the
exact branch recomputes the pool from ``x`` inside the ``If``, so nothing outside it reads the
channels-first values but the pool.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from ..fusion.nan_free import guarded_input
from ..ir.constants import rank
from .manager import RewriteToFixedPoint, is_op, replace_value
from .transpose_cancel import _compose, _is_identity, _is_transpose, _perm


def _node(op_type: str, inputs: list[ir.Value | None], **attrs: object) -> ir.Node:
    attributes = []
    for name, value in attrs.items():
        if isinstance(value, ir.Attr):
            attributes.append(value)
        elif isinstance(value, (list, tuple)):
            attributes.append(ir.AttrInt64s(name, [int(v) for v in value]))
        else:
            attributes.append(ir.AttrInt64(name, int(value)))
    return ir.Node("", op_type, inputs, attributes=attributes, num_outputs=1)


def _constant(value: float, dtype: np.dtype) -> ir.Node:
    return ir.Node("", "Constant", [], attributes=[ir.AttrTensor("value", ir.tensor(np.array(value, dtype)))],
                   num_outputs=1)


class MaxPoolGuardLayoutPass(RewriteToFixedPoint):
    def rewrite_once(self, graph: ir.Graph | ir.Function) -> bool:
        for node in list(graph):
            if is_op(node, "If") and self._move(graph, node):
                return True
        return False

    @staticmethod
    def _guarded_pool(node: ir.Node) -> ir.Node | None:
        """The pool of ``node`` when it is :func:`max_pool`'s guard (its stamp and check:
        :func:`~jax2onnx.fusion.nan_free.guarded_input`), its plain branch passing the pool of the
        checked value on and its exact branch picking from that pool."""
        t = guarded_input(node)
        if t is None:
            return None
        plain, exact = node.attributes["else_branch"].value, node.attributes["then_branch"].value
        if len(plain) != 1 or len(plain.outputs) != 1 or len(exact.outputs) != 1:
            return None
        ident = plain.outputs[0].producer()
        pool = ident.inputs[0].producer() if is_op(ident, "Identity") else None
        where = exact.outputs[0].producer()
        if not is_op(pool, "MaxPool") or len(pool.outputs) != 1 or pool.inputs[0] is not t:
            return None
        if not is_op(where, "Where") or where.inputs[2] is not pool.outputs[0]:
            return None
        return pool

    def _move(self, graph: ir.Graph | ir.Function, node: ir.Node) -> bool:
        pool = self._guarded_pool(node)
        z = node.outputs[0]
        readers = [user for user, _ in z.uses()]
        if pool is None or z in graph.outputs or len(readers) != 1 or not _is_transpose(readers[0]):
            return False
        t_out, t = readers[0], pool.inputs[0]
        t_in = t.producer()
        if t_out.graph is not graph or pool.graph is not graph or not _is_transpose(t_in) or t_in.inputs[0] is None:
            return False
        x = t_in.inputs[0]
        p, q = _perm(t_in, rank(x)), _perm(t_out, rank(z))
        if p is None or q is None or len(p) != len(q) or not _is_identity(_compose(p, q)):
            return False
        onnx_dtype = next((v.dtype for v in (x, pool.outputs[0], z) if v.dtype is not None), None)
        if onnx_dtype is None:
            return False
        dtype = np.dtype(onnx_dtype.numpy())
        pool_attrs = [a for a in pool.attributes.values()]

        # outside: the pool between its Transposes, the check on x
        moved = _node("Transpose", [pool.outputs[0]], perm=q)
        check_sum = _node("ReduceSum", [x], keepdims=0)
        check = _node("IsNaN", [check_sum.outputs[0]])
        # the exact branch, from x alone
        t2 = _node("Transpose", [x], perm=p)
        y2 = ir.Node("", "MaxPool", [t2.outputs[0]], attributes=list(pool_attrs), num_outputs=1)
        nan_mask = _node("IsNaN", [t2.outputs[0]])
        mask = ir.Node("", "Cast", [nan_mask.outputs[0]], attributes=[ir.AttrInt64("to", int(onnx_dtype))], num_outputs=1)
        pooled_mask = ir.Node("", "MaxPool", [mask.outputs[0]], attributes=list(pool_attrs), num_outputs=1)
        zero, nan = _constant(0, dtype), _constant(np.nan, dtype)
        hit = _node("Greater", [pooled_mask.outputs[0], zero.outputs[0]])
        picked = _node("Where", [hit.outputs[0], nan.outputs[0], y2.outputs[0]])
        back = _node("Transpose", [picked.outputs[0]], perm=q)
        opsets = dict(node.attributes["then_branch"].value.opset_imports)
        exact = ir.Graph([], [back.outputs[0]], nodes=[t2, y2, nan_mask, mask, pooled_mask, zero, nan, hit, picked, back],
                         name="max_pool_nan_channels_last", opset_imports=opsets)
        keep = _node("Identity", [moved.outputs[0]])
        plain = ir.Graph([], [keep.outputs[0]], nodes=[keep], name="max_pool_channels_last", opset_imports=opsets)
        guard = ir.Node("", "If", [check.outputs[0]], attributes=[ir.AttrGraph("then_branch", exact),
                                                                   ir.AttrGraph("else_branch", plain)], num_outputs=1)
        guard.metadata_props.update(node.metadata_props)  # the stamp that names it a guard
        out = t_out.outputs[0]
        guard.outputs[0].type, guard.outputs[0].shape = out.type, out.shape
        back.outputs[0].type = keep.outputs[0].type = out.type
        # ONNX wants every value name unique across a graph and its branches
        base = pool.outputs[0].name or "max_pool"
        made = [moved, check_sum, check, t2, y2, nan_mask, mask, pooled_mask, zero, nan, hit, picked, back, keep]
        for i, made_node in enumerate(made):
            made_node.outputs[0].name = f"{base}_channels_last_{i}"
        guard.outputs[0].name = out.name
        graph.insert_after(pool, [moved, check_sum, check, guard])
        replace_value(graph, out, guard.outputs[0])
        # the old guard and its Transpose are unread now; their branches stop reading outer values
        for branch in (node.attributes["then_branch"].value, node.attributes["else_branch"].value):
            for inner in branch:
                for i in range(len(inner.inputs)):
                    inner.replace_input_with(i, None)
        graph.remove([t_out, node], safe=True)  # the old IsNaN/ReduceSum: left to dead-code removal
        return True


__all__ = ["MaxPoolGuardLayoutPass"]
