import numpy as np
import onnx_ir as ir
from jax2onnx.fusion.nan_free import NAN_GUARD_KEY
from jax2onnx.passes import MaxPoolGuardLayoutPass
from pass_checks import pass_keeps_outputs

NHWC_TO_NCHW = [0, 3, 1, 2]
NCHW_TO_NHWC = [0, 2, 3, 1]
FLOAT = ir.DataType.FLOAT
POOL = [ir.AttrInt64s("kernel_shape", [2, 2]), ir.AttrInt64s("strides", [2, 2])]


def _node(op, inputs, *attrs):
    return ir.Node("", op, inputs, attributes=list(attrs), num_outputs=1)


def _const(value):
    return _node("Constant", [], ir.AttrTensor("value", ir.tensor(np.array(value, np.float32))))


def _guarded_pool(t):
    """jax2onnx.fusion.max_pool's form: MaxPool, then If(IsNaN(ReduceSum(t)), exact, plain)."""
    pool = _node("MaxPool", [t], *POOL)
    y = pool.outputs[0]
    nan_mask = _node("IsNaN", [t])
    mask = _node("Cast", [nan_mask.outputs[0]], ir.AttrInt64("to", int(FLOAT)))
    pooled = _node("MaxPool", [mask.outputs[0]], *POOL)
    zero, nan = _const(0.0), _const(np.nan)
    hit = _node("Greater", [pooled.outputs[0], zero.outputs[0]])
    picked = _node("Where", [hit.outputs[0], nan.outputs[0], y])
    exact = ir.Graph([], [picked.outputs[0]], nodes=[nan_mask, mask, pooled, zero, nan, hit, picked], name="exact",
                     opset_imports={"": 23})
    keep = _node("Identity", [y])
    plain = ir.Graph([], [keep.outputs[0]], nodes=[keep], name="plain", opset_imports={"": 23})
    total = _node("ReduceSum", [t], ir.AttrInt64("keepdims", 0))
    check = _node("IsNaN", [total.outputs[0]])
    guard = _node("If", [check.outputs[0]], ir.AttrGraph("then_branch", exact), ir.AttrGraph("else_branch", plain))
    guard.metadata_props[NAN_GUARD_KEY] = "max_pool"  # as the lowering stamps it
    for i, n in enumerate([pool, nan_mask, mask, pooled, zero, nan, hit, picked, keep, total, check, guard]):
        n.outputs[0].name = f"v{i}"
    return [pool, total, check, guard]


def _x():
    return ir.Value(name="x", type=ir.TensorType(FLOAT), shape=ir.Shape([2, 4, 4, 3]))


def _lone_pool():
    x = _x()
    t_in = _node("Transpose", [x], ir.AttrInt64s("perm", NHWC_TO_NCHW))
    t_in.outputs[0].name = "t"
    nodes = _guarded_pool(t_in.outputs[0])
    t_out = _node("Transpose", [nodes[-1].outputs[0]], ir.AttrInt64s("perm", NCHW_TO_NHWC))
    t_out.outputs[0].name = "out"
    return ir.Model(ir.Graph([x], [t_out.outputs[0]], nodes=[t_in, *nodes, t_out], opset_imports={"": 23}), ir_version=10)


def _values(with_nan):
    x = np.random.default_rng(0).standard_normal((2, 4, 4, 3)).astype(np.float32)
    if with_nan:
        x[0, 0, 0, 0] = np.nan  # first in its window: onnxruntime's MaxPool alone drops it
        x[1, 3, 3, 2] = np.nan
    return {"x": x}


def test_a_lone_pools_guard_moves_past_its_transposes():
    for with_nan in (False, True):
        model, result, outputs = pass_keeps_outputs(_lone_pool, _values(with_nan), MaxPoolGuardLayoutPass(), check=False)
        assert result.modified
        assert np.isnan(outputs[0]).any() == with_nan
    live = [n for n in model.graph if n.outputs[0].uses() or n.outputs[0] in model.graph.outputs]
    pool = next(n for n in live if n.op_type == "MaxPool")
    assert [u.op_type for u, _ in pool.outputs[0].uses()] == ["Transpose"]  # nothing between the Transposes
    total = next(n for n in live if n.op_type == "ReduceSum")
    assert total.inputs[0] is model.graph.inputs[0]  # the check sums x itself
    assert model.graph.outputs[0].producer().op_type == "If" and model.graph.outputs[0].name == "out"
    assert not MaxPoolGuardLayoutPass()(model).modified


def test_a_guard_between_channels_first_ops_stays():
    def build():
        x = ir.Value(name="x", type=ir.TensorType(FLOAT), shape=ir.Shape([2, 3, 4, 4]))
        nodes = _guarded_pool(x)
        relu = _node("Relu", [nodes[-1].outputs[0]])
        relu.outputs[0].name = "out"
        return ir.Model(ir.Graph([x], [relu.outputs[0]], nodes=[*nodes, relu], opset_imports={"": 23}), ir_version=10)

    feeds = {"x": np.random.default_rng(1).standard_normal((2, 3, 4, 4)).astype(np.float32)}
    _, result, _ = pass_keeps_outputs(build, feeds, MaxPoolGuardLayoutPass(), check=False)
    assert not result.modified
