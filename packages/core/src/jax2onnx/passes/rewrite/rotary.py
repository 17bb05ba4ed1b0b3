"""Rotary position embeddings written by hand → ``RotaryEmbedding`` (opset 23).

The forms libraries write, all ``x * cos + rotate(x) * sin`` per rotated tensor (anchor: the ``Add``):

- half-split (HF Flax Llama, Mistral, Gemma; GPT-NeoX): ``rotate_half(x) = concat(-x[..., h:],
  x[..., :h])``, each table row repeating its first half (``concat([f, f])``);
- interleaved (HF Flax GPT-J's ``rotate_every_two``, RoFormer): ``stack([-x[..., 1::2],
  x[..., ::2]], -1)`` merged back into the last axis (strided Slices, or Gathers of the constant
  indices), each table value repeated side by side (``f0 f0 f1 f1 ...``) → ``interleaved=1``;
- partial (GPT-J, GPT-NeoX): ``x`` is the first ``rotary_dim`` features of the head, and the Add's
  only reader concatenates the rotation with the rest → ``rotary_embedding_dim``, and the op
  replaces the Concat (it passes the rest through itself).

The products are Muls, or RoFormer's Einsum ``bslh,...sh->bslh`` (a broadcast product). ``x`` of
layout (batch, seq, heads, size) is a Reshape of a (batch, seq, heads·size) value: the op runs on
that with ``num_heads`` and a Reshape after it. ``cos`` and ``sin`` are (batch, seq, 1, size) rows
of constant tables gathered by int position ids of shape (batch, seq) (through a Split of one
sin|cos table, as HF writes it, or one table each): the op gets the half-width tables and the ids.
Or they are constant rows (positions known at export), or rows built from constants and the
batch size only, that size used only as a shape to expand to (HF GPT-J under a symbolic batch:
positions broadcast to the batch, ``jnp.take``'s fill Where, a Split, a per-pair repeat), evaluated
at batch 1 by onnx's reference evaluator: with a static batch the op's 3-D caches (batch, seq,
size/2); with a symbolic batch, rows the same for each batch entry become (seq, size/2) caches
read at ids 0..seq-1 expanded to the batch (onnxruntime's kernel wants the batch axis in full).
Exact: the op computes ``x1·cos − x2·sin`` and ``x2·cos + x1·sin``, the same products and sums.
Not rewritten: positions that are neither a (batch, seq) input of the Gather nor known at export,
a table that does not repeat the way the rotation multiplies with it, rows that differ across
heads, rows that read the batch size as a value.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from ...ir.constants import constant_ints, constant_tensor
from ...ir.opsets import op_available
from ..manager import NONDETERMINISTIC_OPS, is_op, replace_value
from ..rules import Rule, RuleFamily, miss, no_match, value_label
from .emit import add_initializer
from .evaluate import evaluate


def _scalar(v: ir.Value | None) -> float | None:
    t = constant_tensor(v)
    if t is None or int(np.prod([int(d) for d in t.shape])) != 1:
        return None
    return float(np.asarray(t.numpy()).reshape(-1)[0])


def _half(v: ir.Value | None, x: ir.Value, size: int) -> str | None:
    """"lo" or "hi" when ``v`` is the first or second half of x's last axis."""
    node = v.producer() if v is not None else None
    if is_op(node, "Split") and node.inputs[0] is x:
        axis = node.attributes.get("axis")
        axis = 0 if axis is None else int(axis.value)
        sizes = constant_ints(node.inputs[1]) if len(node.inputs) > 1 and node.inputs[1] is not None else None
        if axis % 4 != 3 or len(node.outputs) != 2 or (sizes is not None and sizes != [size // 2] * 2):
            return None
        return "lo" if v is node.outputs[0] else "hi"
    if not is_op(node, "Slice") or node.inputs[0] is not x or len(node.inputs) < 3:
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
    if is_op(node, "Neg"):
        return node.inputs[0]
    if is_op(node, "Mul"):
        for i in (0, 1):
            if _scalar(node.inputs[1 - i]) == -1.0:
                return node.inputs[i]
    return None


def _rotated_half(v: ir.Value | None, x: ir.Value, size: int) -> bool:
    """``v = concat(-x[..., h:], x[..., :h])`` over the last axis."""
    node = v.producer() if v is not None else None
    if not is_op(node, "Concat") or len(node.inputs) != 2:
        return False
    axis = node.attributes.get("axis")
    if axis is None or int(axis.value) % 4 != 3:
        return False
    return _half(_negated(node.inputs[0]), x, size) == "hi" and _half(node.inputs[1], x, size) == "lo"


def _table_rows(v: ir.Value | None, size: int) -> tuple[np.ndarray, ir.Value] | None:
    """(table (positions, size), position ids) when ``v`` is (batch, seq, 1, size) rows of a
    constant table gathered by ids, possibly one part of a Split of the gathered rows (constant
    rows, positions folded at export, are :func:`_constant_rows`)."""
    node = v.producer() if v is not None else None
    part = None
    if is_op(node, "Split"):
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
    if not is_op(node, "Gather"):
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


def _last_axis(node: ir.Node, rank: int) -> bool:
    """Whether ``node``'s ``axes`` input (Slice) names only the last axis of a rank-``rank`` value."""
    axes = constant_ints(node.inputs[3]) if len(node.inputs) > 3 and node.inputs[3] is not None else None
    return axes is not None and len(axes) == 1 and axes[0] % rank == rank - 1


def _feature_slice(v: ir.Value | None, size) -> tuple[ir.Value, int, int] | None:
    """(source, start, end) when ``v`` is ``source[..., start:end]`` (step 1) of a rank-4 source."""
    node = v.producer() if v is not None else None
    if not is_op(node, "Slice") or len(node.inputs) < 4 or not _last_axis(node, 4) or not isinstance(size, int):
        return None
    steps = constant_ints(node.inputs[4]) if len(node.inputs) > 4 and node.inputs[4] is not None else [1]
    starts, ends = constant_ints(node.inputs[1]), constant_ints(node.inputs[2])
    if starts is None or ends is None or steps != [1]:
        return None
    start = starts[0] + size if starts[0] < 0 else starts[0]
    end = min(ends[0] + size if ends[0] < 0 else ends[0], size)
    return node.inputs[0], start, end


def _every_other(v: ir.Value | None, x: ir.Value, size: int) -> int | None:
    """0 or 1 when ``v`` is ``x[..., 0::2]`` or ``x[..., 1::2]`` (a strided Slice, or a Gather of
    the constant indices, what jnp's strided indexing lowers to)."""
    node = v.producer() if v is not None else None
    if node is None or node.inputs[0] is not x:
        return None
    if is_op(node, "Slice") and len(node.inputs) > 4 and _last_axis(node, 4):
        starts, ends, steps = (constant_ints(node.inputs[i]) for i in (1, 2, 4))
        if starts in ([0], [1]) and steps == [2] and ends is not None and ends[0] >= size:
            return starts[0]
        return None
    if is_op(node, "Gather"):
        axis = node.attributes.get("axis")
        idx = constant_tensor(node.inputs[1])
        if axis is None or int(axis.value) % 4 != 3 or idx is None:
            return None
        idx = np.asarray(idx.numpy()).reshape(-1)
        for first in (0, 1):
            if np.array_equal(idx, np.arange(first, size, 2)):
                return first
    return None


def _unsqueezed_last(v: ir.Value | None) -> ir.Value | None:
    """``u`` when ``v = u[..., None]`` (an Unsqueeze at the new last axis of a rank-4 ``u``)."""
    node = v.producer() if v is not None else None
    if not is_op(node, "Unsqueeze") or len(node.inputs) < 2 or constant_ints(node.inputs[1]) not in ([4], [-1]):
        return None
    return node.inputs[0]


def _rotated_pairs(v: ir.Value | None, x: ir.Value, size: int) -> bool:
    """``v = stack([-x[..., 1::2], x[..., ::2]], -1).reshape(x.shape)``: GPT-J's ``rotate_every_two``
    and RoFormer's rotation, each pair (x0, x1) turned into (-x1, x0)."""
    node = v.producer() if v is not None else None
    if not is_op(node, "Reshape") or v.shape is None or x.shape is None or len(v.shape) != 4:
        return False
    if v.shape[3] != size or v.shape[1] != x.shape[1] or v.shape[2] != x.shape[2]:
        return False
    cat = node.inputs[0].producer() if node.inputs[0] is not None else None
    if not is_op(cat, "Concat") or len(cat.inputs) != 2:
        return False
    axis = cat.attributes.get("axis")
    if axis is None or int(axis.value) % 5 != 4:
        return False
    return _every_other(_negated(_unsqueezed_last(cat.inputs[0])), x, size) == 1 \
        and _every_other(_unsqueezed_last(cat.inputs[1]), x, size) == 0


def _factor(v: ir.Value | None) -> list[tuple[ir.Value, ir.Value, str | None]]:
    """The ways ``v`` is x times a table: [(x, table, einsum spec)], Mul either way round, or an
    Einsum that only broadcasts its second operand over the first (RoFormer: ``bslh,...sh->bslh``);
    the spec says where the table's axes sit among x's."""
    node = v.producer() if v is not None else None
    if is_op(node, "Mul"):
        return [(node.inputs[0], node.inputs[1], None), (node.inputs[1], node.inputs[0], None)]
    if is_op(node, "Einsum") and len(node.inputs) == 2:
        eq = node.attributes.get("equation")
        if eq is None:
            return []
        eq = eq.value.replace(" ", "")
        ins, _, out = eq.partition("->")
        parts = ins.split(",")
        if len(parts) != 2 or parts[0] != out or "." in out:
            return []
        table = parts[1][3:] if parts[1].startswith("...") else parts[1]
        order = [out.index(c) for c in table if c in out]
        if "." in table or len(order) != len(table) or order != sorted(order) or len(set(table)) != len(table):
            return []
        return [(node.inputs[0], node.inputs[1], table + "->" + out)]
    return []


def _constant_rows(v: ir.Value | None, spec: str | None, size: int, opset: int | None = None) -> np.ndarray | None:
    """A constant multiplier, or with ``opset`` one broadcast over the batch
    (:func:`_broadcast_rows`), as (batch or 1, seq, 1, size) rows; None for anything else."""
    const = constant_tensor(v)
    if const is not None:
        t = np.asarray(const.numpy())
    elif spec is None and opset is not None and (t := _broadcast_rows(v, opset)) is not None:
        pass
    else:
        return None
    if spec is not None:  # Einsum: put the table's axes where x's letters are, size 1 elsewhere
        table, out = spec.split("->")
        if t.ndim != len(table):
            return None
        t = t.reshape([t.shape[table.index(c)] if c in table else 1 for c in out])
    if t.ndim > 4:
        return None
    t = t.reshape((1,) * (4 - t.ndim) + t.shape)
    if t.shape[2] != 1 or t.shape[3] != size:
        return None
    return t[:, :, 0, :]


_MAX_CONE = 24  # nodes a broadcast table may take to build (GPT-J's: 10)


def _batch_size_of(node: ir.Node | None) -> bool:
    """Whether ``node`` reads a value's batch size: ``Shape(v, start=0, end=1)``."""
    if not is_op(node, "Shape"):
        return False
    start, end = node.attributes.get("start"), node.attributes.get("end")
    return start is not None and int(start.value) == 0 and end is not None and int(end.value) == 1


def _broadcast_rows(v: ir.Value | None, opset: int) -> np.ndarray | None:
    """``v`` at batch 1 when it is built from constants and the batch size only, the batch size
    used only as the leading entry of shapes constants are expanded to: then every batch row
    holds the same values (HF GPT-J's table rows of positions 0..seq-1 under a symbolic batch,
    gathered, fill-masked, split and repeated per pair), and onnx's reference evaluator computes
    them at batch 1. None for anything else, or when the rows hold a NaN (a position out of the
    table's range)."""
    if v is None or v.dtype != ir.DataType.FLOAT or v.producer() is None:
        return None
    order: list[ir.Node] = []
    seen: set[int] = set()
    sizes: list[ir.Value] = []

    def visit(value: ir.Value) -> bool:
        node = value.producer()
        if constant_tensor(value) is not None:
            return True
        if _batch_size_of(node):
            sizes.append(value)
            return True
        if node is None or node.domain not in ("", "ai.onnx") or node.op_type in NONDETERMINISTIC_OPS:
            return False
        if id(node) in seen:
            return True
        seen.add(id(node))
        if len(seen) > _MAX_CONE or not all(i is None or visit(i) for i in node.inputs):
            return False
        order.append(node)
        return True

    if not visit(v) or not sizes:
        return None
    for size in sizes:  # the batch size only as a shape to expand to, never as data
        for user, index in size.uses():
            if id(user) not in seen:
                continue
            if is_op(user, "Concat") and all(i is size or constant_tensor(i) is not None for i in user.inputs):
                targets = [u for u in user.outputs[0].uses() if id(u[0]) in seen]
            else:
                targets = [(user, index)]
            if not all(is_op(t, "Expand") and i == 1 for t, i in targets) or not targets:
                return None
    one = ir.tensor(np.array([1], np.int64))  # the batch size, at batch 1
    got = evaluate(order, [v], opset, constants=lambda value: one if value in sizes else constant_tensor(value))
    if got is None:
        return None
    (rows,) = got
    rows = np.asarray(rows)
    if rows.ndim != 4 or rows.shape[0] != 1 or np.isnan(rows).any():
        return None
    return rows


def _cache(rows: np.ndarray, interleaved: bool) -> np.ndarray | None:
    """The op's half-width cache of a full-width row table, or None when the table does not repeat
    the way the rotation multiplies with it (each value twice, side by side or half after half)."""
    half = rows.shape[-1] // 2
    lo, hi = (rows[..., 0::2], rows[..., 1::2]) if interleaved else (rows[..., :half], rows[..., half:])
    return lo if np.array_equal(lo, hi) else None


def _heads_of_3d(reshape: ir.Node, x4: ir.Value) -> bool:
    """Whether ``x4`` (batch, seq, heads, size) is the Reshape of a (batch, seq, heads·size) value,
    the 3-D layout the op takes with ``num_heads``."""
    x3 = reshape.inputs[0]
    return x3 is not None and x3.shape is not None and len(x3.shape) == 3 \
        and x3.shape[2] == x4.shape[2] * x4.shape[3]


class RotaryEmbeddings(RuleFamily):
    name = "rotary"
    #: both rotations (``rotate_half`` and the pairwise stack) end in a Concat
    start_ops = frozenset({"Concat"})

    scope = "main"

    def __init__(self, opset: int) -> None:
        super().__init__(opset)
        self._made = 0
        self._ids: dict[object, ir.Value] = {}  # position ids, as int64, once per value (or per batch, seq)
        self._caches: dict[tuple, ir.Value] = {}  # half tables by content

    def unavailable(self) -> str | None:
        if not op_available("RotaryEmbedding", self.opset):
            return f"RotaryEmbedding is an opset-23 op; the model is opset {self.opset}"
        return None

    def rules(self) -> list[Rule]:
        return [Rule("rotary_embedding", frozenset({"Add"}), self._match, self._rotary)]

    def _match(self, graph: ir.Graph, add: ir.Node):
        for a, b in ((add.inputs[0], add.inputs[1]), (add.inputs[1], add.inputs[0])):
            found = self._terms(a, b, self.opset)
            if found is not None:
                break
        else:
            return no_match("not x·cos + rotate(x)·sin with constant (or position-gathered) tables")
        x, cos, sin, ids, interleaved = found
        source = self._source(graph, add, x)
        if source is None:
            return miss(f"the rotated value {value_label(x)} is not a 3-D value split into heads (or the first "
                        "features of one, concatenated back with the rest)")
        reshape, out, head = source
        rot = x.shape[3]
        caches = [_cache(t, interleaved) for t in (cos, sin)]
        if caches[0] is None or caches[1] is None:
            return miss("the cos/sin tables do not repeat each frequency in the rotation's layout")
        batch, seq = x.shape[0], x.shape[1]
        if ids is None:  # constant rows: the op's 3-D caches, or 2-D ones read at positions 0..seq-1
            if not isinstance(seq, int) or cos.shape[1] != seq or sin.shape[1] != seq:
                return miss(f"constant tables of {cos.shape[1]} rows for a sequence of {seq}")
            if isinstance(batch, int):  # onnxruntime's kernel needs the batch and sequence axes in full
                caches = [np.broadcast_to(c, (batch, seq, rot // 2)) for c in caches]
            elif cos.shape[0] == 1 and sin.shape[0] == 1:  # a symbolic batch: the same rows for each
                caches = [c[0] for c in caches]
            else:
                return miss("per-row tables with a symbolic batch")
        elif ids.shape[0] != batch or ids.shape[1] != seq:
            return miss(f"position ids {value_label(ids)} are not (batch, sequence) of the rotated value")
        return x, ids, interleaved, reshape, out, head, caches

    def _rotary(self, graph: ir.Graph, add: ir.Node, found) -> None:
        x, ids, interleaved, reshape, out, head, caches = found
        x3 = reshape.inputs[0]
        heads, rot, seq = x.shape[2], x.shape[3], x.shape[1]
        self._made += 1  # unique names even where the graph's nodes have none
        stem = f"{add.name or 'rotary'}_{self._made}"
        inputs = [x3]
        for name, table in zip(("cos", "sin"), caches, strict=True):
            rows = np.ascontiguousarray(table).astype(np.float32)
            key = (rows.shape, rows.tobytes())
            if key not in self._caches:  # q and k, and every layer, share their tables
                self._caches[key] = add_initializer(graph, f"{stem}_{name}_cache", rows)
            inputs.append(self._caches[key])
        if ids is not None:
            inputs.append(self._int64_ids(graph, ids, add, stem))
        elif caches[0].ndim == 2:
            inputs.append(self._counted_ids(graph, x3, seq, stem))
        attrs = [ir.AttrInt64("num_heads", heads)]
        if interleaved:
            attrs.append(ir.AttrInt64("interleaved", 1))
        if rot != head:
            attrs.append(ir.AttrInt64("rotary_embedding_dim", rot))
        node = ir.Node("", "RotaryEmbedding", inputs, attrs, name=f"{stem}_rotary")
        y3 = node.outputs[0]
        y3.name, y3.type, y3.shape = f"{stem}_rotated", x3.type, x3.shape
        back = ir.Node("", "Reshape", [y3, reshape.inputs[1]], list(reshape.attributes.values()),
                       name=f"{stem}_heads")
        y4 = back.outputs[0]
        y4.name, y4.type, y4.shape = f"{out.name or stem}_rotary", out.type, out.shape
        graph.insert_before(out.producer(), [node, back])
        replace_value(graph, out, y4)

    @staticmethod
    def _source(graph: ir.Graph, add: ir.Node, x: ir.Value):
        """(Reshape of the 3-D value into heads, the value the op replaces, head size): ``x`` itself
        is the Reshape's output (the whole head rotates), or its first ``rotary_dim`` features whose
        rotation the Add's only reader concatenates with the rest (partial rotation, GPT-J/NeoX)."""
        producer = x.producer()
        if is_op(producer, "Reshape"):
            return (producer, add.outputs[0], x.shape[3]) if _heads_of_3d(producer, x) else None
        x4 = producer.inputs[0] if is_op(producer, "Slice") else None
        if x4 is None or x4.shape is None or len(x4.shape) != 4 or not isinstance(x4.shape[3], int):
            return None
        head = x4.shape[3]
        if _feature_slice(x, head) != (x4, 0, x.shape[3]) or x.shape[3] >= head:
            return None
        reshape = x4.producer()
        out = add.outputs[0]
        users = list(out.uses())
        if not is_op(reshape, "Reshape") or not _heads_of_3d(reshape, x4) or out in graph.outputs or len(users) != 1:
            return None
        cat, index = users[0]
        axis = cat.attributes.get("axis") if is_op(cat, "Concat") else None
        if axis is None or int(axis.value) % 4 != 3 or len(cat.inputs) != 2 or index != 0:
            return None
        rest = _feature_slice(cat.inputs[1], head)
        if rest is None or rest[0] is not x4 or rest[1:] != (x.shape[3], head):
            return None
        return reshape, cat.outputs[0], head

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

    def _counted_ids(self, graph: ir.Graph, x3: ir.Value, seq: int, stem: str) -> ir.Value:
        """Position ids 0..seq-1 for every row of a symbolic batch: the kernel wants (batch, seq)
        ids, so a (1, seq) constant is expanded to x's batch (three nodes, shared by every layer)."""
        key = (str(x3.shape[0]), seq)
        if key not in self._ids:
            counted = add_initializer(graph, f"{stem}_positions", np.arange(seq, dtype=np.int64)[None])
            length = add_initializer(graph, f"{stem}_seq", np.array([seq], np.int64))
            shape = ir.Node("", "Shape", [x3], [ir.AttrInt64("start", 0), ir.AttrInt64("end", 1)],
                            name=f"{stem}_batch")
            cat = ir.Node("", "Concat", [shape.outputs[0], length], [ir.AttrInt64("axis", 0)], name=f"{stem}_ids_shape")
            expand = ir.Node("", "Expand", [counted, cat.outputs[0]], name=f"{stem}_ids")
            shape.outputs[0].name, cat.outputs[0].name = f"{stem}_batch", f"{stem}_ids_shape"
            shape.outputs[0].type = cat.outputs[0].type = ir.TensorType(ir.DataType.INT64)
            shape.outputs[0].shape, cat.outputs[0].shape = ir.Shape([1]), ir.Shape([2])
            out = expand.outputs[0]
            out.name, out.type, out.shape = f"{stem}_position_ids", ir.TensorType(ir.DataType.INT64), \
                ir.Shape([x3.shape[0], seq])
            producer = x3.producer()
            if producer is not None and producer.graph is graph:
                graph.insert_after(producer, [shape, cat, expand])
            else:
                graph.insert_before(next(iter(graph)), [shape, cat, expand])
            self._ids[key] = out
        return self._ids[key]

    @staticmethod
    def _terms(a: ir.Value | None, b: ir.Value | None, opset: int):
        """(x, cos rows, sin rows, ids, interleaved) when ``a = x * cos`` and ``b = rotate(x) * sin``,
        ``rotate`` the half-split or the pairwise rotation; rows (batch or 1, seq, size) when
        constant (ids None), else the table gathered by ``ids``."""
        for x, cos_v, cos_spec in _factor(a):
            if x is None or x.dtype != ir.DataType.FLOAT or x.shape is None or len(x.shape) != 4:
                continue
            heads, size = x.shape[2], x.shape[3]
            if not (isinstance(heads, int) and isinstance(size, int)) or size % 2:
                continue
            for rot, sin_v, sin_spec in _factor(b):
                if _rotated_half(rot, x, size):
                    interleaved = False
                elif _rotated_pairs(rot, x, size):
                    interleaved = True
                else:
                    continue
                cos, sin = _constant_rows(cos_v, cos_spec, size), _constant_rows(sin_v, sin_spec, size)
                if cos is not None and sin is not None:
                    return x, cos, sin, None, interleaved
                if cos_spec is not None or sin_spec is not None:
                    continue
                cos, sin = _table_rows(cos_v, size), _table_rows(sin_v, size)
                if cos is not None and sin is not None and cos[1] is sin[1] and cos[0].shape == sin[0].shape:
                    return x, cos[0], sin[0], cos[1], interleaved  # the graph's own ids (Llama)
                # last, rows broadcast over the batch: counted ids where the graph has none to read
                cos, sin = _constant_rows(cos_v, None, size, opset), _constant_rows(sin_v, None, size, opset)
                if cos is not None and sin is not None:
                    return x, cos, sin, None, interleaved
        return None
