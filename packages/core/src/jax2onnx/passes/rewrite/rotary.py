"""Rotary position embeddings written by hand → ``RotaryEmbedding`` (opset 23).

Hugging Face's Flax Llama, Mistral and Gemma (and hand-written RoPE in the same style) rotate the
queries and keys as ``x * cos + rotate_half(x) * sin``, ``rotate_half(x) = concat(-x[..., h:],
x[..., :h])``, with ``cos``/``sin`` rows gathered from a constant table by the position ids. Lowered:
Mul, two Slices (or a Split), Neg, Concat, Mul, Add per rotated tensor, plus the table's Gather and
Split: 7 nodes for each of q and k.

Rule (anchor: the ``Add``): ``x`` of layout (batch, seq, heads, size) is a Reshape of a (batch,
seq, heads·size) value; ``rotate_half`` takes the two halves of x's last axis; ``cos`` and ``sin``
are (batch, seq, 1, size) rows of constant tables gathered by int position ids of shape (batch,
seq) (through a Split of one sin|cos table, as HF writes it, or one table each), and each table
row repeats its first half (``concat([f, f])``, what the half-split rotation multiplies with).
Then ``RotaryEmbedding(x3, cos_half, sin_half, position_ids, num_heads)`` on the 3-D value and the
Reshape after it: the Gather, Split and arithmetic go. With a static batch the positions fold, and
``cos``/``sin`` are constant (batch, seq, 1, size) rows: they become the op's 3-D caches (batch,
seq, size/2) without position ids. Exact: the op computes ``x1·cos − x2·sin``
and ``x2·cos + x1·sin``, the same products and sums. Not rewritten: the interleaved (GPT-J,
``rotate_every_two``) form, positions that are not a (batch, seq) input of the Gather (onnxruntime's
kernel requires the batch axis in full), a table whose halves differ.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from ...ir.constants import constant_ints, constant_tensor
from ...ir.opsets import op_available
from ..manager import rewrite_nodes
from .onnxruntime import _is, _replace_value


def _scalar(v: ir.Value | None) -> float | None:
    t = constant_tensor(v)
    if t is None or int(np.prod([int(d) for d in t.shape])) != 1:
        return None
    return float(np.asarray(t.numpy()).reshape(-1)[0])


def _half(v: ir.Value | None, x: ir.Value, size: int) -> str | None:
    """"lo" or "hi" when ``v`` is the first or second half of x's last axis."""
    node = v.producer() if v is not None else None
    if _is(node, "Split") and node.inputs[0] is x:
        axis = node.attributes.get("axis")
        axis = 0 if axis is None else int(axis.value)
        sizes = constant_ints(node.inputs[1]) if len(node.inputs) > 1 and node.inputs[1] is not None else None
        if axis % 4 != 3 or len(node.outputs) != 2 or (sizes is not None and sizes != [size // 2] * 2):
            return None
        return "lo" if v is node.outputs[0] else "hi"
    if not _is(node, "Slice") or node.inputs[0] is not x or len(node.inputs) < 3:
        return None
    starts, ends = constant_ints(node.inputs[1]), constant_ints(node.inputs[2])
    axes = constant_ints(node.inputs[3]) if len(node.inputs) > 3 and node.inputs[3] is not None else [0, 1, 2, 3]
    steps = constant_ints(node.inputs[4]) if len(node.inputs) > 4 and node.inputs[4] is not None else None
    if starts is None or ends is None or axes is None or len(axes) != 1 or axes[0] % 4 != 3:
        return None
    if steps is not None and steps != [1]:
        return None
    start, end = starts[0] % size if starts[0] < 0 else starts[0], min(ends[0] if ends[0] >= 0 else ends[0] + size, size)
    if (start, end) == (0, size // 2):
        return "lo"
    if (start, end) == (size // 2, size):
        return "hi"
    return None


def _negated(v: ir.Value | None) -> ir.Value | None:
    node = v.producer() if v is not None else None
    if _is(node, "Neg"):
        return node.inputs[0]
    if _is(node, "Mul"):
        for i in (0, 1):
            if _scalar(node.inputs[1 - i]) == -1.0:
                return node.inputs[i]
    return None


def _rotated_half(v: ir.Value | None, x: ir.Value, size: int) -> bool:
    """``v = concat(-x[..., h:], x[..., :h])`` over the last axis."""
    node = v.producer() if v is not None else None
    if not _is(node, "Concat") or len(node.inputs) != 2:
        return False
    axis = node.attributes.get("axis")
    if axis is None or int(axis.value) % 4 != 3:
        return False
    return _half(_negated(node.inputs[0]), x, size) == "hi" and _half(node.inputs[1], x, size) == "lo"


def _table_rows(v: ir.Value | None, size: int) -> tuple[np.ndarray, ir.Value] | None:
    """(table (positions, size), position ids) when ``v`` is (batch, seq, 1, size) rows of a
    constant table gathered by ids, possibly one part of a Split of the gathered rows."""
    const = constant_tensor(v)
    if const is not None:  # positions known at export (a static batch): the rows themselves
        t = np.asarray(const.numpy())
        if t.ndim != 4 or t.shape[2] != 1 or t.shape[3] != size:
            return None
        return t[:, :, 0, :], None
    node = v.producer() if v is not None else None
    part = None
    if _is(node, "Split"):
        axis = node.attributes.get("axis")
        sizes = constant_ints(node.inputs[1]) if len(node.inputs) > 1 and node.inputs[1] is not None else None
        rows = node.inputs[0]
        if rows is None or rows.shape is None or axis is None or int(axis.value) % len(rows.shape) != len(rows.shape) - 1:
            return None
        if sizes is None:
            if not isinstance(rows.shape[-1], int):
                return None
            sizes = [rows.shape[-1] // len(node.outputs)] * len(node.outputs)
        k = list(node.outputs).index(v)
        part = (sum(sizes[:k]), sum(sizes[:k + 1]))
        node = rows.producer()
    if not _is(node, "Gather"):
        return None
    axis = node.attributes.get("axis")
    if axis is not None and int(axis.value) != 0:
        return None
    table, ids = constant_tensor(node.inputs[0]), node.inputs[1]
    if table is None or ids is None or ids.shape is None or len(ids.shape) != 2:
        return None
    t = np.asarray(table.numpy())
    if t.ndim != 3 or t.shape[1] != 1:  # (positions, 1, width): the rows broadcast over the heads
        return None
    t = t[:, 0, :]
    if part is not None:
        t = t[:, part[0]:part[1]]
    if t.shape[1] != size:
        return None
    return t, ids


class RotaryEmbeddings:
    name = "rotary"

    def __init__(self, opset: int) -> None:
        self.opset = opset
        self._made = 0
        self._ids: dict[int, ir.Value] = {}  # position ids, as int64, once per value
        self._caches: dict[tuple, ir.Value] = {}  # half tables by content

    def apply(self, model: ir.Model, counts: dict[str, int]) -> bool:
        if not op_available("RotaryEmbedding", self.opset):
            return False
        return rewrite_nodes([model.graph], self._rotary, counts, "rotary_embedding")

    def _rotary(self, graph: ir.Graph, add: ir.Node) -> bool:
        if not _is(add, "Add"):
            return False
        out = add.outputs[0]
        for a, b in ((add.inputs[0], add.inputs[1]), (add.inputs[1], add.inputs[0])):
            found = self._terms(a, b)
            if found is not None:
                break
        else:
            return False
        x, cos, sin, ids, reshape = found
        x3 = reshape.inputs[0]
        heads, size = x.shape[2], x.shape[3]
        half = size // 2
        for table in (cos, sin):
            if not np.array_equal(table[..., :half], table[..., half:]):
                return False  # the half-split op multiplies both halves by the same row
        if ids is None:  # constant (batch, seq, size) rows: the op's 3-D caches, no position ids
            if cos.shape[:2] != tuple(x.shape[:2]):
                return False  # onnxruntime's kernel needs the batch and sequence axes in full
        elif ids.shape[0] != x.shape[0] or ids.shape[1] != x.shape[1]:
            return False
        self._made += 1  # unique names even where the graph's nodes have none
        stem = f"{add.name or 'rotary'}_{self._made}"
        caches = []
        for name, table in (("cos", cos), ("sin", sin)):
            rows = np.ascontiguousarray(table[..., :half]).astype(np.float32)
            key = (rows.shape, rows.tobytes())
            if key not in self._caches:  # q and k, and every layer, share their tables
                value = ir.Value(name=f"{stem}_{name}_cache", const_value=ir.tensor(rows))
                value.const_value.name = value.name
                graph.register_initializer(value)
                self._caches[key] = value
            caches.append(self._caches[key])
        ids64 = [] if ids is None else [self._int64_ids(graph, ids, add, stem)]
        node = ir.Node("", "RotaryEmbedding", [x3, *caches, *ids64], [ir.AttrInt64("num_heads", heads)],
                       name=f"{stem}_rotary")
        y3 = node.outputs[0]
        y3.name, y3.type, y3.shape = f"{stem}_rotated", x3.type, x3.shape
        back = ir.Node("", "Reshape", [y3, reshape.inputs[1]], list(reshape.attributes.values()),
                       name=f"{stem}_heads")
        y4 = back.outputs[0]
        y4.name, y4.type, y4.shape = f"{out.name or stem}_rotary", out.type, out.shape
        graph.insert_before(add, [node, back])
        _replace_value(graph, out, y4)
        return True

    def _int64_ids(self, graph: ir.Graph, ids: ir.Value, before: ir.Node, stem: str) -> ir.Value:
        if ids.dtype == ir.DataType.INT64:
            return ids
        if id(ids) not in self._ids:
            cast = ir.Node("", "Cast", [ids], [ir.AttrInt64("to", int(ir.DataType.INT64))], name=f"{stem}_ids")
            out = cast.outputs[0]
            out.name, out.type, out.shape = f"{stem}_position_ids", ir.TensorType(ir.DataType.INT64), ids.shape
            producer = ids.producer()
            if producer is not None and producer.graph is graph:
                graph.insert_after(producer, cast)
            else:
                graph.insert_before(next(iter(graph)), cast)
            self._ids[id(ids)] = out
        return self._ids[id(ids)]

    @staticmethod
    def _terms(a: ir.Value | None, b: ir.Value | None):
        """(x, cos table, sin table, ids, x's Reshape) when ``a = x * cos`` and ``b = rotate_half(x) * sin``."""
        ma = a.producer() if a is not None else None
        mb = b.producer() if b is not None else None
        if not (_is(ma, "Mul") and _is(mb, "Mul")):
            return None
        for x, cos_v in ((ma.inputs[0], ma.inputs[1]), (ma.inputs[1], ma.inputs[0])):
            reshape = x.producer() if x is not None else None
            if not _is(reshape, "Reshape") or x.dtype != ir.DataType.FLOAT or x.shape is None or len(x.shape) != 4:
                continue
            x3 = reshape.inputs[0]
            heads, size = x.shape[2], x.shape[3]
            if not (isinstance(heads, int) and isinstance(size, int)) or size % 2 or x3 is None or x3.shape is None \
                    or len(x3.shape) != 3 or x3.shape[2] != heads * size:
                continue
            for rot, sin_v in ((mb.inputs[0], mb.inputs[1]), (mb.inputs[1], mb.inputs[0])):
                if not _rotated_half(rot, x, size):
                    continue
                cos, sin = _table_rows(cos_v, size), _table_rows(sin_v, size)
                if cos is None or sin is None or cos[1] is not sin[1] or cos[0].shape != sin[0].shape:
                    continue
                return x, cos[0], sin[0], cos[1], reshape
        return None
