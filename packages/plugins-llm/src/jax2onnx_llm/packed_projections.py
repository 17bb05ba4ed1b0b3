"""``target="onnxruntime"``: a layer's projections of one input as one weight matmul.

A decode step multiplies one token's activations by every weight once, so a decoder layer is a
handful of matrix-vector products, each a kernel call with its own thread-pool dispatch, the
narrowest (a grouped-query key projection: ``kv_heads * head_size`` columns) too small to share
among many threads. Packing the products that read the same activations into one matmul (their
weights side by side along the output axis) reads the same bytes in fewer, wider calls, as
onnxruntime-genai's own model builder writes its graphs (measured: docs/guide/precision.md). Two rules (:class:`PackedProjectionsPass`, the rewrite slot after ``precision=``):

- ``packed_qkv``: a ``GroupQueryAttention`` whose query, key and value are each a weight matmul of
  one activation (``MatMul`` with a constant ``(K, N)`` weight, or ``MatMulNBits`` with the same
  ``K``, bits, block size and accuracy level) gets one matmul of the three weights as its packed
  query (``(batch, sequence, (heads + 2 kv_heads) head_size)``, key and value inputs omitted: the
  op's packed-QKV form, which splits it itself);
- ``packed_siblings``: weight matmuls of one rank-3 activation that fit together (the MLP's gate and
  up projections) become one matmul and a ``Split`` along the output axis.

Each column of the packed product is the same sum over ``K`` as before (and a ``MatMulNBits``
column keeps its own blocks, scales and zero points), so the graph computes the same function.
A streamed export's weights stay lazy: the packed initializer is concatenated when written, and
named by the weights it holds, ``+`` between them (``wq+wk+wv``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import onnx_ir as ir
from jax2onnx.rewrite import (
    Op,
    Rule,
    RuleFamily,
    Var,
    constant_tensor,
    match,
    miss,
    no_match,
    node_label,
    only_reader,
    value_label,
)

MS = "com.microsoft"
#: the fused attention whose packed-QKV form the rule writes (a target that runs it gets the pass)
GQA_OP = "GroupQueryAttention"
#: between the names of the weights a packed initializer holds (``wq+wk+wv``)
JOINER = "+"
#: MatMulNBits attributes that must agree for two products to share one op
_NBITS_ATTRS = ("K", "bits", "block_size", "accuracy_level")


def _const(value: ir.Value | None, _m=None) -> bool:
    return constant_tensor(value) is not None


_DENSE = Op("MatMul", Var("x", dims="b s k"), Var(test=_const, dims="k _"), name="matmul")
_NBITS = Op("MatMulNBits", Var("x", dims="b s _"), Var(test=_const), Var(test=_const), name="matmul", domain=MS)
_NBITS_ZP = Op("MatMulNBits", Var("x", dims="b s _"), Var(test=_const), Var(test=_const), Var(test=_const),
               name="matmul", domain=MS)


def _projection(value: ir.Value | None, x: ir.Value | None = None):
    """``value`` as a weight matmul (of ``x`` when given): the Match binding ``matmul`` and ``x``."""
    bound = {} if x is None else {"x": x}
    for pattern in (_DENSE, _NBITS, _NBITS_ZP):
        found = match(pattern, value, **bound)
        if found:
            return found
    return no_match(f"{value_label(value)} is not a weight matmul"
                    + ("" if x is None else f" of {value_label(x)}"))


def _key(node: ir.Node) -> tuple:
    """What two weight matmuls must share to be packed: the op, its inputs' count and types, and
    MatMulNBits' K, bits, block size and accuracy level."""
    if node.op_type == "MatMul":
        w = node.inputs[1]
        return ("MatMul", w.dtype, node.inputs[0].dtype)
    attrs = tuple(node.attributes.get_int(a, -1) for a in _NBITS_ATTRS)
    return ("MatMulNBits", len(node.inputs), *attrs, *(v.dtype for v in node.inputs[1:]))


def _columns(node: ir.Node) -> int | None:
    if node.op_type == "MatMul":
        shape = node.inputs[1].shape
        return shape[1] if shape is not None and isinstance(shape[1], int) else None
    return node.attributes.get_int("N", -1)


