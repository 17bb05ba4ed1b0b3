"""Bias-add chains: ``MatMul(x, W) + bias`` with a 2-D ``x``, a constant matrix ``W`` and a constant
vector ``bias`` → ``Gemm(x, W, bias)``, one node adding the bias inside the GEMM (every target:
onnxruntime, TensorRT and the web runtimes run Gemm). Higher ranks stay MatMul + Add: a Gemm there
needs Reshapes around it, measured no faster in onnxruntime (``bench/ort_contrib_ops.py``).
"""

from __future__ import annotations

import onnx_ir as ir

from ...ir.constants import constant_tensor
from ..manager import const_vector, is_op, only_reader, replace_value
from ..rules import Rule, RuleFamily, miss, no_match, value_label


def _match(graph, add: ir.Node):
    """Pattern: an Add one of whose inputs is a MatMul read by it alone. Conditions: a constant
    matrix W, a rank-2 product, a constant bias vector of W's width."""
    for i in (0, 1):
        mm_out, bias = add.inputs[i], add.inputs[1 - i]
        mm = mm_out.producer() if mm_out is not None else None
        if is_op(mm, "MatMul") and only_reader(mm_out, add, graph):
            break
    else:
        return no_match("no input is a MatMul read by this Add alone")
    y = add.outputs[0]
    x, w = mm.inputs
    wt = constant_tensor(w)
    # MatMul keeps a matrix x's rank; before shape inference either shape may be the known one
    known = y.shape if y.shape is not None else x.shape
    if wt is None or len(wt.shape) != 2:
        return miss(f"the MatMul's weight {value_label(w)} is not a constant matrix")
    if known is None or len(known) != 2 or (x.shape is not None and len(x.shape) != 2):
        return miss("the product is not a matrix (Gemm is rank 2; higher ranks stay MatMul + Add)")
    if not const_vector(bias, int(wt.shape[1])):
        return miss(f"the bias {value_label(bias)} is not a constant vector of {int(wt.shape[1])}")
    return mm, bias, known, int(wt.shape[1])


def _replace(graph, add: ir.Node, found) -> None:
    mm, bias, known, width = found
    x, w = mm.inputs
    y = add.outputs[0]
    gemm = ir.Node("", "Gemm", [x, w, bias], name=(add.name or "bias_add") + "_gemm")
    out = gemm.outputs[0]
    out.type, out.shape = y.type, y.shape if y.shape is not None else ir.Shape([known[0], width])
    out.name = (y.name or "bias_add") + "_gemm"
    graph.insert_before(add, gemm)
    replace_value(graph, y, out)


class BiasAddChains(RuleFamily):
    name = "bias_add"
    #: the MatMul whose bias the Add adds
    start_ops = frozenset({"MatMul"})

    def rules(self) -> list[Rule]:
        return [Rule("matmul_bias_gemm", frozenset({"Add"}), _match, _replace)]
