"""Rolls of one value along one axis share a single ``Pad(mode="wrap")``; each roll becomes one Slice.

JAX rolls an array (``jnp.roll``, or lax code doing the same) as a ``concatenate`` of two slices,
exported as ``Concat(Slice(x, [n-s, n)), Slice(x, [0, n-s)))`` along one axis: three nodes and two
full copies of ``x``. A stencil rolls the same array by +1 and -1 along each axis. Where two or more
rolls read the same value along the same axis, one wrap-Pad of ``x`` holding every shift serves them
all (``padded[j] = x[(j - before) mod n]``) and each roll is one Slice of it: for two rolls, one Pad
and two Slices (three copies) instead of four Slices and two Concats (four copies). A roll is data
movement only, so the values are bitwise the same.

Measured in onnxruntime 1.32 (CPU, one thread) on the heat bench step (four rolls by ±1 along the
last two axes of an 8×32×32 array plus eight elementwise ops), µs per step:

==============================================  =======  =======
rolls along axis 1 / along axis 2               float64  float32
==============================================  =======  =======
Slice+Concat / Slice+Concat                     36.7     26.8
Gather / Slice+Concat                           32.7     25.1
Gather / shared Pad + Slice                     31.0     24.6
==============================================  =======  =======

A single roll stays as it is (Pad + Slice measured no faster than Slice+Concat for one roll, and
on the last axis 3.7 µs slower for float64 8×32×32).

Rules:
- a roll is a Concat (two inputs) of two Slices of the same value ``x`` along the Concat's axis,
  with constant starts/ends/axes and no steps other than 1: the first Slice ``[n-s, n)``, the
  second ``[0, n-s)``, where ``n`` is ``x``'s static size on that axis and ``0 < s < n``;
- two or more distinct rolls of the same ``x`` along the same axis are rewritten, each taking its
  shift from the narrower side (``s`` before or ``n - s`` after), so ±1 pads one row on each side;
- only from opset 19 (the first with ``wrap``), for element types onnxruntime's Pad kernel takes
  (:data:`jax2onnx.dtypes.PAD`), and never for a Concat whose output is a graph output;
- each graph (function and control-flow bodies included) is handled on its own.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from ..dtypes import PAD
from .manager import all_graphs

#: The first default-domain opset whose Pad has ``mode="wrap"``.
WRAP_PAD_OPSET = 19


def _const_ints(v: ir.Value | None) -> list[int] | None:
    if v is None:
        return None
    tensor = v.const_value
    if tensor is None:
        node = v.producer()
        if node is None or node.op_type != "Constant" or "value" not in node.attributes:
            return None
        tensor = node.attributes["value"].value
    return [int(a) for a in np.asarray(tensor.numpy()).reshape(-1)]


def _slice_range(node: ir.Node | None, axis: int, rank: int) -> tuple[ir.Value, int, int] | None:
    """``(x, start, end)`` when ``node`` is a Slice of ``x`` along ``axis`` alone with step 1."""
    if node is None or node.op_type != "Slice" or node.domain not in ("", "ai.onnx") or len(node.inputs) < 4:
        return None
    starts, ends, axes = (_const_ints(node.inputs[i]) for i in (1, 2, 3))
    steps = _const_ints(node.inputs[4]) if len(node.inputs) > 4 and node.inputs[4] is not None else [1]
    if starts is None or ends is None or axes is None or len(axes) != 1 or len(starts) != 1 or len(ends) != 1:
        return None
    if steps != [1] or axes[0] % rank != axis or node.inputs[0] is None:
        return None
    return node.inputs[0], starts[0], ends[0]


def _roll(concat: ir.Node) -> tuple[ir.Value, int, int, int] | None:
    """``(x, axis, n, shift)`` when ``concat`` is a roll of ``x`` by ``shift`` (0 < shift < n)."""
    if len(concat.inputs) != 2 or any(v is None for v in concat.inputs) or "axis" not in concat.attributes:
        return None
    head, tail = (v.producer() for v in concat.inputs)
    x = head.inputs[0] if head is not None and head.inputs else None
    if x is None or x.shape is None:
        return None
    rank = len(x.shape)
    axis = concat.attributes["axis"].value % rank if rank else None
    n = x.shape[axis] if axis is not None else None
    if not isinstance(n, int):
        return None
    first, second = _slice_range(head, axis, rank), _slice_range(tail, axis, rank)
    if first is None or second is None or first[0] is not x or second[0] is not x:
        return None
    (_, start, end), (_, start2, end2) = first, second
    # the head runs from n - s to the end (an end past n is clamped), the tail from 0 to n - s
    if not (0 < start < n and end >= n and start2 == 0 and end2 == start):
        return None
    return x, axis, n, n - start


def _ints_node(values: list[int], name: str) -> ir.Node:
    tensor = ir.tensor(np.asarray(values, np.int64), name=name)
    out = ir.Value(name=name, type=ir.TensorType(ir.DataType.INT64), shape=ir.Shape([len(values)]))
    return ir.Node("", "Constant", [], [ir.AttrTensor("value", tensor)], outputs=[out], name=f"{name}_node")


class SharedWrapPadPass(ir.passes.InPlacePass):
    def call(self, model: ir.Model) -> ir.passes.PassResult:
        if model.graph.opset_imports.get("", 0) < WRAP_PAD_OPSET:
            return ir.passes.PassResult(model, False)
        graphs = list(all_graphs(model))
        shared = [(graph, rolls) for graph in graphs for rolls in self._groups(graph) if len({r[4] for r in rolls}) > 1]
        if not shared:
            return ir.passes.PassResult(model, False)
        taken = {v.name for g in graphs for node in g for v in (*node.inputs, *node.outputs) if v is not None}
        counter = 0
        for graph, rolls in shared:
            counter += 1
            while any(name == f"wrap_pad{counter}" or name.startswith(f"wrap_pad{counter}_") for name in taken):
                counter += 1  # a fresh prefix for the new values' names
            self._rewrite(graph, rolls, f"wrap_pad{counter}")
        return ir.passes.PassResult(model, True)

    @staticmethod
    def _groups(graph: ir.Graph | ir.Function) -> list[list[tuple[ir.Node, ir.Value, int, int, int]]]:
        """The rolls of ``graph`` (not producing a graph output, of a dtype Pad takes), grouped by
        the value they roll and the axis."""
        outputs = {id(v) for v in graph.outputs}
        groups: dict[tuple[int, int], list[tuple[ir.Node, ir.Value, int, int, int]]] = {}
        for node in graph:
            if node.op_type != "Concat" or node.domain not in ("", "ai.onnx") or id(node.outputs[0]) in outputs:
                continue
            found = _roll(node)
            if found is None or found[0].type is None or found[0].type.dtype.numpy() not in PAD:
                continue
            x, axis, n, shift = found
            groups.setdefault((id(x), axis), []).append((node, x, axis, n, shift))
        return list(groups.values())

    @staticmethod
    def _rewrite(graph: ir.Graph | ir.Function, rolls: list, name: str) -> None:
        _, x, axis, n, _ = rolls[0]
        # each shift from its narrower side: s rows before, or n - s rows after
        before = max([s for *_, s in rolls if s <= n - s], default=0)
        after = max([n - s for *_, s in rolls if s > n - s], default=0)
        consts = [_ints_node([before, after], f"{name}_pads"), _ints_node([axis], f"{name}_axes")]
        padded_shape = None
        if x.shape is not None:
            dims = list(x.shape)
            dims[axis] = n + before + after
            padded_shape = ir.Shape(dims)
        padded = ir.Value(name=name, type=x.type, shape=padded_shape)
        pad = ir.Node(
            "",
            "Pad",
            [x, consts[0].outputs[0], None, consts[1].outputs[0]],
            [ir.AttrString("mode", "wrap")],
            outputs=[padded],
            name=f"{name}_node",
        )
        graph.insert_before(rolls[0][0], [*consts, pad])
        for i, (concat, _, _, _, s) in enumerate(rolls):
            # out[i] = x[(i - s) mod n] = padded[i - s + before]; from the after side, i + n - s + before
            start = before - s if s <= n - s else before + n - s
            bounds = [_ints_node([start], f"{name}_start{i}"), _ints_node([start + n], f"{name}_end{i}")]
            old = concat.outputs[0]
            new = ir.Value(name=None, type=old.type, shape=old.shape)
            piece = ir.Node(
                "",
                "Slice",
                [padded, bounds[0].outputs[0], bounds[1].outputs[0], consts[1].outputs[0]],
                outputs=[new],
                name=f"{name}_slice{i}",
            )
            graph.insert_before(concat, [*bounds, piece])
            ir.convenience.replace_all_uses_with(old, new)
            old_name, old.name = old.name, None
            new.name = old_name
            graph.remove(concat, safe=True)