def _concat(parts: list[ir.Value], axis: int, name: str) -> ir.Value:
    """An initializer holding ``parts``' constants concatenated along ``axis``; computed when the
    file is written where a part is lazy (a streamed export's weights stay lazy, and the writer
    still streams them), else now (a lazy tensor would make the writer stream a small model)."""
    tensors = [constant_tensor(p) for p in parts]
    dims = [int(d) for d in tensors[0].shape]
    dims[axis] = sum(int(t.shape[axis]) for t in tensors)

    def concat() -> ir.Tensor:
        return ir.Tensor(np.concatenate([np.asarray(t.numpy()) for t in tensors], axis=axis), name=name)

    if any(isinstance(t, ir.LazyTensor) for t in tensors):
        tensor: ir.TensorProtocol = ir.LazyTensor(concat, dtype=tensors[0].dtype, shape=ir.Shape(dims), name=name)
    else:
        tensor = concat()
    return ir.Value(name=name, shape=ir.Shape(dims), type=ir.TensorType(tensors[0].dtype), const_value=tensor)


def _unique(graph: ir.Graph, stem: str) -> str:
    taken = set(graph.initializers) | {v.name for n in graph for v in n.outputs}
    name, i = stem, 2
    while name in taken:
        name, i = f"{stem}_{i}", i + 1
    return name


def _packed_matmul(graph: ir.Graph, nodes: list[ir.Node], before: ir.Node) -> ir.Value:
    """One matmul of ``nodes``' input with their weights side by side, inserted before ``before``;
    the old matmuls and the initializers only they read are removed by the caller."""
    first = nodes[0]
    stem = first.name or first.outputs[0].name or "projection"
    consts = []
    for slot in range(1, len(first.inputs)):
        # a dense weight is (K, N); MatMulNBits' weight, scales and zero points are rows of N
        axis = 1 if first.op_type == "MatMul" else 0
        parts = [n.inputs[slot] for n in nodes]
        # named by its parts (JOINER between), so a reader still finds each weight (the precision
        # report names them)
        packed = _concat(parts, axis, _unique(graph, JOINER.join(str(p.name) for p in parts)))
        graph.register_initializer(packed)
        consts.append(packed)
    width = sum(_columns(n) for n in nodes)
    attributes = [a for a in first.attributes.values() if a.name != "N"]
    if first.op_type == "MatMulNBits":
        attributes.append(ir.AttrInt64("N", width))
    node = ir.Node(first.domain, first.op_type, [first.inputs[0], *consts], attributes=attributes,
                   name=_unique(graph, f"{stem}_packed"))
    graph.insert_before(before, node)
    out, old = node.outputs[0], first.outputs[0]
    out.name, out.type = _unique(graph, f"{old.name}_packed"), old.type
    if old.shape is not None:
        out.shape = ir.Shape([*old.shape[:-1], width])
    return out


def _remove(graph: ir.Graph, nodes: Sequence[ir.Node]) -> None:
    """``nodes`` (no longer read) and the initializers nothing reads any more."""
    weights = [v for n in nodes for v in n.inputs[1:] if v is not None]
    for n in nodes:
        graph.remove(n, safe=True)
    for w in weights:
        if w.name in graph.initializers and not w.uses() and w not in graph.outputs:
            graph.initializers.pop(w.name)


def _fit_together(nodes: Sequence[ir.Node]) -> str | None:
    """Why these weight matmuls cannot be one op (None: they can)."""
    keys = {_key(n) for n in nodes}
    if len(keys) > 1:
        return ("they differ in op, weight type or MatMulNBits attributes (" +
                ", ".join(f"{node_label(n)}: {_key(n)}" for n in nodes) + ")")
    if any(_columns(n) in (None, -1) for n in nodes):
        return "an output width is not static"
    return None


# -- packed_qkv --------------------------------------------------------------------------------

