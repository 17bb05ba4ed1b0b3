import numpy as np
import onnx_ir as ir
import pytest
from jax2onnx.passes import DeadCodeEliminationPass, RollSplitPass
from onnx import helper, numpy_helper
from pass_checks import pass_keeps_outputs


class _Graph:
    """A small ONNX graph of rolls written as JAX exports them: Concat(Slice(x, n-s:n), Slice(x, 0:n-s))."""

    def __init__(self, shape, dtype):
        self.shape, self.dtype, self.nodes, self.inits, self.outputs = tuple(shape), np.dtype(dtype), [], [], []

    def _ints(self, values):
        name = f"c{len(self.inits)}"
        self.inits.append(numpy_helper.from_array(np.asarray(values, np.int64), name))
        return name

    def node(self, op, inputs, **attrs):
        out = f"v{len(self.nodes)}"
        self.nodes.append(helper.make_node(op, inputs, [out], **attrs))
        return out

    def slice(self, x, start, end, axis):
        return self.node("Slice", [x, self._ints([start]), self._ints([end]), self._ints([axis])])

    def roll(self, x, shift, axis):
        n = self.shape[axis]
        cut = n - shift % n
        return self.node("Concat", [self.slice(x, cut, n, axis), self.slice(x, 0, cut, axis)], axis=axis)

    def output(self, v):
        self.outputs.append(v)

    def model(self, opset=23):
        elem = helper.np_dtype_to_tensor_dtype(self.dtype)
        outs = [helper.make_tensor_value_info(o, elem, [None] * len(self.shape)) for o in self.outputs]
        graph = helper.make_graph(
            self.nodes, "g", [helper.make_tensor_value_info("x", elem, self.shape)], outs, initializer=self.inits
        )
        return ir.from_proto(helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]))


def _ops(model):
    return [n.op_type for n in model.graph]


def _values(shape, dtype):
    n = int(np.prod(shape))
    if dtype == np.bool_:
        return (np.arange(n) % 3 == 0).reshape(shape)
    return np.arange(n).astype(dtype).reshape(shape)


def _rewrite(build, x):
    """The pass on ``build()``; its outputs are bitwise those of the graph before it and of numpy."""
    model, result, after = pass_keeps_outputs(build, {"x": x}, RollSplitPass(), DeadCodeEliminationPass(), bitwise=True)
    return model, result.modified, after


def _stencil(shape, dtype, opset=23, *, shifts=(1, -1)):
    def build():
        g = _Graph(shape, dtype)
        rolls = [g.roll("x", s, axis) for axis in (-2 % len(shape), len(shape) - 1) for s in shifts]
        for r in rolls:
            g.output(g.node("Identity", [r]))
        return g.model(opset)

    return build


def _split_sizes(model):
    return sorted(
        tuple(n.inputs[1].producer().attributes["value"].value.numpy()) for n in model.graph if n.op_type == "Split"
    )


@pytest.mark.parametrize(
    "dtype", [np.float64, np.float32, np.float16, np.int8, np.int16, np.uint16, np.int64, np.uint64, np.bool_]
)
def test_rolls_of_one_value_along_one_axis_share_a_split(dtype):
    x = _values((2, 5, 4), dtype)
    model, modified, outs = _rewrite(_stencil(x.shape, dtype), x)
    assert modified
    ops = _ops(model)
    assert ops.count("Split") == 2 and ops.count("Concat") == 4 and "Slice" not in ops
    assert _split_sizes(model) == [(1, 2, 1), (1, 3, 1)]  # axis 2 (n=4) and axis 1 (n=5), cut at 1 and n-1
    expected = [np.roll(x, s, axis=a) for a in (1, 2) for s in (1, -1)]
    for got, want in zip(outs, expected, strict=True):
        np.testing.assert_array_equal(got, want)


def test_many_shifts_cut_one_split():
    x = _values((7, 3), np.float32)
    shifts = (1, 2, 3, 4, 5, 6, -1, 9)
    model, modified, outs = _rewrite(_stencil(x.shape, np.float32, shifts=shifts), x)
    assert modified
    # axis 0 (n=7): cuts at 7 - s for s in 1..6 (-1 = 6, 9 = 2): every row its own piece;
    # axis 1 (n=3): shifts 1, 2 (4, 5, -1 = 2) cut at 2 and 1; 3, 6, 9 are full turns (no roll)
    assert _split_sizes(model) == [(1, 1, 1), (1, 1, 1, 1, 1, 1, 1)]
    expected = [np.roll(x, s, axis=a) for a in (0, 1) for s in shifts]
    for got, want in zip(outs, expected, strict=True):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("opset", [17, 23])
def test_one_roll_alone_is_a_split_and_a_concat(opset):
    def build():
        g = _Graph((4, 6), np.float32)
        g.output(g.node("Identity", [g.roll("x", 1, 1)]))
        g.output(g.node("Identity", [g.roll("x", -1, 0)]))  # another axis: its own Split
        return g.model(opset)

    x = _values((4, 6), np.float32)
    model, modified, outs = _rewrite(build, x)
    assert modified and _ops(model).count("Split") == 2 and "Slice" not in _ops(model)
    np.testing.assert_array_equal(outs[0], np.roll(x, 1, axis=1))
    np.testing.assert_array_equal(outs[1], np.roll(x, -1, axis=0))


def test_a_roll_that_is_a_graph_output_keeps_its_name():
    def build():
        g = _Graph((3, 5), np.float32)
        g.output(g.roll("x", 1, 1))
        g.output(g.node("Identity", [g.roll("x", -1, 1)]))
        return g.model()

    x = _values((3, 5), np.float32)
    model, modified, outs = _rewrite(build, x)
    assert modified and "Slice" not in _ops(model)
    assert model.graph.outputs[0].producer().op_type == "Concat"
    np.testing.assert_array_equal(outs[0], np.roll(x, 1, axis=1))


def test_slices_read_elsewhere_stay():
    def build():
        g = _Graph((3, 5), np.float32)
        head = g.slice("x", 4, 5, 1)
        g.output(g.node("Concat", [head, g.slice("x", 0, 4, 1)], axis=1))
        g.output(g.node("Identity", [head]))
        return g.model()

    model, modified, _ = _rewrite(build, _values((3, 5), np.float32))
    assert modified and _ops(model).count("Slice") == 1


def test_concats_that_are_not_rolls_stay():
    def build():
        g = _Graph((3, 6), np.float32)
        # a partial range (end 5 of 6) and a repeat of one slice look like rolls but are not
        partial = g.node("Concat", [g.slice("x", 4, 5, 1), g.slice("x", 0, 4, 1)], axis=1)
        head = g.slice("x", 0, 3, 1)
        repeat = g.node("Concat", [head, head], axis=1)
        other = g.node("Identity", ["x"])  # the same values, another tensor
        across = g.node("Concat", [g.slice("x", 2, 3, 0), g.slice(other, 0, 2, 0)], axis=0)
        for v in (partial, repeat, across):
            g.output(g.node("Identity", [v]))
        return g.model()

    model, modified, _ = _rewrite(build, _values((3, 6), np.float32))
    assert not modified and _ops(model).count("Concat") == 3
