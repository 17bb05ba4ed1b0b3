"""Scaled dot-product attention, however it is written → the ONNX ``Attention`` op (opset 23).

Hugging Face's Flax layers, ``flax.nnx``/``linen`` with a custom attention function, Equinox and
hand-written code all compute ``softmax(scale * q·kᵀ + mask) · v``, but each spells it its own
way: ``einsum('...qhd,...khd->...hqk')`` (lowered to Transposes and a MatMul) or ``q @ k.T``, the
scale on ``q``, on ``k`` or on the scores, the mask added as a bias or applied by ``where``, keys
and values repeated per query group (GQA: ``jnp.repeat`` on the head axis, a Gather), the output
through ``einsum('...hqk,...khd->...qhd')`` or a MatMul and a Transpose. That is 7-13 nodes per
layer. onnxruntime 1.32's CPU kernel for ``Attention`` runs the same computation in 0.58-0.76× the
time of the decomposed graph (``bench/attention_op.py``: batch 8, 64-128 tokens, width 64-256,
1 thread; GQA 0.58×).

Rule (anchor: a ``Softmax`` over the last axis of rank-4 float32 scores):
``Softmax([Add(S, mask) | Where(c, S, fill)])`` with ``S = scale chain(QK)``, ``QK`` a rank-4
``MatMul`` or a two-operand ``Einsum`` contracting one axis, the probabilities read only by a
``MatMul``/``Einsum`` with ``V`` summing the key axis. Each operand is traced back through
Transposes (their permutations composed), scalar Mul/Div (their product is the ``scale``
attribute) and, for keys and values, one head-axis Gather repeating each head ``r`` times
(``kv_num_heads``). The op's form:

- 3-D (``q_num_heads``/``kv_num_heads``): when q, k and v are each a Reshape of a (batch, seq,
  heads·size) value to (batch, seq, heads, size), and the output (batch, seq, heads, size) is read
  only by a Reshape merging the last two axes: the Reshapes go too;
- 4-D (batch, heads, seq, size) otherwise, with a Transpose on each operand (and the output) whose
  layout differs.

A ``Where(c, S, fill)`` mask becomes the additive mask ``Where(c, 0, fill)`` (for a finite
``fill``, ``S + fill`` rounds to ``fill`` wherever it matters, as the original's ``fill`` is).
Scores and probabilities must be read by the chain alone (a model that returns its attention
weights keeps the decomposed form).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import onnx_ir as ir

from ...ir.constants import constant_ints, constant_tensor
from ...ir.opsets import op_available
from ..manager import is_op, only_reader, replace_value
from ..patterns import Const, Match, OneOf, Op, Scalar, Var, match, scalar
from ..rules import Miss, Rule, RuleFamily, miss, no_match, node_label, value_label
from .emit import add_initializer

#: ``MatMul(a, b)`` on rank-4 values, as an einsum.
_MATMUL_EQUATION = "bhqd,bhdk->bhqk"


#: one step of a scalar chain: ``v * k`` (either order) or ``v / d``
_SCALED = OneOf(Op("Mul", Var("v"), Scalar("k"), commutative=True), Op("Div", Var("v"), Scalar("d", nonzero=True)))
#: one step back from an operand: a Transpose (its perm), an Identity, or a scalar factor
_OPERAND_STEP = OneOf(Op("Transpose", Var("v"), attrs={"perm": lambda p: p is not None and len(p) == 4}, name="t"),
                      Op("Identity", Var("v")), _SCALED)
#: (batch, seq, heads, size) split from a (batch, seq, heads·size) value
_SPLIT_HEADS = Op("Reshape", Var("flat", test=lambda v, m: m.fit(v, "b s flat") and m.dims["flat"] == m.dims["h"] *
                                  m.dims["d"]), Var(), dims="b s h d")


def _scores_times_qk(v: ir.Value, m) -> bool:
    """``v`` is scaled q·kᵀ read by the chain alone, of the scores' shape (a mask must not
    broadcast the scores to a larger shape); binds ``qk`` (the product node and the scale)."""
    m["qk"] = Attentions._scaled_product(m["graph"], v, m["masked"])
    return m["qk"] is not None and v.shape is not None and v.shape == m["s"].shape


#: scores plus (or minus) a float mask of at most rank 4, the scores either operand of an Add
_FLOAT_MASK = Var("mask", dtype=ir.DataType.FLOAT, test=lambda v, m: v.shape is not None and len(v.shape) <= 4)
_MASKED = OneOf(Op("Add", Var(test=_scores_times_qk), _FLOAT_MASK, commutative=True, name="masked"),
                Op("Sub", Var(test=_scores_times_qk), _FLOAT_MASK, name="masked"))


def _factor(m) -> float:
    """The scale one :data:`_SCALED` step multiplies by."""
    return m.get("k", 1.0) / m.get("d", 1.0)


def _attr(node: ir.Node, name: str, default):
    attr = node.attributes.get(name)
    return default if attr is None else attr.value


def _equation(node: ir.Node) -> tuple[str, str, str] | None:
    """(first operand, second operand, output) letters of a two-operand rank-4 MatMul or Einsum."""
    if is_op(node, "MatMul"):
        a, b = node.inputs
        if a is None or b is None or a.shape is None or b.shape is None or len(a.shape) != 4 or len(b.shape) != 4:
            return None
        return "bhqd", "bhdk", "bhqk"
    if not is_op(node, "Einsum") or len(node.inputs) != 2:
        return None
    eq = _attr(node, "equation", "")
    eq = eq.decode() if isinstance(eq, bytes) else str(eq)
    eq = eq.replace(" ", "")
    if "->" not in eq:
        return None
    spare = next(c for c in "zyxwvutsrponmlkjigfecba" if c not in eq)
    eq = eq.replace("...", spare)
    lhs, out = eq.split("->")
    ops = lhs.split(",")
    if len(ops) != 2 or any(len(set(s)) != 4 or len(s) != 4 for s in (*ops, out)):
        return None
    return ops[0], ops[1], out


_ONES = Const(test=lambda t, m: bool(np.all(t == 1)))
#: the probabilities times a constant of ones (HF's layer_head_mask), keeping their shape
_TIMES_ONES = OneOf(Op("Mul", Var("p", dims="b h q k"), _ONES, commutative=True, dims="b h q k"),
                    Op("Einsum", Var("p"), _ONES, commutative=True, name="einsum"))


def _times_ones(node: ir.Node, probs: ir.Value) -> bool:
    """``node`` multiplies ``probs`` by a constant of ones, keeping its shape."""
    found = match(_TIMES_ONES, node.outputs[0], p=probs) if len(node.outputs) == 1 else None
    if not found or "einsum" not in found:
        return bool(found)
    eq = _attr(node, "equation", "")
    lhs, _, out = (eq.decode() if isinstance(eq, bytes) else str(eq)).replace(" ", "").partition("->")
    mine, theirs = lhs.split(",")[::1 if node.inputs[0] is probs else -1]
    return out == mine and set(theirs.replace("...", "")) <= set(mine.replace("...", ""))


def _row_constant(mask: ir.Value) -> bool:
    """A constant mask with one value per row of scores (its key axis of 1, or a scalar)."""
    t = constant_tensor(mask)
    return t is not None and (len(t.shape) == 0 or int(t.shape[-1]) == 1)


def _mask_fits(shape: ir.Shape | None, queries, graph) -> bool:
    """Whether a mask of ``shape`` can be handed to onnxruntime's kernel (see
    :func:`_mask_over_queries`)."""
    if shape is None or not 2 <= len(shape) <= 4:
        return False
    return shape[-2] == queries or (shape[-2] == 1 and isinstance(queries, int) and isinstance(graph, ir.Graph))


def _mask_over_queries(graph, mask: ir.Value, queries, before: ir.Node, stem: str, done: dict) -> ir.Value:
    """The mask with its query axis as long as the queries: ONNX broadcasts ``attn_mask`` to
    (batch, heads, queries, keys), but onnxruntime 1.32's kernel requires the query axis in full
    (a padding mask (batch, 1, 1, keys) fails "inconsistent q_sequence_length"), so a mask with a
    query axis of 1 is expanded to the (static) query length, once per mask value."""
    if mask.shape[-2] == queries:
        return mask
    key = (id(mask), queries)
    if key in done:  # the layers of a model share one mask: expanded once
        return done[key]
    target = add_initializer(graph, f"{stem}_mask_queries",
                             np.array([1] * (len(mask.shape) - 2) + [queries, 1], np.int64))
    node = ir.Node("", "Expand", [mask, target], name=f"{stem}_mask_expand")
    out = node.outputs[0]
    out.name, out.type = f"{stem}_mask_full", mask.type
    out.shape = ir.Shape([*mask.shape[:-2], queries, mask.shape[-1]])
    graph.insert_before(before, node)
    done[key] = out
    return out


@dataclasses.dataclass
class _Found:
    """What the rule's match read: the operands, the product with v, the output and its layout,
    the scale, the mask (additive, or a Where's (cond, fill); ``negate``: subtracted) and the heads."""

    qop: _Operand
    kop: _Operand
    vop: _Operand
    pv: ir.Node
    y: ir.Value
    out_perm: list[int]
    scale: float
    mask: ir.Value | None
    where: tuple[ir.Value, ir.Value] | None
    negate: bool
    queries: object
    heads: int
    kv_heads: int


class _Operand:
    """A value ``v`` such that ``Transpose(v, perm)`` is the operand in (batch, heads, seq, size)
    layout, times ``scale``; ``groups`` when a head-axis Gather repeated each of ``groups`` heads."""

    def __init__(self, value: ir.Value, perm: list[int]) -> None:
        self.value, self.perm, self.scale, self.groups, self.repeated = value, perm, 1.0, None, None

    def peel(self, repeats: bool) -> _Operand:
        while True:
            step = match(_OPERAND_STEP, self.value)
            node = self.value.producer()
            if step:
                if "t" in step:
                    self.perm = [int(step["t"].attributes["perm"].value[i]) for i in self.perm]
                self.scale *= _factor(step)
                self.value = step["v"]
            elif repeats and self.groups is None and is_op(node, "Gather") and self._repeat(node):
                self.value = node.inputs[0]
            else:
                return self

    def _repeat(self, gather: ir.Node) -> bool:
        """A Gather on the head axis with indices ``[0]*r + [1]*r + ...`` (``jnp.repeat``)."""
        data, indices = gather.inputs
        idx = constant_ints(indices)
        t = constant_tensor(indices)
        if idx is None or t is None or len(t.shape) != 1 or data is None or data.shape is None or len(data.shape) != 4:
            return False
        axis = int(_attr(gather, "axis", 0)) % 4
        n = data.shape[axis]
        if axis != self.perm[1] or not isinstance(n, int) or n == 0 or len(idx) % n:
            return False
        if idx != list(np.repeat(np.arange(n), len(idx) // n)):
            return False
        self.groups, self.repeated = n, len(idx)
        return True

    def as_4d(self, graph: ir.Graph | ir.Function, before: ir.Node, stem: str) -> ir.Value:
        if self.perm == [0, 1, 2, 3]:
            return self.value
        node = ir.Node("", "Transpose", [self.value], [ir.AttrInt64s("perm", self.perm)], name=f"{stem}_transpose")
        out = node.outputs[0]
        out.name, out.type = f"{stem}_bhsd", self.value.type
        if self.value.shape is not None:
            out.shape = ir.Shape([self.value.shape[i] for i in self.perm])
        graph.insert_before(before, node)
        return out

    def split_heads(self) -> ir.Value | None:
        """The (batch, seq, heads·size) value this operand is a Reshape of, when it is one."""
        shape = self.value.shape
        if self.perm != [0, 2, 1, 3] or shape is None or len(shape) != 4 or not all(isinstance(n, int) for n in shape[2:]):
            return None
        found = match(_SPLIT_HEADS, self.value)
        return found["flat"] if found else None


class Attentions(RuleFamily):
    name = "attention"
    #: the anchor: every match starts from a Softmax over the scores
    start_ops = frozenset({"Softmax"})

    def __init__(self, opset: int) -> None:
        super().__init__(opset)
        self._made = 0
        self._expanded: dict = {}  # (id of a mask, query length) -> the mask expanded to it; negated masks

    def unavailable(self) -> str | None:
        if not op_available("Attention", self.opset):
            return f"Attention is an opset-23 op; the model is opset {self.opset}"
        return None

    def rules(self) -> list[Rule]:
        return [Rule("attention", frozenset({"Softmax"}), self._match, self._attention)]

    @staticmethod
    def _scaled_product(graph, v: ir.Value | None, reader: ir.Node):
        """(QK node, scale) when ``v`` is scalar multiples of a rank-4 product read by the chain alone."""
        scale = 1.0
        while True:
            if v is None or not only_reader(v, reader, graph):
                return None
            node, step = v.producer(), match(_SCALED, v)
            if step:
                scale *= _factor(step)
                v, reader = step["v"], node
            elif node is not None and _equation(node) is not None:
                return node, scale
            else:
                return None

    def _scores(self, graph, softmax: ir.Node):
        """(QK node, scale, mask value or None, a Where mask's (cond, fill) or None); else a Miss."""
        s = softmax.inputs[0]
        if s is None or s.shape is None or len(s.shape) != 4:
            return no_match("the Softmax's scores are not rank 4 (batch, heads, queries, keys)")
        if s.dtype != ir.DataType.FLOAT:
            return miss(f"the scores {value_label(s)} are {s.dtype}, not float32")
        if int(_attr(softmax, "axis", -1)) % 4 != 3:
            return no_match("the Softmax is not over the last (key) axis")
        if not only_reader(s, softmax, graph):
            return miss(f"the scores {value_label(s)} are read outside the Softmax")
        node = s.producer()
        if is_op(node, "Add") or is_op(node, "Sub"):  # DistilBERT: scores - (1 - mask) * big
            found = match(_MASKED, s, graph=graph, s=s)
            if found:
                mask = found["mask"]
                if _row_constant(mask):
                    mask = None  # the same number added to a whole row: softmax does not see it (BEiT's 0 bias)
                elif node.op_type == "Sub":
                    mask = (mask,)  # negated when the op is made
                return (*found["qk"], mask, None)
            return no_match(f"the {node.op_type} {node_label(node)} before the Softmax is not scaled q·kᵀ (read by "
                            "the chain alone) plus a float mask of at most rank 4 that keeps the scores' shape")
        if is_op(node, "Where"):
            cond, kept, fill = node.inputs
            if not isinstance(graph, ir.Graph):
                return miss("a Where mask in a function body (it holds no initializer for the mask's zero)")
            if scalar(fill) is None or cond is None or cond.dtype != ir.DataType.BOOL:
                return miss(f"the Where {node_label(node)} does not fill a bool mask with a constant scalar")
            found = self._scaled_product(graph, kept, node)
            if found is None or kept.shape is None or kept.shape != s.shape:
                return no_match(f"the Where {node_label(node)} does not keep scaled q·kᵀ of the scores' shape")
            return (*found, None, (cond, fill))
        found = self._scaled_product(graph, s, softmax)
        return no_match("the scores are not scaled q·kᵀ read by the chain alone") if found is None else (
            *found, None, None)

    def _match(self, graph, softmax: ir.Node):
        found = self._scores(graph, softmax)
        if isinstance(found, Miss):
            return found
        qk, scale, mask, where = found
        ea, eb, eo = _equation(qk)
        b, h, q, k = eo
        d = set(ea) & set(eb) - set(eo)
        if len(d) != 1 or set(ea) != {b, h, q, *d} or set(eb) != {b, h, k, *d}:
            return no_match(f"the product {node_label(qk)} does not contract q and k over one size axis")
        (d,) = d
        qop = _Operand(qk.inputs[0], [ea.index(c) for c in (b, h, q, d)]).peel(repeats=False)
        kop = _Operand(qk.inputs[1], [eb.index(c) for c in (b, h, k, d)]).peel(repeats=True)
        # the probabilities times V
        probs = softmax.outputs[0]
        while True:
            users = probs.uses()
            if len(users) != 1 or probs in graph.outputs:
                return miss(f"the probabilities {value_label(probs)} are read by more than the product with v "
                            "(or returned)")
            pv, slot = users[0]
            if not _times_ones(pv, probs):
                break
            probs = pv.outputs[0]  # HF's layer_head_mask of ones: einsum('...hqk,h->...hqk', p, ones)
        pv_eq = _equation(pv)
        if pv_eq is None:
            return no_match(f"the probabilities' reader {pv.op_type} {node_label(pv)} is not a product with v")
        ep, ev, out = (pv_eq[0], pv_eq[1], pv_eq[2]) if slot == 0 else (pv_eq[1], pv_eq[0], pv_eq[2])
        pb, ph, pq, pk = ep
        e = set(ev) - set(ep)
        if len(e) != 1 or set(ev) != {pb, ph, pk, *e} or set(out) != {pb, ph, pq, *e}:
            return no_match(f"the product {node_label(pv)} does not sum the probabilities' key axis against v")
        (e,) = e
        vop = _Operand(pv.inputs[1 - slot], [ev.index(c) for c in (pb, ph, pk, e)]).peel(repeats=True)
        out_perm = [(pb, ph, pq, e).index(c) for c in out]
        if any(o.value is None or o.value.shape is None or len(o.value.shape) != 4 for o in (qop, kop, vop)):
            return miss("q, k or v has no known rank-4 shape")
        if kop.groups != vop.groups or kop.repeated != vop.repeated:
            return miss("k and v repeat their heads differently")
        if vop.scale != 1.0:
            return miss(f"v is scaled (by {vop.scale:g}): Attention scales the scores only")
        (_, heads, queries, size), (_, kv_heads, _, k_size), (_, v_heads, _, _) = (
            [o.value.shape[i] for i in o.perm] for o in (qop, kop, vop))
        if not isinstance(heads, int) or not isinstance(kv_heads, int):
            return miss("the head counts of q or k are not static")
        if kv_heads != v_heads or size != k_size:
            return miss(f"k and v differ in heads ({kv_heads}, {v_heads}) or q and k in head size ({size}, {k_size})")
        if kv_heads != (heads if kop.groups is None else kop.groups) or (kop.groups and kop.repeated != heads):
            return miss(f"{heads} query heads cannot share {kv_heads} key/value heads as repeated")
        scale *= qop.scale * kop.scale
        y = pv.outputs[0]
        while len(y.uses()) == 1 and y not in graph.outputs:  # DistilBERT: p @ v, then heads back by a Transpose
            reader = y.uses()[0][0]
            p2 = _attr(reader, "perm", None) if is_op(reader, "Transpose") else None
            if p2 is None or len(p2) != 4:
                break
            out_perm, y = [out_perm[int(i)] for i in p2], reader.outputs[0]
        negate = isinstance(mask, tuple)
        if negate:
            (mask,) = mask
        mask_shape = where[0].shape if where is not None else mask.shape if mask is not None else None
        if (mask is not None or where is not None) and not _mask_fits(mask_shape, queries, graph):
            return miss(f"the mask's shape {mask_shape} has no query axis onnxruntime's kernel takes "
                        f"({queries} queries, or 1 with a static query length)")
        return _Found(qop, kop, vop, pv, y, out_perm, scale, mask, where, negate, queries, heads, kv_heads)

    def _attention(self, graph, softmax: ir.Node, found: _Found) -> None:
        qop, kop, vop, pv, y, out_perm = found.qop, found.kop, found.vop, found.pv, found.y, found.out_perm
        scale, mask, where, negate, queries = found.scale, found.mask, found.where, found.negate, found.queries
        heads, kv_heads = found.heads, found.kv_heads
        self._made += 1  # unique names even where the graph's nodes have none
        stem = f"{pv.name or 'attention'}_{self._made}"
        if where is not None:  # Where(c, S, fill) -> the additive mask Where(c, 0, fill)
            cond, fill = where
            zero = add_initializer(graph, f"{stem}_mask_zero", np.zeros((), np.float32))
            node = ir.Node("", "Where", [cond, zero, fill], name=f"{stem}_mask")
            mask = node.outputs[0]
            mask.name, mask.type, mask.shape = f"{stem}_additive_mask", ir.TensorType(ir.DataType.FLOAT), cond.shape
            graph.insert_before(pv, node)
        if negate:  # S - m: the additive mask is -m (once per mask value)
            if ("neg", id(mask)) not in self._expanded:
                node = ir.Node("", "Neg", [mask], name=f"{stem}_mask_neg")
                node.outputs[0].name, node.outputs[0].type = f"{stem}_negated_mask", mask.type
                node.outputs[0].shape = mask.shape
                graph.insert_before(pv, node)
                self._expanded[("neg", id(mask))] = node.outputs[0]
            mask = self._expanded[("neg", id(mask))]
        if mask is not None:
            mask = _mask_over_queries(graph, mask, queries, pv, stem, self._expanded)
        attrs = [ir.AttrFloat32("scale", float(scale))]
        flats = [o.split_heads() for o in (qop, kop, vop)]
        merge, dims = None, Match()
        if out_perm == [0, 2, 1, 3] and len(y.uses()) == 1 and y not in graph.outputs:
            reader = y.uses()[0][0]  # a Reshape merging (batch, seq, heads, size) into (batch, seq, heads·size)
            if is_op(reader, "Reshape") and dims.fit(y, "b s h d") and isinstance(dims.dims["d"], int) \
                    and dims.fit(reader.outputs[0], "b s hd") and dims.dims["hd"] == heads * dims.dims["d"]:
                merge = reader
        inputs_mask = [mask] if mask is not None else []
        if merge is not None and all(f is not None for f in flats):
            attrs += [ir.AttrInt64("q_num_heads", heads), ir.AttrInt64("kv_num_heads", kv_heads)]
            node = ir.Node("", "Attention", [*flats, *inputs_mask], attrs, name=f"{stem}_attention")
            new = node.outputs[0]
            old = merge.outputs[0]
            new.type, new.shape, new.name = old.type, old.shape, f"{old.name or stem}_attention"
            graph.insert_before(pv, node)
            replace_value(graph, old, new)
            return
        q4, k4, v4 = (o.as_4d(graph, pv, f"{stem}_{n}") for o, n in ((qop, "q"), (kop, "k"), (vop, "v")))
        node = ir.Node("", "Attention", [q4, k4, v4, *inputs_mask], attrs, name=f"{stem}_attention")
        new = node.outputs[0]
        new.type = y.type
        if y.shape is not None:
            inverse = list(np.argsort(out_perm))
            new.shape = ir.Shape([y.shape[int(i)] for i in inverse])
        new.name = f"{y.name or stem}_attention"
        graph.insert_before(pv, node)
        if out_perm != [0, 1, 2, 3]:
            t = ir.Node("", "Transpose", [new], [ir.AttrInt64s("perm", out_perm)], name=f"{stem}_output_transpose")
            t.outputs[0].type, t.outputs[0].shape, t.outputs[0].name = y.type, y.shape, f"{y.name or stem}_layout"
            graph.insert_before(pv, t)
            new = t.outputs[0]
        replace_value(graph, y, new)
