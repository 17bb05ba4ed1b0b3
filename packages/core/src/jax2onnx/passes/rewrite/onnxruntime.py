"""``target="onnxruntime"``: onnxruntime's contrib ops (domain ``com.microsoft``), op by op where
its CPU kernels measured at least as fast as the standard ops they replace
(``bench/ort_contrib_ops.py``, onnxruntime 1.32, 1 thread, batch 8 x 64 tokens, width 64; ratio
contrib/standard, graph optimizations off | on):

| rewrite | off | on | used |
|---|---|---|---|
| ``Gelu(x + bias)`` → ``BiasGelu`` / ``FastGelu(x, bias)`` | 1.01 / 1.02 | 1.00 / 0.99 | yes |
| ``LayerNormalization(a + b)`` → ``SkipLayerNormalization`` | 5.7 | 1.00 (onnxruntime fuses it) | yes |
| ... with the sum read on (a residual stream) | 4.3 | 4.3 | no |
| ONNX ``Attention`` → ``MultiHeadAttention`` | 1.5 | 1.5 | no |
| ``MatMul + bias`` (3-D) → ``Reshape, Gemm, Reshape`` | 1.02 | 1.02 | no |

Rules, each a fusion onnxruntime's session optimizer makes at load anyway (so no slower than the
standard graph under default session options; the file carries it, and onnxruntime's transformer
optimizer finds it done):
- ``skip_layer_norm``: ``LayerNormalization(a + b [+ bias])`` over the last axis of rank-3 values,
  the sum read by the norm alone → ``SkipLayerNormalization(a, b, gamma, beta[, bias])``. A sum
  read on as well (the residual stream of a pre-LN transformer) stays Add + LayerNormalization:
  SkipLayerNormalization with its sum output measured 4-5x slower on CPU at widths 64-768, and
  the session optimizer leaves that form alone (the transformer optimizer would fuse it);
- ``bias_gelu``: ``Gelu(x + bias)`` (bias a constant vector over the last axis, the sum read by the
  Gelu alone) → ``com.microsoft.BiasGelu`` (exact) or ``FastGelu(x, bias)`` (tanh).
"""

from __future__ import annotations

from functools import partial

import onnx_ir as ir

from ...ir.constants import constant_tensor
from ..manager import all_graphs, rewrite_nodes
from .emit import taken_names

MS = "com.microsoft"


def _is(node: ir.Node | None, op: str) -> bool:
    return node is not None and node.op_type == op and node.domain in ("", "ai.onnx")


def _only_reader(v: ir.Value, node: ir.Node, graph) -> bool:
    return v not in graph.outputs and all(user is node for user, _ in v.uses())


def _const_vector(v: ir.Value | None, size) -> bool:
    t = constant_tensor(v)
    return t is not None and len(t.shape) == 1 and isinstance(size, int) and int(t.shape[0]) == size


def _same_shape(a: ir.Value, b: ir.Value) -> bool:
    if a.shape is None or b.shape is None or len(a.shape) != len(b.shape):
        return False
    return all(x == y and (isinstance(x, int) or getattr(x, "value", None) is not None)
               for x, y in zip(a.shape, b.shape))


def _biased_operand(m: ir.Value | None, summed: ir.Value) -> bool:
    """``m`` is the non-constant operand of ``summed = m + bias`` (a vector over the last axis) and
    has ``summed``'s shape (an m whose last dim is 1 would be broadcast, which BiasGelu does not
    do). Before shape inference a MatMul's output may have no shape yet: then its constant
    matrix's last dim must be the bias's size."""
    if m is None or constant_tensor(m) is not None:
        return False
    if m.shape is not None:
        return _same_shape(m, summed)
    mm = m.producer()
    w = constant_tensor(mm.inputs[1]) if _is(mm, "MatMul") else None
    return (w is not None and len(w.shape) == 2 and summed.shape is not None and len(summed.shape) > 0
            and int(w.shape[1]) == summed.shape[-1])


def _biased_sum(v: ir.Value, hidden) -> bool:
    """``v`` is ``m + bias`` with a constant vector of ``hidden`` (its shape may not be known yet)."""
    add = v.producer()
    return _is(add, "Add") and any(_const_vector(c, hidden) for c in add.inputs)


class _Names:
    def __init__(self, graph) -> None:
        self.taken = taken_names(graph)

    def __call__(self, stem: str) -> str:
        n = 0
        while f"{stem}{n}" in self.taken:
            n += 1
        self.taken.add(f"{stem}{n}")
        return f"{stem}{n}"


