"""A roll (``Concat`` of two ``Slice``s of one value) reads the pieces of one ``Split`` instead;
rolls of one value along one axis share that Split.

JAX rolls an array (``jnp.roll``, or lax code doing the same) as a ``concatenate`` of two slices,
exported as ``Concat(Slice(x, [n-s, n)), Slice(x, [0, n-s)))`` along one axis. One Split of ``x`` at
every roll's cut point ``n - s`` gives all the pieces; each roll is then one Concat of the pieces
from its cut to the end and from the start to its cut. A stencil's ±1 rolls along an axis become
one Split (three pieces) and two Concats instead of four Slices and two Concats. A roll moves data
only, so the values are bitwise the same.

Measured in onnxruntime 1.32 (CPU, one thread) on the heat bench step (four rolls by ±1 along the
last two axes of an 8×32×32 array plus eight elementwise ops; the eight ops alone 14.0 / 9.8),
µs per step, symbolic batch (a static batch measured within 1 µs of it):

===============================================  =======  =======
rolls along axis 1 / along axis 2                float64  float32
===============================================  =======  =======
Slice+Concat / Slice+Concat (JAX's form)          37.1     27.3
Gather / Slice+Concat                             33.3     25.4
Gather / one wrap-Pad, a Slice per roll           31.0     24.9
Gather / a Split and a Concat per roll            29.4     21.4
Gather / one shared Split, a Concat per roll      28.2     20.6
===============================================  =======  =======

A single roll as Split + Concat measured no slower than Slice + Slice + Concat anywhere (30
shapes and dtypes from 16 elements to 2 MiB, rolls chained one after another: within 2 %), and
1.7 µs (float64) faster per roll inside the heat step. The whole heat_fori_f64 bench model (50
steps in a Loop): 1849 µs with JAX's form, 1470 µs with this pass alone, 1396 µs with the jnp
pack's Gather along axis 1 as well (JAX-jit 276 µs, same run).

Rules:
- a roll is a Concat (two inputs) of two Slices of the same value ``x`` along the Concat's axis,
  with constant starts/ends/axes and no steps other than 1: the first Slice ``[n-s, n)``, the
  second ``[0, n-s)``, where ``n`` is ``x``'s static size on that axis and ``0 < s < n``;
- the rolls of one ``x`` along one axis (one roll alone too) read one Split at their cut points;
  each Concat keeps its output (graph outputs included) and gets the pieces as inputs; the
  Slices go when nothing else reads them;
- Split and Concat copy bytes and take every element type; the Split form (``split`` as an input)
  is opset 13's, older than any opset an export targets;
- each graph (function and control-flow bodies included) is handled on its own.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from ..ir.constants import constant_ints
from .manager import NO_DEAD_CODE, all_graphs


def _slice_range(node: ir.Node | None, axis: int, rank: int) -> tuple[ir.Value, int, int] | None:
    """``(x, start, end)`` when ``node`` is a Slice of ``x`` along ``axis`` alone with step 1."""
    if node is None or node.op_type != "Slice" or node.domain not in ("", "ai.onnx") or len(node.inputs) < 4:
        return None
    starts, ends, axes = (constant_ints(node.inputs[i]) for i in (1, 2, 3))
    steps = constant_ints(node.inputs[4]) if len(node.inputs) > 4 and node.inputs[4] is not None else [1]
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


class RollSplitPass(ir.passes.InPlacePass):
    #: rolls of one value and axis share a Split once duplicates are merged and their leftovers gone
    needs = frozenset({NO_DEAD_CODE})
    produces_dead_code = True

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        graphs = list(all_graphs(model))
        found = [(graph, rolls) for graph in graphs for rolls in self._groups(graph)]
        if not found:
            return ir.passes.PassResult(model, False)
        taken = {v.name for g in graphs for node in g for v in (*node.inputs, *node.outputs) if v is not None}
        counter = 0
        for graph, rolls in found:
            counter += 1
            while any(name == f"roll_split{counter}" or name.startswith(f"roll_split{counter}_") for name in taken):
                counter += 1  # a fresh prefix for the new values' names
            self._rewrite(graph, rolls, f"roll_split{counter}")
        return ir.passes.PassResult(model, True)

    @staticmethod
    def _groups(graph: ir.Graph | ir.Function) -> list[list[tuple[ir.Node, ir.Value, int, int, int]]]:
        """The rolls of ``graph`` grouped by the value they roll and the axis."""
        groups: dict[tuple[int, int], list[tuple[ir.Node, ir.Value, int, int, int]]] = {}
        for node in graph:
            if node.op_type != "Concat" or node.domain not in ("", "ai.onnx"):
                continue
            found = _roll(node)
            if found is not None:
                x, axis, n, shift = found
                groups.setdefault((id(x), axis), []).append((node, x, axis, n, shift))
        return list(groups.values())

    @staticmethod
    def _rewrite(graph: ir.Graph | ir.Function, rolls: list, name: str) -> None:
        _, x, axis, n, _ = rolls[0]
        cuts = sorted({n - s for *_, s in rolls})
        bounds = [0, *cuts, n]
        sizes = [b - a for a, b in zip(bounds, bounds[1:])]
        pieces = []
        for i, size in enumerate(sizes):
            dims = list(x.shape)
            dims[axis] = size
            pieces.append(ir.Value(name=f"{name}_{i}", type=x.type, shape=ir.Shape(dims)))
        split_sizes = _ints_node(sizes, f"{name}_sizes")
        split = ir.Node(
            "", "Split", [x, split_sizes.outputs[0]], [ir.AttrInt64("axis", axis)], outputs=pieces, name=f"{name}_node"
        )
        graph.insert_before(rolls[0][0], [split_sizes, split])
        for concat, *_, s in rolls:
            # the roll by s is x[n-s:] then x[:n-s]: the pieces from its cut on, then those before it
            k = cuts.index(n - s) + 1
            order = pieces[k:] + pieces[:k]
            if len(order) == len(concat.inputs):
                for i, piece in enumerate(order):
                    concat.replace_input_with(i, piece)
            else:
                _replace_concat(graph, concat, order)


def _replace_concat(graph: ir.Graph | ir.Function, concat: ir.Node, inputs: list[ir.Value]) -> None:
    """A Concat of ``inputs`` in ``concat``'s place: its readers, and the graph output it may be
    (under the same name), move to the new one. (Node.resize_inputs is newer than the oldest
    onnx-ir the package supports.)"""
    old = concat.outputs[0]
    new = ir.Node("", "Concat", inputs, list(concat.attributes.values()), name=concat.name)
    out = new.outputs[0]
    out.type, out.shape = old.type, old.shape
    graph.insert_before(concat, new)
    for i, v in enumerate(graph.outputs):
        if v is old:
            graph.outputs[i] = out
    ir.convenience.replace_all_uses_with(old, out)
    graph.remove(concat, safe=True)
    out.name = old.name
