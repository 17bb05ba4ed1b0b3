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
from ..patterns import Const, OneOf, Op, Pattern, Scalar, Var, match
from ..rules import Rule, RuleFamily, miss, no_match, value_label
from .emit import add_initializer
from .evaluate import evaluate


def _last(rank: int):
    """An attribute test: the last axis of a rank-``rank`` value (the attribute present)."""
    return lambda axis: axis is not None and int(axis) % rank == rank - 1


def _span(node: ir.Node, v: ir.Value, size: int) -> tuple[int, int, int] | None:
    """(start, end, step) when ``v`` is ``node.inputs[0][..., start:end:step]`` of a rank-4 value
    whose last axis is ``size`` long: a Slice on that axis, one output of a Split in two halves,
    or a Gather of the constant indices ``first, first+2, ...`` (jnp's strided indexing)."""
    if is_op(node, "Split"):
        sizes = constant_ints(node.inputs[1]) if len(node.inputs) > 1 and node.inputs[1] is not None else None
        if not _last(4)(_attr(node, "axis")) or len(node.outputs) != 2 or sizes not in (None, [size // 2] * 2):
            return None
        return (0, size // 2, 1) if v is node.outputs[0] else (size // 2, size, 1)
    if is_op(node, "Gather"):
        idx = constant_tensor(node.inputs[1])
        if not _last(4)(_attr(node, "axis")) or idx is None:
            return None
        idx = np.asarray(idx.numpy()).reshape(-1)
        first = next((f for f in (0, 1) if np.array_equal(idx, np.arange(f, size, 2))), None)
        return None if first is None else (first, size, 2)
    ints = [constant_ints(i) if i is not None else None for i in node.inputs[1:]] if is_op(node, "Slice") else []
    if len(ints) < 3 or any(i is None or len(i) != 1 for i in ints[:3]) or ints[2][0] % 4 != 3:
        return None
    steps = ints[3] if len(ints) > 3 and node.inputs[4] is not None else [1]
    if steps is None or len(steps) != 1:
        return None
    (start,), (end,) = ints[0], ints[1]
    return start + size if start < 0 else start, min(end + size if end < 0 else end, size), steps[0]


class _LastAxis(Pattern):
    """``source[..., start:end:step]`` (:func:`_span`; only by the ``ops`` named), ``source`` the
    value bound as ``source`` (bound here when it is not yet: a rank-4 value with a static last
    axis, its length the dim ``size_dim``); ``want(start, end, step, size, match)`` says which fit."""

    def __init__(self, want, source: str = "x", size_dim: str = "size",
                 ops: tuple[str, ...] = ("Slice", "Split", "Gather")) -> None:
        self.want, self.source, self.size_dim, self.ops = want, source, size_dim, ops

    def _bind(self, value, m):
        node = value.producer() if value is not None else None
        if node is None or node.op_type not in self.ops or node.inputs[0] is None or \
                m.setdefault(self.source, node.inputs[0]) is not node.inputs[0]:
            return False
        if not m.fit(node.inputs[0], f"_ _ _ {self.size_dim}") or not isinstance(m.dims[self.size_dim], int):
            return False
        span = _span(node, value, m.dims[self.size_dim])
        return span is not None and bool(self.want(*span, m.dims[self.size_dim], m))


def _negated(p: Pattern) -> Pattern:
    return OneOf(Op("Neg", p), Op("Mul", p, Scalar(equals=-1.0), commutative=True))


#: ``concat(-x[..., h:], x[..., :h])``: rotate_half (Llama, Mistral, Gemma, GPT-NeoX)
_ROTATE_HALF = Op("Concat", _negated(_LastAxis(lambda a, b, step, n, _: (a, b, step) == (n // 2, n, 1))),
                  _LastAxis(lambda a, b, step, n, _: (a, b, step) == (0, n // 2, 1)), attrs={"axis": _last(4)})
#: ``u[..., None]``
_UNSQUEEZED = lambda p: Op("Unsqueeze", p, Const(test=lambda t, m: t.reshape(-1).tolist() in ([4], [-1])))  # noqa: E731
#: ``stack([-x[..., 1::2], x[..., ::2]], -1).reshape(x.shape)``: GPT-J's ``rotate_every_two`` and
#: RoFormer's rotation, each pair (x0, x1) turned into (-x1, x0)
_ROTATE_PAIRS = Op(
    "Reshape", Op("Concat", _UNSQUEEZED(_negated(_LastAxis(lambda a, b, step, n, _: (a, step) == (1, 2) and b >= n))),
                  _UNSQUEEZED(_LastAxis(lambda a, b, step, n, _: (a, step) == (0, 2) and b >= n)),
                  attrs={"axis": _last(5)}),
    Var(), dims="_ seq heads size")
#: x (batch, seq, heads, size): the Reshape of a (batch, seq, heads·size) value, the op's 3-D layout
_HEADS_OF_3D = Op("Reshape", Var("x3", test=lambda v, m: m.fit(v, "_ _ flat") and isinstance(m.dims["heads"], int)
                                 and m.dims["flat"] == m.dims["heads"] * m.dims["size"]),
                  Var(), name="reshape", dims="_ _ heads size")
#: partial rotation (GPT-J, GPT-NeoX): the first ``rot`` features of a head of ``head``, and the rest
_FIRST = _LastAxis(lambda a, b, step, n, m: (a, b, step) == (0, m.dims["rot"], 1) and b < n, "x4", "head", ("Slice",))
_REST = _LastAxis(lambda a, b, step, n, m: (a, b, step) == (m.dims["rot"], n, 1), "x4", "head", ("Slice",))


def _attr(node: ir.Node, name: str):
    attr = node.attributes.get(name)
    return None if attr is None else attr.value


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
        found = match(_HEADS_OF_3D, x)
        if found:
            return found["reshape"], add.outputs[0], x.shape[3]
        rot = {"rot": x.shape[3]}
        first = match(_FIRST, x, dims=rot)
        x4 = first["x4"] if first else None
        reshape = match(_HEADS_OF_3D, x4) if x4 is not None else None
        out = add.outputs[0]
        users = list(out.uses())
        if not reshape or out in graph.outputs or len(users) != 1 or users[0][1] != 0:
            return None
        cat = users[0][0]
        if not (is_op(cat, "Concat") and _last(4)(_attr(cat, "axis")) and len(cat.inputs) == 2
                and match(_REST, cat.inputs[1], x4=x4, dims=rot)):
            return None
        return reshape["reshape"], cat.outputs[0], x4.shape[3]

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
            dims = dict(zip(("batch", "seq", "heads", "size"), x.shape, strict=True))
            for rot, sin_v, sin_spec in _factor(b):
                if match(_ROTATE_HALF, rot, x=x, dims=dims):
                    interleaved = False
                elif match(_ROTATE_PAIRS, rot, x=x, dims=dims):
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
