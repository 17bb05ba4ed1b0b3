"""``target="onnxruntime"``: graphs for onnxruntime's CPU kernels, op by op where measured
(``bench/ort_contrib_ops.py``, onnxruntime 1.32, 1 thread pinned to one core, AMD EPYC with
AVX-512; ratio candidate/standard at batch 8 x 64 tokens for widths 64 and 256, batch 1 x 128
tokens for width 768 (BERT-base); graph optimizations off unless said):

| candidate | d=64 | d=256 | d=768 | used |
|---|---|---|---|---|
| ``Gelu(x + bias)`` → ``BiasGelu`` / ``FastGelu(x, bias)`` | 1.01 / 1.02 | 1.01 / 1.01 | 1.08 / 1.04 | yes (below) |
| ``LayerNormalization(a + b)`` → ``SkipLayerNormalization`` | 5.7 | 5.8 | 6.8 | no: the opposite (below) |
| ... with the sum read on (a residual stream) | 4.3 | 5.9 | 5.9 | no |
| ``MatMul + Add + Split + Attention`` → contrib ``Attention`` (packed QKV) | | 0.99 | 1.00 | no gain |
| ONNX ``Attention`` → ``MultiHeadAttention`` | 1.5 | 1.30 | 1.23 | no |
| ``MatMul + bias`` (3-D) → ``Reshape, Gemm, Reshape`` | 1.02 | 1.04 | 1.15 | no |

With default session options onnxruntime itself fuses ``LayerNormalization(Add(a, b))`` into
SkipLayerNormalization when a and b have one static shape (a residual connection read by the norm
alone, as in BERT), and its transformer optimizer (``onnxruntime.transformers.optimizer``) fuses the
residual streams of pre-LN models (GPT-2, ViT) too: both make the norm 6-8x slower on this CPU
(d=256: Sum + LayerNormalization 0.098 ms, the fused form 0.570 ms). The MatMuls, at the
machine's peak in onnxruntime and XLA alike, are ~80% of a transformer layer's time at d=256, so
the other ops are where the target can gain (bench/results/targets.md).

Rules:
- ``residual_sum``: ``LayerNormalization(Add(a, b))`` with a and b computed → ``Sum(a, b)`` for the
  Add: the same arithmetic, a pattern neither optimizer fuses into SkipLayerNormalization;
- ``bias_gelu``: ``Gelu(x + bias)`` (bias a constant vector over the last axis, the sum read by the
  Gelu alone) → ``com.microsoft.BiasGelu`` (exact) or ``FastGelu(x, bias)`` (tanh): what the session
  optimizer fuses at load anyway, carried by the file so the transformer optimizer finds it done.

Recommended session options (the export cannot set them): ``intra_op_num_threads`` = the cores the
process may use, ``inter_op_num_threads=1``; for latency on a loaded or shared machine,
``session.intra_op.allow_spinning="0"`` (the pool's threads otherwise spin between ops, which
process CPU time counts).
"""

from __future__ import annotations

import onnx_ir as ir

from ...ir.constants import constant_tensor
from ...passes.manager import all_graphs, const_vector, is_op, only_reader, replace_value
from ...passes.rewrite.emit import taken_names
from ...passes.rules import Rule, RuleFamily, miss, no_match, value_label

MS = "com.microsoft"


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
    w = constant_tensor(mm.inputs[1]) if is_op(mm, "MatMul") else None
    return (w is not None and len(w.shape) == 2 and summed.shape is not None and len(summed.shape) > 0
            and int(w.shape[1]) == summed.shape[-1])


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


class OnnxRuntimeContribOps(RuleFamily):
    name = "onnxruntime"
    #: the residual sum's LayerNormalization and BiasGelu's Gelu (a lowering's, or one the
    #: layer-norm and elementwise families wrote first in this pass)
    start_ops = frozenset({"LayerNormalization", "Gelu"})
    scope = "graphs"  # function bodies keep standard ops (their callers may be inlined elsewhere)

    def __init__(self, opset: int = 0) -> None:
        super().__init__(opset)
        self._names: dict[int, tuple[ir.Graph, _Names]] = {}

    def rules(self) -> list[Rule]:
        return [Rule("residual_sum", frozenset({"LayerNormalization"}), _residual_sum_match, self._residual_sum),
                Rule("bias_gelu", frozenset({"Gelu"}), _bias_gelu_match, self._bias_gelu)]

    def run(self, model: ir.Model, counts: dict[str, int]) -> bool:
        modified = super().run(model, counts)
        self._names.clear()
        if any(node.domain == MS for graph in all_graphs(model) for node in graph):
            model.opset_imports.setdefault(MS, 1)
        return modified

    def names(self, graph) -> _Names:
        """The fresh names of ``graph``, kept across the rules of one run."""
        held = self._names.get(id(graph))
        if held is None:
            held = self._names[id(graph)] = (graph, _Names(graph))
        return held[1]

    def _residual_sum(self, graph, ln: ir.Node, add: ir.Node) -> None:
        """``LayerNormalization(Add(a, b))``, a and b computed (a residual connection) →
        ``LayerNormalization(Sum(a, b))``: the same sum, in a form neither onnxruntime's session
        optimizer nor its transformer optimizer fuses into SkipLayerNormalization, whose CPU kernel
        measured 6-8x slower than Add + LayerNormalization (module docstring)."""
        x = ln.inputs[0]
        node = _new_node("", "Sum", list(add.inputs), {}, [x], self.names(graph))
        graph.insert_before(add, node)
        replace_value(graph, x, node.outputs[0])

    def _bias_gelu(self, graph, gelu: ir.Node, found) -> None:
        m, c = found
        approx = gelu.attributes["approximate"].value if "approximate" in gelu.attributes else "none"
        op = "FastGelu" if approx == "tanh" else "BiasGelu"
        node = _new_node(MS, op, [m, c], {}, [gelu.outputs[0]], self.names(graph))
        graph.insert_before(gelu, node)
        replace_value(graph, gelu.outputs[0], node.outputs[0])


def _residual_sum_match(graph, ln: ir.Node):
    x = ln.inputs[0]
    add = x.producer() if x is not None else None
    if not is_op(add, "Add") or len(add.inputs) != 2:
        return no_match("the LayerNormalization's input is not an Add")
    if x.dtype in (None, ir.DataType.BFLOAT16):
        return miss(f"the sum is {x.dtype}: onnxruntime's optimizers do not fuse it")
    if any(v is None or constant_tensor(v) is not None for v in add.inputs):
        return miss("an operand of the Add is a constant: a bias, not a residual")
    return add


def _bias_gelu_match(graph, gelu: ir.Node):
    x = gelu.inputs[0]
    add = x.producer()
    if not is_op(add, "Add"):
        return no_match("the Gelu's input is not an Add")
    if not only_reader(x, gelu, graph):
        return miss(f"the sum {value_label(x)} is read outside the Gelu")
    if x.shape is None or len(x.shape) < 1:
        return miss(f"the sum {value_label(x)} has no known rank")
    m, c = add.inputs
    if not const_vector(c, x.shape[-1]):
        m, c = c, m
    if not const_vector(c, x.shape[-1]):
        return miss(f"neither operand of the Add is a constant vector of the last axis ({x.shape[-1]})")
    if not _biased_operand(m, x):
        return miss(f"the biased operand {value_label(m)} is not a computed value of the sum's shape")
    return m, c