def _new_node(domain, op, inputs, attrs, outputs_like, names, n_outputs=1):
    node = ir.Node(domain, op, inputs, ir.convenience.convert_attributes(attrs), num_outputs=n_outputs,
                   name=names(f"ort_{op}_"))
    for out, like in zip(node.outputs, outputs_like):
        out.name = names(f"ort_{op.lower()}_")
        if like is not None:
            out.type, out.shape = like.type, like.shape
    return node


def _replace_value(graph, old: ir.Value, new: ir.Value) -> None:
    for i, v in enumerate(graph.outputs):
        if v is old:
            graph.outputs[i] = new
            name, old.name = old.name, None
            new.name = name
    ir.convenience.replace_all_uses_with(old, new)


class OnnxRuntimeContribOps:
    name = "onnxruntime"

    def apply(self, model: ir.Model, counts: dict[str, int]) -> bool:
        modified = False
        for graph in list(all_graphs(model)):
            if not isinstance(graph, ir.Graph):
                continue  # function bodies keep standard ops (their callers may be inlined elsewhere)
            names = _Names(graph)
            for rule in (self._skip_layer_norm, self._bias_gelu):
                rewritten = rewrite_nodes([graph], partial(rule, names=names), counts, rule.__name__.lstrip("_"))
                modified = rewritten or modified
        if modified:
            model.opset_imports.setdefault(MS, 1)
        return modified

    @staticmethod
    def _skip_layer_norm(graph, ln: ir.Node, names) -> bool:
        """``LayerNormalization(a + b [+ bias])`` over the last axis of two rank-3 values of one
        shape, the sum read by the norm alone → ``SkipLayerNormalization(a, b, gamma, beta[, bias])``."""
        if not _is(ln, "LayerNormalization") or len(ln.inputs) < 2 or any(o.uses() or o in graph.outputs
                                                                           for o in ln.outputs[1:]):
            return False
        x = ln.inputs[0]
        add = x.producer()
        if not _is(add, "Add") or not _only_reader(x, ln, graph) or x.shape is None or len(x.shape) != 3:
            return False
        axis = ln.attributes["axis"].value if "axis" in ln.attributes else -1
        hidden = x.shape[2]
        beta = ln.inputs[2] if len(ln.inputs) > 2 else None
        if axis not in (-1, 2) or not _const_vector(ln.inputs[1], hidden) or (beta is not None and not _const_vector(beta, hidden)):
            return False
        a, b = add.inputs
        if a is None or b is None or constant_tensor(a) is not None or constant_tensor(b) is not None:
            return False
        if not (_same_shape(a, x) or _biased_sum(a, hidden)) or not (_same_shape(b, x) or _biased_sum(b, hidden)):
            return False
        bias = None
        for first, second in ((a, b), (b, a)):  # a bias added to one operand goes into the op
            inner = first.producer()
            if _is(inner, "Add") and _only_reader(first, add, graph):
                m, c = inner.inputs if _const_vector(inner.inputs[1], hidden) else inner.inputs[::-1]
                if _const_vector(c, hidden) and _biased_operand(m, first):
                    a, b, bias = m, second, c
                    break
        if not _same_shape(a, x) and not _biased_operand(a, x) or not _same_shape(b, x) and not _biased_operand(b, x):
            return False
        inputs = [a, b, ln.inputs[1], beta, bias]
        while inputs[-1] is None:
            inputs.pop()
        eps = ln.attributes["epsilon"].value if "epsilon" in ln.attributes else 1e-5
        node = _new_node(MS, "SkipLayerNormalization", inputs, {"epsilon": float(eps)}, [ln.outputs[0]], names)
        graph.insert_before(ln, node)
        _replace_value(graph, ln.outputs[0], node.outputs[0])
        return True

    @staticmethod
    def _bias_gelu(graph, gelu: ir.Node, names) -> bool:
        if not _is(gelu, "Gelu"):
            return False
        x = gelu.inputs[0]
        add = x.producer()
        if not _is(add, "Add") or not _only_reader(x, gelu, graph) or x.shape is None or len(x.shape) < 1:
            return False
        m, c = add.inputs
        if not _const_vector(c, x.shape[-1]):
            m, c = c, m
        if not _const_vector(c, x.shape[-1]) or not _biased_operand(m, x):
            return False
        approx = gelu.attributes["approximate"].value if "approximate" in gelu.attributes else "none"
        op = "FastGelu" if approx == "tanh" else "BiasGelu"
        node = _new_node(MS, op, [m, c], {}, [gelu.outputs[0]], names)
        graph.insert_before(gelu, node)
        _replace_value(graph, gelu.outputs[0], node.outputs[0])
        return True
