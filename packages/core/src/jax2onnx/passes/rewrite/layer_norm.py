"""LayerNorm written by hand → ``LayerNormalization`` (opset 17).

Libraries that do not call a patched ``LayerNorm`` (plain-JAX models, Equinox's functional code,
Hugging Face layers written out) normalise over the last axis in one of two ways:

- centred: ``c = x - mean(x)``, ``var = mean(c * c)`` (or ``c ** 2``, ``jnp.var``);
- moments: ``var = mean(x * x) - mean(x) ** 2``, clipped at 0 (Flax's ``LayerNorm``, Equinox);

then ``c / sqrt(var + eps)``, ``c * rsqrt(var + eps)`` (Reciprocal(Sqrt), ``1 / Sqrt`` or
``Pow(-0.5)``), with the scale inside the factor (Flax: ``c * (rsqrt(var + eps) * gamma)``) or
after it, and a bias added. Lowered, that is 9-13 nodes per norm. ``mean`` is a ``ReduceMean``
over the last axis with kept dims, or ``ReduceSum`` (kept, or re-inserted by ``Unsqueeze``) divided
by (or times the inverse of) the axis length.

Rule (anchor: the ``Sub`` computing ``c``): the chain above, ``eps`` a scalar constant, gamma and
beta constants of the axis length (vectors or broadcast (1, ..., n)), float32 → one
``LayerNormalization(x, gamma, beta, axis=-1, epsilon=eps)`` (its ``stash_type`` computes in
float32, as the chain did; the moments form's cancellation is gone, so the result is as or more
accurate). A look-alike (another axis, a mean that is not one, a constant that is not a scalar)
is left alone. The replaced nodes are left to dead-code elimination: an intermediate also read
elsewhere stays.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from ...ir.constants import constant_ints, constant_tensor
from ...ir.opsets import op_available
from ..manager import is_op
from ..rules import Miss, Rule, RuleFamily, miss, no_match, value_label
from .emit import add_initializer, substitute


def _scalar(v: ir.Value | None) -> float | None:
    t = constant_tensor(v)
    if t is None or int(np.prod([int(d) for d in t.shape])) != 1:
        return None
    return float(np.asarray(t.numpy()).reshape(-1)[0])


def _producer(v: ir.Value | None) -> ir.Node | None:
    return None if v is None else v.producer()


def _reduce_axes(node: ir.Node) -> list[int] | None:
    if len(node.inputs) > 1 and node.inputs[1] is not None:
        return constant_ints(node.inputs[1])
    attr = node.attributes.get("axes")
    return None if attr is None else list(attr.value)


def _keepdims(node: ir.Node) -> bool:
    attr = node.attributes.get("keepdims")
    return True if attr is None else bool(attr.value)


def _last_axis_reduce(v: ir.Value | None, op: str) -> ir.Value | None:
    """x when ``v`` is ``op`` over x's last axis with the axis kept (or Unsqueezed back)."""
    node = _producer(v)
    unsqueezed = False
    if is_op(node, "Unsqueeze"):
        axes = constant_ints(node.inputs[1]) if len(node.inputs) > 1 else None
        if axes is None or len(axes) != 1 or v.shape is None or axes[0] % len(v.shape) != len(v.shape) - 1:
            return None
        node, unsqueezed = _producer(node.inputs[0]), True
    if not is_op(node, op):
        return None
    x = node.inputs[0]
    if x is None or x.shape is None or len(x.shape) == 0:
        return None
    axes = _reduce_axes(node)
    if axes is None or [a % len(x.shape) for a in axes] != [len(x.shape) - 1] or _keepdims(node) == unsqueezed:
        return None
    return x


def _mean_last(v: ir.Value | None) -> ir.Value | None:
    """x when ``v`` is the mean over x's last axis, keeping it."""
    x = _last_axis_reduce(v, "ReduceMean")
    if x is not None:
        return x
    node = _producer(v)
    if is_op(node, "Div") and _scalar(node.inputs[1]) is not None:
        scale = 1.0 / _scalar(node.inputs[1]) if _scalar(node.inputs[1]) else 0.0
        total = node.inputs[0]
    elif is_op(node, "Mul") and _scalar(node.inputs[1]) is not None:
        scale, total = _scalar(node.inputs[1]), node.inputs[0]
    elif is_op(node, "Mul") and _scalar(node.inputs[0]) is not None:
        scale, total = _scalar(node.inputs[0]), node.inputs[1]
    else:
        return None
    x = _last_axis_reduce(total, "ReduceSum")
    if x is None or not isinstance(x.shape[-1], int) or abs(scale * x.shape[-1] - 1.0) > 1e-6:
        return None
    return x


