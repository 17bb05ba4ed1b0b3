"""RMSNorm written by hand → ``RMSNormalization`` (opset 23).

Hugging Face's Flax Llama (and most hand-written RMSNorms) compute
``w * (x / sqrt(mean(x * x, axis=-1) + eps))``; lowered, that is nine nodes per norm:
``Mul(x, x) → ReduceSum(last axis) [→ Unsqueeze] → Div(n) → Add(eps) → Sqrt → Div(x, ·) → Mul(w, ·)``
(or ``ReduceMean`` with kept dims, or ``x * Reciprocal(Sqrt(...))``). Rule: that chain over the
last axis of ``x`` (``n`` its static size, ``eps`` and ``w`` constants, ``w`` a vector of ``n`` or
absent) becomes ``RMSNormalization(x, w, axis=-1, epsilon=eps)`` from opset 23 in float32; before 23
(and in float64, which onnxruntime's kernel lacks) it stays.
Every intermediate must be read by the chain alone.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from ...ir.constants import constant_ints, constant_tensor
from ...ir.opsets import op_available
from ..manager import is_op, only_reader
from ..rules import Rule, RuleFamily, miss, no_match, node_label, value_label
from .emit import add_initializer, substitute


def _scalar(v: ir.Value | None) -> float | None:
    t = constant_tensor(v)
    if t is None or int(np.prod([int(d) for d in t.shape])) != 1:
        return None
    return float(np.asarray(t.numpy()).reshape(-1)[0])


def _other(node: ir.Node, v: ir.Value) -> ir.Value | None:
    a, b = node.inputs[0], node.inputs[1]
    return b if a is v else a if b is v else None


class RmsNorms(RuleFamily):
    name = "norms"
    #: the mean of squares: a ReduceMean, or a ReduceSum scaled by the axis length
    start_ops = frozenset({"ReduceMean", "ReduceSum"})
    scope = "graphs"  # a unit weight becomes an initializer

    def unavailable(self) -> str | None:
        if not op_available("RMSNormalization", self.opset):
            return f"RMSNormalization is an opset-23 op; the model is opset {self.opset}"
        return None

    def rules(self) -> list[Rule]:
        return [Rule("rms_norm", frozenset({"Div", "Mul"}), self._normalized, self._rms_norm)]

    @staticmethod
    def _normalized(graph, node: ir.Node):
        """(x, eps, chain nodes) when ``node`` computes x / sqrt(mean(x*x, -1) + eps); else a Miss."""
        if is_op(node, "Div"):
            x, root = node.inputs
            sqrt = root.producer() if root is not None else None
        else:
            for x, r in ((node.inputs[0], node.inputs[1]), (node.inputs[1], node.inputs[0])):  # noqa: B007 - x is the one the loop breaks on
                recip = r.producer() if r is not None else None
                if is_op(recip, "Reciprocal") and only_reader(r, node, graph):
                    root = recip.inputs[0]
                    sqrt = root.producer()
                    break
            else:
                return no_match("no factor is a Reciprocal read by this Mul alone")
        if x is None or not is_op(sqrt, "Sqrt"):
            return no_match("the divisor is not a Sqrt")
        add = sqrt.inputs[0].producer()
        if not is_op(add, "Add"):
            return no_match("the Sqrt's input is not an Add")
        if x.shape is None or len(x.shape) == 0 or not isinstance(x.shape[-1], int):
            return miss(f"the normalised value {value_label(x)} has no static last axis")
        if x.dtype != ir.DataType.FLOAT:
            # onnxruntime's RMSNormalization kernels: float32 (float64 exports keep the arithmetic)
            return miss(f"the normalised value is {x.dtype}, not float32")
        n = x.shape[-1]
        rank = len(x.shape)
        chain = [sqrt, add]
        eps_v = add.inputs[1] if _scalar(add.inputs[1]) is not None else add.inputs[0]
        eps = _scalar(eps_v)
        mean = _other(add, eps_v)
        if eps is None or mean is None:
            return miss(f"neither input of the Add {node_label(add)} is a constant scalar epsilon")
        producer = mean.producer()
        if is_op(producer, "ReduceMean"):
            reduce, scale = producer, 1.0
        elif is_op(producer, "Div") and _scalar(producer.inputs[1]) is not None:
            chain.append(producer)
            scale = 1.0 / _scalar(producer.inputs[1])
            reduce = producer.inputs[0].producer()
            if is_op(reduce, "Unsqueeze"):
                axes = constant_ints(reduce.inputs[1]) if len(reduce.inputs) > 1 else None
                if axes is None or [a % rank for a in axes] != [rank - 1]:
                    return miss("the Unsqueeze after the sum does not restore the last axis")
                chain.append(reduce)
                reduce = reduce.inputs[0].producer()
            if not is_op(reduce, "ReduceSum"):
                return no_match("the mean is not a ReduceSum divided by a constant")
        elif is_op(producer, "Mul") and _scalar(producer.inputs[1]) is not None:
            chain.append(producer)
            scale = _scalar(producer.inputs[1])
            reduce = producer.inputs[0].producer()
            if not is_op(reduce, "ReduceSum"):
                return no_match("the mean is not a ReduceSum times a constant")
        else:
            return no_match("the Add's other input is not a mean (ReduceMean, or ReduceSum scaled)")
        chain.append(reduce)
        axes = constant_ints(reduce.inputs[1]) if len(reduce.inputs) > 1 else None
        if axes is None or [a % rank for a in axes] != [rank - 1]:
            return miss(f"the {reduce.op_type} {node_label(reduce)} is not over the last axis alone")
        keep = reduce.attributes["keepdims"].value if "keepdims" in reduce.attributes else 1
        if bool(keep) == (chain[-2].op_type == "Unsqueeze"):
            return miss(f"the {reduce.op_type} {node_label(reduce)} does not keep the reduced axis exactly once")
        if abs(scale * (n if reduce.op_type == "ReduceSum" else 1) - 1.0) > 1e-6:
            return miss(f"the sum is scaled by {scale:g}, not 1/{n}: not the mean over the last axis")
        square = reduce.inputs[0].producer()
        if not (is_op(square, "Mul") and square.inputs[0] is x and square.inputs[1] is x):
            if not (is_op(square, "Pow") and square.inputs[0] is x and _scalar(square.inputs[1]) == 2.0):
                return miss(f"the reduced value is not the square of the normalised value {value_label(x)}")
        chain.append(square)
        for later, earlier in zip(chain, chain[1:]):
            if not only_reader(earlier.outputs[0], later, graph):
                return miss(f"the value of {earlier.op_type} {node_label(earlier)} is read outside the norm")
        if not only_reader(sqrt.outputs[0], node if is_op(node, "Div") else recip, graph):
            return miss(f"the Sqrt {node_label(sqrt)} is read outside the norm")
        return x, eps, chain

    def _rms_norm(self, graph, node: ir.Node, found) -> None:
        x, eps, _ = found
        out = node.outputs[0]
        n = x.shape[-1]
        weight = None
        users = out.uses()
        if len(users) == 1 and out not in graph.outputs:
            user = users[0][0]
            w = _other(user, out) if is_op(user, "Mul") else None
            t = constant_tensor(w)
            if t is not None and int(np.prod([int(d) for d in t.shape])) == n and all(int(d) == 1 for d in t.shape[:-1]) \
                    and len(t.shape) <= len(x.shape):
                weight, out = w, user.outputs[0]
        if weight is None:
            weight = add_initializer(graph, f"{out.name or 'rms'}_unit_scale", np.ones(n, x.dtype.numpy()))
        elif len(constant_tensor(weight).shape) != 1:  # (1, 1, n) broadcast weight: its vector
            weight = add_initializer(graph, f"{weight.name or 'w'}_vector",
                                     np.asarray(constant_tensor(weight).numpy()).reshape(n))
        norm = ir.Node("", "RMSNormalization", [x, weight],
                       [ir.AttrInt64("axis", -1), ir.AttrFloat32("epsilon", float(eps))],
                       name=f"{node.name or 'rms'}_rmsnorm")
        substitute(graph, out, norm, f"{out.name or 'rms'}_rmsnorm")
