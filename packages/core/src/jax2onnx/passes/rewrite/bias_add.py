"""Bias-add chains: ``MatMul(x, W) + bias`` with a 2-D ``x``, a constant matrix ``W`` and a constant
vector ``bias`` → ``Gemm(x, W, bias)``, one node adding the bias inside the GEMM (every target:
onnxruntime, TensorRT and the web runtimes run Gemm). Higher ranks stay MatMul + Add: a Gemm there
needs Reshapes around it, measured no faster in onnxruntime (``bench/ort_contrib_ops.py``).
"""

from __future__ import annotations

import onnx_ir as ir

from ...ir.constants import constant_tensor
from ..manager import all_graphs, const_vector, is_op, only_reader, replace_value, rewrite_nodes


class BiasAddChains:
    name = "bias_add"
    #: the MatMul whose bias the Add adds
    start_ops = frozenset({"MatMul"})

    def apply(self, model: ir.Model, counts: dict[str, int]) -> bool:
        return rewrite_nodes(all_graphs(model), self._matmul_bias_gemm, counts, "matmul_bias_gemm")

    @staticmethod
    def _matmul_bias_gemm(graph, add: ir.Node) -> bool:
        if not is_op(add, "Add"):
            return False
        y = add.outputs[0]
        for i in (0, 1):
            mm_out, bias = add.inputs[i], add.inputs[1 - i]
            mm = mm_out.producer() if mm_out is not None else None
            if is_op(mm, "MatMul") and only_reader(mm_out, add, graph):
                break
        else:
            return False
        x, w = mm.inputs
        wt = constant_tensor(w)
        # MatMul keeps a matrix x's rank; before shape inference either shape may be the known one
        known = y.shape if y.shape is not None else x.shape
        if wt is None or len(wt.shape) != 2 or known is None or len(known) != 2:
            return False
        if (x.shape is not None and len(x.shape) != 2) or not const_vector(bias, int(wt.shape[1])):
            return False
        gemm = ir.Node("", "Gemm", [x, w, bias], name=(add.name or "bias_add") + "_gemm")
        out = gemm.outputs[0]
        out.type, out.shape = y.type, y.shape if y.shape is not None else ir.Shape([known[0], int(wt.shape[1])])
        out.name = (y.name or "bias_add") + "_gemm"
        graph.insert_before(add, gemm)
        replace_value(graph, y, out)
        return True