def _square_of(v: ir.Value | None) -> ir.Value | None:
    node = _producer(v)
    if is_op(node, "Mul") and node.inputs[0] is node.inputs[1]:
        return node.inputs[0]
    if is_op(node, "Pow") and _scalar(node.inputs[1]) == 2.0:
        return node.inputs[0]
    return None


def _centred(v: ir.Value | None) -> ir.Value | None:
    """x when ``v = x - mean(x)`` over the last axis."""
    node = _producer(v)
    if not is_op(node, "Sub"):
        return None
    x, m = node.inputs
    return x if x is not None and _mean_last(m) is x else None


def _variance_of(v: ir.Value | None, x: ir.Value) -> bool:
    """``v`` is the variance of x over its last axis (centred or moments form, maybe clipped at 0)."""
    node = _producer(v)
    if is_op(node, "Max") and len(node.inputs) == 2:
        if _scalar(node.inputs[1]) == 0.0:
            v = node.inputs[0]
        elif _scalar(node.inputs[0]) == 0.0:
            v = node.inputs[1]
        else:
            return False
    elif is_op(node, "Relu"):
        v = node.inputs[0]
    elif is_op(node, "Clip") and len(node.inputs) == 2 and _scalar(node.inputs[1]) == 0.0:
        v = node.inputs[0]  # jnp.clip(variance, 0), lowered as one Clip by the jnp pack
    squared = _mean_last(v)
    if squared is not None:  # mean(c * c)
        return _centred(_square_of(squared)) is x
    node = _producer(v)
    if not is_op(node, "Sub"):
        return False
    second, first = node.inputs  # mean(x * x) - mean(x) ** 2
    return _square_of(_mean_last(second)) is x and _mean_last(_square_of(first)) is x


def _eps_and_variance(v: ir.Value | None, x: ir.Value) -> float | Miss | None:
    """eps when ``v = var(x) + eps``; a Miss when ``v`` adds to var(x) something else."""
    node = _producer(v)
    if not is_op(node, "Add"):
        return None
    for i in (0, 1):
        eps = _scalar(node.inputs[1 - i])
        if eps is not None and eps >= 0 and _variance_of(node.inputs[i], x):
            return eps
    for i in (0, 1):
        if _variance_of(node.inputs[i], x):
            other = node.inputs[1 - i]
            eps = _scalar(other)
            what = f"negative ({eps:g})" if eps is not None else "not a constant scalar"
            return miss(f"the epsilon {value_label(other)} added to the variance is {what}")
    return None


def _inverse_std(v: ir.Value | None, x: ir.Value) -> float | Miss | None:
    """eps when ``v = 1 / sqrt(var(x) + eps)`` (a Miss: :func:`_eps_and_variance`)."""
    node = _producer(v)
    if is_op(node, "Reciprocal"):
        root = _producer(node.inputs[0])
        return _eps_and_variance(root.inputs[0], x) if is_op(root, "Sqrt") else None
    if is_op(node, "Div") and _scalar(node.inputs[0]) == 1.0:
        root = _producer(node.inputs[1])
        return _eps_and_variance(root.inputs[0], x) if is_op(root, "Sqrt") else None
    if is_op(node, "Pow") and _scalar(node.inputs[1]) == -0.5:
        return _eps_and_variance(node.inputs[0], x)
    return None


def _vector(v: ir.Value | None, n: int, rank: int) -> np.ndarray | None:
    """The constant ``v`` as a vector of n, when it broadcasts over the last axis only."""
    t = constant_tensor(v)
    if t is None or len(t.shape) > rank or not t.shape or int(t.shape[-1]) != n:
        return None
    if any(int(d) != 1 for d in t.shape[:-1]):
        return None
    return np.asarray(t.numpy()).reshape(n)


def _other(node: ir.Node, v: ir.Value) -> ir.Value | None:
    a, b = node.inputs[0], node.inputs[1]
    return b if a is v else a if b is v else None


