import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort
import pytest
from jax2onnx.passes import DeadCodeEliminationPass, SharedWrapPadPass
from onnx import helper, numpy_helper


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


def _run(model, x):
    proto = ir.to_proto(model)
    onnx.checker.check_model(proto, full_check=True)
    return ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})


def _ops(model):
    return [n.op_type for n in model.graph]


def _values(shape, dtype):
    n = int(np.prod(shape))
    if dtype == np.bool_:
        return (np.arange(n) % 3 == 0).reshape(shape)
    return np.arange(n).astype(dtype).reshape(shape)


def _rewrite(build, x):
    """The pass on ``build()``; its outputs are bitwise those of the graph before it and of numpy."""
    before = _run(build(), x)
    model = build()
    result = SharedWrapPadPass()(model)
    DeadCodeEliminationPass()(model)
    after = _run(model, x)
    for a, b in zip(before, after, strict=True):
        assert a.dtype == b.dtype and a.shape == b.shape
        assert a.tobytes() == b.tobytes()
    return model, result.modified, after


def _stencil(shape, dtype, opset=23, *, shifts=(1, -1)):
    def build():
        g = _Graph(shape, dtype)
        rolls = [g.roll("x", s, axis) for axis in (-2 % len(shape), len(shape) - 1) for s in shifts]
        for r in rolls:
            g.output(g.node("Identity", [r]))
        return g.model(opset)

    return build


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16, np.int8, np.int64, np.uint64, np.bool_])
def test_rolls_of_one_value_along_one_axis_share_a_pad(dtype):
    x = _values((2, 5, 4), dtype)
    model, modified, outs = _rewrite(_stencil(x.shape, dtype), x)
    assert modified
    assert _ops(model).count("Pad") == 2 and "Concat" not in _ops(model)
    assert _ops(model).count("Slice") == 4  # one per roll
    expected = [np.roll(x, s, axis=a) for a in (1, 2) for s in (1, -1)]
    for got, want in zip(outs, expected, strict=True):
        np.testing.assert_array_equal(got, want)
    pads = [n for n in model.graph if n.op_type == "Pad"]
    assert all(n.attributes["mode"].value == "wrap" for n in pads)


def test_each_shift_is_taken_from_its_narrower_side():
    x = _values((7, 3), np.float32)
    shifts = (1, 2, 3, 4, 5, 6, -1, 9)
    model, modified, outs = _rewrite(_stencil(x.shape, np.float32, shifts=shifts), x)
    assert modified
    pads = [n for n in model.graph if n.op_type == "Pad"]
    widths = sorted(tuple(n.inputs[1].producer().attributes["value"].value.numpy()) for n in pads)
    # axis 0 (n=7): 1, 2, 3 before (3); 4, 5, 6, -1 = 6, 9 = 2 after (n - s: 3, 2, 1) -> (3, 3)
    # axis 1 (n=3): 1, 4 = 1, -1 = 2, 9 = 0 (no roll) -> 1 before; 2, 5 = 2 after (1) -> (1, 1)
    assert widths == [(1, 1), (3, 3)]
    expected = [np.roll(x, s, axis=a) for a in (0, 1) for s in shifts]
    for got, want in zip(outs, expected, strict=True):
        np.testing.assert_array_equal(got, want)


def test_one_roll_alone_stays():
    def build():
        g = _Graph((4, 6), np.float32)
        g.output(g.node("Identity", [g.roll("x", 1, 1)]))
        g.output(g.node("Identity", [g.roll("x", -1, 0)]))  # another axis: its own group of one
        return g.model()

    model, modified, _ = _rewrite(build, _values((4, 6), np.float32))
    assert not modified and "Pad" not in _ops(model)


@pytest.mark.parametrize("why", ["opset 18", "int16 (no Pad kernel)", "graph output"])
def test_rolls_stay_where_pad_cannot_serve(why):
    dtype = np.int16 if why.startswith("int16") else np.float32
    opset = 18 if why == "opset 18" else 23

    def build():
        g = _Graph((3, 5), dtype)
        a, b = g.roll("x", 1, 1), g.roll("x", -1, 1)
        if why == "graph output":
            g.output(a)
            g.output(g.node("Identity", [b]))
        else:
            g.output(g.node("Identity", [a]))
            g.output(g.node("Identity", [b]))
        return g.model(opset)

    model, modified, _ = _rewrite(build, _values((3, 5), dtype))
    assert not modified and "Pad" not in _ops(model)


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