def _match_qkv(graph: ir.Graph, node: ir.Node):
    """Pattern: GroupQueryAttention(proj(x, Wq), proj(x, Wk), proj(x, Wv), ...), proj a weight matmul.
    Conditions: each projection read by the attention alone; the three fit one op (same op, K,
    bits, block size, accuracy level); widths ``heads * head_size`` and ``kv_heads * head_size``."""
    if len(node.inputs) < 3 or node.inputs[1] is None or node.inputs[2] is None:
        return no_match("the attention's query is packed already")
    if node.inputs[1] is node.inputs[2]:  # keys used as values (Gemma 4's global layers)
        return miss("the key and value inputs are one value: packing would read its weight twice")
    q = _projection(node.inputs[0])
    if not q:
        return q
    x = q["x"]
    found = [q] + [_projection(v, x) for v in node.inputs[1:3]]
    for f in found[1:]:
        if not f:
            return f
    matmuls = [f["matmul"] for f in found]
    for value in node.inputs[:3]:
        if not only_reader(value, node, graph):
            return miss(f"the projection {value_label(value)} has readers besides the attention")
    why = _fit_together(matmuls)
    if why is not None:
        return miss(f"the query, key and value projections cannot share one op: {why}")
    heads, kv_heads = node.attributes.get_int("num_heads", 0), node.attributes.get_int("kv_num_heads", 0)
    widths = [_columns(m) for m in matmuls]
    if not heads or widths[0] % heads or widths[1:] != [widths[0] // heads * kv_heads] * 2:
        return miss(f"projection widths {widths} are not (heads, kv_heads, kv_heads) x head_size for "
                    f"{heads} and {kv_heads} heads")
    return {"matmuls": matmuls}


def _pack_qkv(graph: ir.Graph, node: ir.Node, found) -> list[ir.Node]:
    packed = _packed_matmul(graph, found["matmuls"], node)
    node.replace_input_with(0, packed)
    node.replace_input_with(1, None)
    node.replace_input_with(2, None)
    _remove(graph, found["matmuls"])
    return [node]


# -- packed_siblings ---------------------------------------------------------------------------

def _siblings(graph: ir.Graph, node: ir.Node) -> list[ir.Node]:
    """The weight matmuls of ``node``'s kind (:func:`_key`) that read its input, ``node`` among
    them, in graph order (a router's float MatMul beside 4-bit expert projections stays out)."""
    x, kind = node.inputs[0], _key(node)
    readers = {user for user, slot in x.uses() if slot == 0}
    return [n for n in graph if n in readers and _projection(n.outputs[0], x) and _key(n) == kind]


def _match_siblings(graph: ir.Graph, node: ir.Node):
    """Pattern: two or more weight matmuls of one kind reading one rank-3 activation. Conditions:
    static widths; none is a graph output; ``node`` is the first of them (the group fires once)."""
    if not _projection(node.outputs[0]):
        return no_match(f"{node_label(node)} is not a weight matmul of a rank-3 activation")
    group = _siblings(graph, node)
    if len(group) < 2:
        return no_match("no other weight matmul of its kind reads the same activation")
    if group[0] is not node:
        return no_match("not the group's first matmul")
    if any(n.outputs[0] in graph.outputs for n in group):
        return miss("a projection is a graph output")
    why = _fit_together(group)
    if why is not None:
        return miss(f"the projections of {value_label(node.inputs[0])} cannot share one op: {why}")
    return {"matmuls": group}


def _pack_siblings(graph: ir.Graph, node: ir.Node, found) -> None:
    matmuls = found["matmuls"]
    packed = _packed_matmul(graph, matmuls, matmuls[0])
    sizes = ir.Value(name=_unique(graph, f"{packed.name}_sizes"), shape=ir.Shape([len(matmuls)]),
                     type=ir.TensorType(ir.DataType.INT64),
                     const_value=ir.Tensor(np.array([_columns(n) for n in matmuls], np.int64)))
    graph.register_initializer(sizes)
    split = ir.Node("", "Split", [packed, sizes], attributes=[ir.AttrInt64("axis", -1)], num_outputs=len(matmuls),
                    name=_unique(graph, f"{packed.name}_split"))
    graph.insert_after(packed.producer(), split)
    for old, new in zip((n.outputs[0] for n in matmuls), split.outputs, strict=True):
        new.type, new.shape = old.type, old.shape
        name, old.name = old.name, None
        ir.convenience.replace_all_uses_with(old, new)
        new.name = name
    _remove(graph, matmuls)


class PackedProjectionsPass(RuleFamily):
    """The packing (module doc) as a rule family for the optimize stage's rewrite slot; each rule
    records itself on the nodes it writes and explains a group it leaves alone."""

    name = "llm_packed_projections"
    # it reads the shapes the export inferred; in the rewrite slot nothing declared is provided,
    # and it removes what it packs itself
    needs = frozenset()
    produces_dead_code = False
    scope = "main"

    def rules(self) -> Sequence[Rule]:
        return [
            Rule("packed_qkv", frozenset({GQA_OP}), _match_qkv, _pack_qkv, domain=MS),
            Rule("packed_siblings", frozenset({"MatMul"}), _match_siblings, _pack_siblings),
            Rule("packed_siblings_nbits", frozenset({"MatMulNBits"}), _match_siblings, _pack_siblings, domain=MS),
        ]