def _single_reader(v: ir.Value, graph) -> ir.Node | None:
    users = v.uses()
    if len(users) != 1 or v in graph.outputs:
        return None
    return users[0][0]


class LayerNorms(RuleFamily):
    name = "layer_norm"
    #: the mean: a ReduceMean, or a ReduceSum divided by the axis length
    start_ops = frozenset({"ReduceMean", "ReduceSum"})
    scope = "graphs"  # gamma/beta become initializers

    def __init__(self, opset: int) -> None:
        super().__init__(opset)
        self._made = 0  # numbers the new initializers' names

    def unavailable(self) -> str | None:
        if not op_available("LayerNormalization", self.opset):
            return f"LayerNormalization is an opset-17 op; the model is opset {self.opset}"
        return None

    def rules(self) -> list[Rule]:
        return [Rule("layer_norm", frozenset({"Sub"}), self._match, self._layer_norm)]

    @staticmethod
    def _normalized(centred: ir.Value, x: ir.Value, graph):
        """(normalised value, eps, gamma or None) among the readers of ``centred``; else a Miss
        (the first reader whose epsilon is not one)."""
        rank, n = len(x.shape), x.shape[-1]
        near = None
        for user, _ in centred.uses():
            if is_op(user, "Div") and user.inputs[0] is centred:
                root = _producer(user.inputs[1])
                eps = _eps_and_variance(root.inputs[0], x) if is_op(root, "Sqrt") else None
                if isinstance(eps, float):
                    return user.outputs[0], eps, None
                near = eps if near is None and isinstance(eps, Miss) else near
            elif is_op(user, "Mul"):
                factor = _other(user, centred)
                eps = _inverse_std(factor, x)
                if isinstance(eps, float):
                    return user.outputs[0], eps, None
                near = eps if near is None and isinstance(eps, Miss) else near
                inner = _producer(factor)  # Flax: c * (rsqrt(var + eps) * gamma)
                if is_op(inner, "Mul") and _single_reader(factor, graph) is user:
                    for i in (0, 1):
                        gamma = _vector(inner.inputs[1 - i], n, rank)
                        eps = _inverse_std(inner.inputs[i], x) if gamma is not None else None
                        if isinstance(eps, float):
                            return user.outputs[0], eps, gamma
                        near = eps if near is None and isinstance(eps, Miss) else near
        return near if near is not None else no_match("no reader divides x - mean(x) by sqrt(var(x) + eps)")

    def _match(self, graph, sub: ir.Node):
        x = _centred(sub.outputs[0])
        if x is None:
            return no_match("not x - mean(x) over the last axis")
        if x.dtype != ir.DataType.FLOAT:
            return miss(f"the normalised value {value_label(x)} is {x.dtype}, not float32")
        if not isinstance(x.shape[-1], int):
            return miss(f"the normalised value {value_label(x)} has no static last axis")
        found = self._normalized(sub.outputs[0], x, graph)
        return found if isinstance(found, Miss) else (x, found)

    def _layer_norm(self, graph, sub: ir.Node, matched) -> None:
        x, found = matched
        out, eps, gamma = found
        n, rank = x.shape[-1], len(x.shape)
        beta = None
        reader = _single_reader(out, graph)
        if gamma is None and is_op(reader, "Mul"):
            gamma = _vector(_other(reader, out), n, rank)
            if gamma is not None:
                out = reader.outputs[0]
                reader = _single_reader(out, graph)
        if is_op(reader, "Add"):
            beta = _vector(_other(reader, out), n, rank)
            if beta is not None:
                out = reader.outputs[0]
        self._made += 1
        stem = f"{sub.name or 'sub'}_ln{self._made}"
        inputs = [x]
        for name, array in (("scale", gamma if gamma is not None else np.ones(n, np.float32)),
                            ("bias", beta if beta is not None else np.zeros(n, np.float32))):
            inputs.append(add_initializer(graph, f"{stem}_{name}", np.asarray(array, np.float32)))
        norm = ir.Node("", "LayerNormalization", inputs,
                       [ir.AttrInt64("axis", -1), ir.AttrFloat32("epsilon", float(eps))], name=f"{stem}_layernorm")
        substitute(graph, out, norm, f"{out.name or stem}_layernorm")
