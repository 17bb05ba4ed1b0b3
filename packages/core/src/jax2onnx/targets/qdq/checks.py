"""What ``jax2onnx check --target qdq`` reads off a finished graph.

*Findings* (the export fails on one; ``check`` exits 1): a symbolic axis (NPU compilers take
static shapes only), a compute op (:data:`.transform.COMPUTE_OPS`) whose inputs are not all
dequantized or whose outputs are not all quantized again (an NPU would not run it as an integer
kernel), a float weight such an op reads.

*Notes* (printed, not failures): every other op left float, with why (a node the export marked
:data:`.transform.KEEP_FLOAT` with the reason it gave): an op outside
:data:`.transform.QUANTIZED_OPS` (normalization statistics, softmax, divisions, reductions ...)
runs between ``DequantizeLinear`` and ``QuantizeLinear`` in float, which NPU compilers run on their
float path or hand back to the CPU; one inside a control-flow or function body is not rewritten.
"""

from __future__ import annotations

from collections.abc import Iterable

import onnx_ir as ir

from .transform import COMPUTE_OPS, KEEP_FLOAT, QUANTIZED_OPS, STANDARD, fused_relu

_QDQ = frozenset({"QuantizeLinear", "DequantizeLinear"})
F32 = ir.DataType.FLOAT


def _from_dq(v: ir.Value | None) -> bool:
    producer = v.producer() if v is not None else None
    return v is None or v.dtype != F32 or (producer is not None and producer.op_type == "DequantizeLinear")


def _to_q(v: ir.Value) -> bool:
    """Every reader quantizes ``v`` (or ``v`` goes to one ``Relu`` the NPU fuses, which does)."""
    if v.dtype != F32:
        return True
    if fused_relu(v):
        return _to_q(next(iter(v.uses()))[0].outputs[0])
    return bool(v.uses()) and all(user.op_type == "QuantizeLinear" for user, _ in v.uses())


def wrapped(node: ir.Node) -> bool:
    """Every float input comes from a ``DequantizeLinear`` and every float output goes only to
    ``QuantizeLinear``s."""
    return all(_from_dq(v) for v in node.inputs) and all(_to_q(v) for v in node.outputs)


def _symbolic(values: Iterable[ir.Value]) -> list[str]:
    found = []
    for v in values:
        if v.shape is None:
            found.append(f"{v.name!r} has no shape")
        elif not all(isinstance(d, int) for d in v.shape):
            found.append(f"{v.name!r} has shape [{', '.join(str(d) for d in v.shape)}]")
    return found


def findings(model: ir.Model) -> list[str]:
    """What an NPU compiler cannot take as a static integer graph (see the module doc)."""
    graph = model.graph
    found = [f"static shapes: {what}; NPU compilers take static shapes only: export with "
             "Precision('qdq', dims={...}) or fixed input sizes" for what in _symbolic([*graph.inputs, *graph.outputs])]
    for node in graph:
        if (node.op_type in COMPUTE_OPS and node.domain in STANDARD and not wrapped(node)
                and KEEP_FLOAT not in node.metadata_props):
            floats = [v.name for v in node.inputs if not _from_dq(v)] + [v.name for v in node.outputs if not _to_q(v)]
            found.append(f"{node.op_type} {node.name!r} is not between DequantizeLinear and QuantizeLinear (float "
                         f"{', '.join(map(repr, floats))}): an NPU runs it in float or not at all; export with "
                         "target='qdq'")
    return found


def notes(model: ir.Model) -> list[str]:
    """One line per op type left float in the main graph, and one per node with a body."""
    left: dict[str, list[str]] = {}
    bodies = []
    for node in model.graph:
        if node.op_type in _QDQ:
            continue
        if KEEP_FLOAT in node.metadata_props:
            bodies.append(f"{node.op_type} {node.name!r} left float by the export: {node.metadata_props[KEEP_FLOAT]}")
            continue
        if any(a.type in (ir.AttributeType.GRAPH, ir.AttributeType.GRAPHS) for a in node.attributes.values()):
            bodies.append(f"{node.op_type} {node.name!r}: its body is not rewritten (control flow stays float, and "
                          "NPU compilers take none; max pooling's NaN guard is an If: to_onnx(max_pool_nan_guard=False) "
                          "leaves it out)")
            continue
        touches_float = any(v is not None and v.dtype == F32 for v in (*node.inputs, *node.outputs))
        fused = node.op_type == "Relu" and fused_relu(node.inputs[0]) and _to_q(node.outputs[0])
        if touches_float and not fused and not wrapped(node) and node.op_type not in COMPUTE_OPS:
            left.setdefault(node.op_type, []).append(node.name or "?")
    lines = []
    for op, names in sorted(left.items()):
        why = ("not one of the ops the QDQ form quantizes (it runs in float between DequantizeLinear and "
               "QuantizeLinear: NPU compilers run it on their float path or on the CPU)" if op not in QUANTIZED_OPS else
               "an input or output of it stays float (a constant operand, or a tensor of another type)")
        shown = ", ".join(map(repr, names[:3])) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
        lines.append(f"{op} x{len(names)} left float ({shown}): {why}")
    return lines + bodies


__all__ = ["findings", "notes", "wrapped"]
