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

from ...passes.rules import Rule, RuleFamily, miss, no_match

_INTEGERS = frozenset({ir.DataType.INT8, ir.DataType.INT16, ir.DataType.INT32, ir.DataType.INT64,
                       ir.DataType.UINT8, ir.DataType.UINT16, ir.DataType.UINT32, ir.DataType.UINT64})


def _integer_clip_match(graph, clip: ir.Node):
    if not clip.inputs:
        return no_match("a Clip without inputs")
    x = clip.inputs[0]
    if x is None or x.dtype not in _INTEGERS:
        return no_match("the Clip's input is not an integer tensor (TensorRT's Clip takes floats)")
    if all(bound is None for bound in clip.inputs[1:3]):
        return miss("the Clip has no bounds: the identity, left to the identity passes")
    return x


def _integer_clip(graph, clip: ir.Node, x: ir.Value) -> None:
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
    graph.insert_before(clip, nodes)
    name = out.name
    last = nodes[-1].outputs[0]
    for i, v in enumerate(graph.outputs):
        if v is out:
            graph.outputs[i] = last
    ir.convenience.replace_all_uses_with(out, last)
    out.name = None
    last.name = name


_NARROW = (ir.DataType.UINT8, ir.DataType.INT8, ir.DataType.INT16, ir.DataType.UINT16)


def _flag_cast_match(graph, cast: ir.Node):
    out = cast.outputs[0]
    if cast.inputs[0] is None or cast.inputs[0].dtype != ir.DataType.BOOL or out.dtype not in _NARROW:
        return no_match("not a Cast of a bool to a narrow integer")
    if out in graph.outputs:
        return miss("the cast value is a graph output")
    if not out.uses() or any(user.op_type not in ("ArgMax", "ArgMin") for user, _ in out.uses()):
        return miss("the cast value is read by other ops than ArgMax/ArgMin")
    return out


def _flag_cast_int32(graph, cast: ir.Node, out: ir.Value) -> list[ir.Node]:
    cast.attributes["to"] = ir.AttrInt64("to", ir.DataType.INT32.value)
    out.dtype = ir.DataType.INT32
    return [cast]  # changed in place: it records the rule too


def _bool_reduction_match(graph, node: ir.Node):
    x = node.inputs[0]
    if x is None or x.dtype != ir.DataType.BOOL:
        return no_match("the reduction's input is not bool")
    return x


def _bool_reduction(graph, node: ir.Node, x: ir.Value) -> None:
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


class TensorRtForms(RuleFamily):
    name = "tensorrt"
    #: the ops each rule starts from (the narrow cast is read by ArgMax/ArgMin)
    start_ops = frozenset({"Clip", "ArgMax", "ArgMin", "ReduceMax", "ReduceMin"})

    def rules(self) -> list[Rule]:
        return [Rule("integer_clip", frozenset({"Clip"}), _integer_clip_match, _integer_clip),
                Rule("flag_cast_int32", frozenset({"Cast"}), _flag_cast_match, _flag_cast_int32),
                Rule("bool_reduction", frozenset({"ReduceMax", "ReduceMin"}), _bool_reduction_match, _bool_reduction)]


__all__ = ["TensorRtForms"]
