"""``target="tensorrt"``: exact rewrites into forms TensorRT 10's ONNX parser takes, where the
generic graph uses an op on an element type the parser's table (``ir/tensorrt_ops.json``) does not
list for it. What cannot be rewritten exactly stays and is named by the lint
(:mod:`.tensorrt`), which ends every ``target="tensorrt"`` export.

Integer index and shape tensors (Gather indices, Slice starts/ends/axes/steps, Reshape/Expand/Tile
shapes, Range, Loop trip counts) stay int64: TensorRT 10's table lists INT64 for every one of those
ops (INT64 became native in TensorRT 10; up to 9.x the parser cast INT64 down to INT32 itself), so
a Cast to int32 would only add nodes.

Rules:
- ``integer_clip``: ``Clip`` of an integer tensor (``jnp.clip`` / ``lax.clamp`` on ints; the
  parser's Clip is float-only) → ``Max``/``Min`` with the same bounds, which TensorRT lists for
  INT32 and INT64: exact;
- ``flag_cast_int32``: a bool cast to a narrow integer (uint8, int8, int16, uint16) read only by
  ArgMax/ArgMin (``jnp.argmax``'s NaN lookup) → the cast to int32, a type both list: the indices
  found are the same;
- ``bool_reduction``: ReduceMax/ReduceMin of a bool tensor (any/all) → over it cast to int32, cast
  back to bool: TensorRT's reductions take no bool.
"""

from __future__ import annotations

import onnx_ir as ir

from ..manager import all_graphs, rewrite_nodes

_INTEGERS = frozenset({ir.DataType.INT8, ir.DataType.INT16, ir.DataType.INT32, ir.DataType.INT64,
                       ir.DataType.UINT8, ir.DataType.UINT16, ir.DataType.UINT32, ir.DataType.UINT64})


def _integer_clip(graph, clip: ir.Node) -> bool:
    if clip.op_type != "Clip" or clip.domain not in ("", "ai.onnx") or not clip.inputs:
        return False
    x = clip.inputs[0]
    if x is None or x.dtype not in _INTEGERS:
        return False
    out = clip.outputs[0]
    value = x
    nodes = []
    bounds = list(clip.inputs[1:3]) + [None] * (3 - len(clip.inputs))
    for op, bound in (("Max", bounds[0]), ("Min", bounds[1])):  # Clip is min(max(x, lo), hi)
        if bound is None:
            continue
        node = ir.Node("", op, [value, bound], name=f"{clip.name or 'clip'}_{op.lower()}")
        node.outputs[0].type, node.outputs[0].shape = out.type, out.shape
        nodes.append(node)
        value = node.outputs[0]
    if not nodes:  # Clip without bounds is the identity; leave it to the identity passes
        return False
    graph.insert_before(clip, nodes)
    name = out.name
    last = nodes[-1].outputs[0]
    for i, v in enumerate(graph.outputs):
        if v is out:
            graph.outputs[i] = last
    ir.convenience.replace_all_uses_with(out, last)
    out.name = None
    last.name = name
    return True


def _flag_cast_int32(graph, cast: ir.Node) -> bool:
    if cast.op_type != "Cast" or cast.domain not in ("", "ai.onnx") or cast.inputs[0] is None:
        return False
    out = cast.outputs[0]
    narrow = (ir.DataType.UINT8, ir.DataType.INT8, ir.DataType.INT16, ir.DataType.UINT16)
    if cast.inputs[0].dtype != ir.DataType.BOOL or out.dtype not in narrow or out in graph.outputs:
        return False
    if not out.uses() or any(user.op_type not in ("ArgMax", "ArgMin") for user, _ in out.uses()):
        return False
    cast.attributes["to"] = ir.AttrInt64("to", ir.DataType.INT32.value)
    out.dtype = ir.DataType.INT32
    return True


def _bool_reduction(graph, node: ir.Node) -> bool:
    if node.op_type not in ("ReduceMax", "ReduceMin") or node.domain not in ("", "ai.onnx"):
        return False
    x = node.inputs[0]
    if x is None or x.dtype != ir.DataType.BOOL:
        return False
    to_int = ir.Node("", "Cast", [x], [ir.AttrInt64("to", ir.DataType.INT32.value)], name=f"{node.name}_to_int32")
    to_int.outputs[0].name = f"{x.name}_int32"
    to_int.outputs[0].dtype, to_int.outputs[0].shape = ir.DataType.INT32, x.shape
    graph.insert_before(node, to_int)
    node.replace_input_with(0, to_int.outputs[0])
    out = node.outputs[0]
    reduced = ir.Value(name=f"{out.name}_int32", type=ir.TensorType(ir.DataType.INT32), shape=out.shape)
    back = ir.Node("", "Cast", [reduced], [ir.AttrInt64("to", ir.DataType.BOOL.value)], name=f"{node.name}_to_bool")
    graph.insert_after(node, back)
    name = out.name
    for i, v in enumerate(graph.outputs):
        if v is out:
            graph.outputs[i] = back.outputs[0]
    ir.convenience.replace_all_uses_with(out, back.outputs[0])
    # the reduction now writes the int32 value; its old bool output goes
    new_node = ir.Node("", node.op_type, list(node.inputs), list(node.attributes.values()), outputs=[reduced],
                       name=node.name)
    graph.insert_before(back, new_node)
    graph.remove(node, safe=True)
    back.outputs[0].name, back.outputs[0].dtype, back.outputs[0].shape = name, ir.DataType.BOOL, reduced.shape
    return True


class TensorRtForms:
    name = "tensorrt"
    #: the ops each rule starts from (the narrow cast is read by ArgMax/ArgMin)
    start_ops = frozenset({"Clip", "ArgMax", "ArgMin", "ReduceMax", "ReduceMin"})

    def apply(self, model: ir.Model, counts: dict[str, int]) -> bool:
        modified = False
        for rule in (_integer_clip, _flag_cast_int32, _bool_reduction):
            modified = rewrite_nodes(list(all_graphs(model)), rule, counts, rule.__name__.lstrip("_")) or modified
        return modified


__all__ = ["TensorRtForms"]
