"""Broadcasting matmuls: ``Transpose(Einsum(a, b))`` that is numpy's batch-broadcasting matmul →
one ``MatMul`` (every runtime's fastest kernel).

``jnp.matmul(a, b)`` with batch dims that broadcast against each other (``[2, 1, 3, 4] @ [5, 4, 2]``)
is, in the trace, ``squeeze`` of the size-1 batch axes, a ``dot_general`` with no batch dims (lhs
free axes, then rhs free axes: ``[2, 3, 5, 2]``) and a ``transpose`` to numpy's layout
(``[2, 5, 3, 2]``). A ``dot_general`` alone cannot be one MatMul (its output order differs), so the
lax pack lowers it to ``Einsum``; with the Transpose after it, the pair is exactly ONNX's
``MatMul`` on ``a`` with size-1 axes put back where the other operand's batch axes go. The
``Squeeze`` that removed those axes is read past when it removed exactly them (no Unsqueeze then).
The rule keys on the graph, not on ``jnp.matmul`` itself: an export replaces no library function
(issue #33), and ``jnp.matmul`` (an inlined jit) leaves nothing else in the trace to find.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from ...ir.constants import constant_ints
from ..manager import is_op, only_reader, replace_value
from ..rules import Rule, RuleFamily, miss, no_match, value_label
from .emit import add_initializer


def _subscripts(equation: str) -> tuple[str, str, str] | None:
    if "->" not in equation or "." in equation:
        return None
    inputs, out = equation.replace(" ", "").split("->")
    parts = inputs.split(",")
    return (parts[0], parts[1], out) if len(parts) == 2 else None


def _match(graph, transpose: ir.Node):
    """Pattern: a Transpose of an Einsum of two operands, read by it alone. Conditions: the Einsum
    contracts one axis ``k``; lhs is ``P m k``, rhs ``Q k n`` (P, Q: free axes of one side only);
    its output ``P m Q n``; the Transpose makes it ``P Q m n``."""
    einsum = transpose.inputs[0].producer() if transpose.inputs[0] is not None else None
    if not is_op(einsum, "Einsum") or len(einsum.inputs) != 2:
        return no_match("the Transpose does not read a two-operand Einsum")
    if not only_reader(einsum.outputs[0], transpose, graph):
        return miss(f"the Einsum's output {value_label(einsum.outputs[0])} has other readers")
    attr = einsum.attributes.get("equation")
    parts = _subscripts(attr.as_string() if attr is not None else "")
    if parts is None:
        return miss("the Einsum's equation is not 'lhs,rhs->out' with letters only")
    lhs, rhs, out = parts
    if len(set(lhs)) != len(lhs) or len(set(rhs)) != len(rhs) or len(lhs) < 2 or len(rhs) < 2:
        return miss(f"the equation {lhs},{rhs}->{out} repeats a letter or has a vector operand")
    k, m, n = lhs[-1], lhs[-2], rhs[-1]
    p, q = lhs[:-2], rhs[:-2]
    if rhs[-2] != k or k in out or set(p) & set(rhs) or set(q) & set(lhs) or m in rhs or n in lhs:
        return miss(f"{lhs},{rhs}->{out} is not a matmul of P·m·k by Q·k·n with P, Q free on one side")
    if out != p + m + q + n:
        return miss(f"the Einsum's output {out} is not lhs free axes then rhs free axes")
    perm = transpose.attributes.get("perm")
    perm = list(perm.as_ints()) if perm is not None else None
    want = [*range(len(p)), *range(len(p) + 1, len(p) + 1 + len(q)), len(p), len(out) - 1]
    if perm != want:
        return miss(f"the Transpose's perm {perm} does not put the rhs batch axes before m (wants {want})")
    return einsum, len(p), len(q)


def _replace(graph, transpose: ir.Node, found) -> None:
    einsum, n_p, n_q = found
    a, b = einsum.inputs
    axes = list(range(n_p, n_p + n_q))  # size-1 axes where b's batch axes broadcast
    squeeze = a.producer()
    squeezed = constant_ints(squeeze.inputs[1]) if is_op(squeeze, "Squeeze") and len(squeeze.inputs) > 1 else None
    if n_q and squeezed is not None and sorted(squeezed) == axes:
        a = squeeze.inputs[0]  # the Squeeze removed exactly those axes: read what it read
    elif n_q:
        axes_value = add_initializer(graph, (einsum.name or "matmul") + "_unsqueeze_axes", np.asarray(axes, np.int64))
        unsqueeze = ir.Node("", "Unsqueeze", [a, axes_value], name=(einsum.name or "matmul") + "_unsqueeze")
        graph.insert_before(transpose, unsqueeze)
        unsqueeze.outputs[0].type = a.type
        a = unsqueeze.outputs[0]
    y = transpose.outputs[0]
    matmul = ir.Node("", "MatMul", [a, b], name=(einsum.name or "matmul") + "_broadcast")
    out = matmul.outputs[0]
    out.type, out.shape, out.name = y.type, y.shape, (y.name or "matmul") + "_broadcast"
    graph.insert_before(transpose, matmul)
    replace_value(graph, y, out)


class BroadcastMatmuls(RuleFamily):
    name = "matmul_broadcast"
    #: a replacement may add an initializer (the Unsqueeze axes): main graph and subgraphs only
    scope = "graphs"

    def rules(self) -> list[Rule]:
        return [Rule("einsum_transpose_matmul", frozenset({"Transpose"}), _match, _replace)]
