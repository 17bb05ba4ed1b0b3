"""jax2onnx.fusion.nan_free: which values provably hold no NaN (a max pool's guard is left out there)."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
import pytest
from jax2onnx.fusion.nan_free import is_nan_free

FLOAT, INT = ir.DataType.FLOAT, ir.DataType.INT32


def _input(name, dtype):
    return ir.Value(name=name, type=ir.TensorType(dtype), shape=ir.Shape([2, 3]))


def _const(array):
    return ir.Value(name="c", type=ir.TensorType(ir.DataType.from_numpy(array.dtype)), shape=ir.Shape(array.shape),
                    const_value=ir.Tensor(array))


def _op(op_type, *inputs, dtype=FLOAT, **attrs):
    node = ir.Node("", op_type, inputs, attributes=[ir.AttrInt64(k, v) for k, v in attrs.items()], num_outputs=1)
    node.outputs[0].type = ir.TensorType(dtype)
    return node.outputs[0]


def _pixels(dtype=INT, to=FLOAT):
    return _op("Cast", _input("pixels", dtype), dtype=to, to=int(to))


def _conv(x, weight):
    node = ir.Node("", "Conv", [x, _const(weight)], num_outputs=1)
    node.outputs[0].type = ir.TensorType(FLOAT)
    return node.outputs[0]


def _batch_norm(x, var):
    ones = np.ones(3, np.float32)
    node = ir.Node("", "BatchNormalization", [x, _const(ones), _const(ones), _const(ones), _const(var)],
                   attributes=[ir.AttrFloat32("epsilon", 1e-5)], num_outputs=1)
    node.outputs[0].type = ir.TensorType(FLOAT)
    return node.outputs[0]


KERNEL = np.full((3, 2, 3, 3), 0.5, np.float32)


TABLE = np.arange(12, dtype=np.float32).reshape(4, 3)


@pytest.mark.parametrize(("make", "expected"), [
    (lambda: _input("x", FLOAT), False),  # a float graph input may hold anything
    (lambda: _input("ids", INT), True),  # integers have no NaN
    (_pixels, True),
    (lambda: _op("Relu", _op("Transpose", _pixels())), True),
    (lambda: _op("Clip", _pixels(), _const(np.float32(0)), _const(np.float32(6))), True),
    (lambda: _op("Max", _pixels(), _const(np.float32(np.nan))), False),  # a NaN constant
    (lambda: _op("Mul", _pixels(), _const(np.float32(np.inf))), False),  # 0 * inf
    (lambda: _op("Sub", _op("Exp", _pixels()), _op("Exp", _pixels())), False),  # exp(2**31) - exp(2**31)
    (lambda: _op("Gather", _const(TABLE), _input("ids", INT)), True),  # an embedding's rows
    (lambda: _op("Gather", _const(np.where(TABLE == 5, np.nan, TABLE)), _input("ids", INT)), False),
    (lambda: _op("Gather", ir.Value(name="lazy", type=ir.TensorType(FLOAT), shape=ir.Shape([4, 3]),
                                    const_value=ir.LazyTensor(lambda: ir.Tensor(TABLE), dtype=FLOAT,
                                                              shape=ir.Shape([4, 3]))),
                 _input("ids", INT)), False),  # streamed weights are not read for this
    (lambda: _op("Relu", _op("Softsign", _pixels())), False),  # softsign(inf) = inf / inf
    # bounded arithmetic: finite, hence NaN-free
    (lambda: _op("Sub", _op("Div", _pixels(), _const(np.float32(255))), _const(np.float32(0.5))), True),
    (lambda: _op("Relu", _batch_norm(_conv(_pixels(), KERNEL), np.ones(3, np.float32))), True),
    (lambda: _op("Softmax", _op("Mul", _pixels(), _const(np.float32(3)))), True),
    # unbounded: may overflow to inf, and inf - inf is NaN
    (lambda: _op("Sub", _op("Mul", _pixels(), _const(np.float32(1e30))), _pixels()), False),
    (lambda: _op("Div", _pixels(), _const(np.array([1, 0, 2], np.float32))), False),  # x / 0
    (lambda: _pixels(to=ir.DataType.FLOAT16), True),  # moves: int32 past 65504 is inf, not NaN
    (lambda: _op("Sub", _pixels(to=ir.DataType.FLOAT16), _pixels(to=ir.DataType.FLOAT16), dtype=ir.DataType.FLOAT16),
     False),  # inf - inf
    (lambda: _op("Softmax", _op("Mul", _pixels(), _const(np.float32(np.inf)))), False),
    (lambda: _batch_norm(_conv(_pixels(), KERNEL), np.array([1, -2, 1], np.float32)), False),  # var + eps < 0
    (lambda: _conv(_input("x", FLOAT), KERNEL), False),
], ids=["float-input", "int-input", "cast-int", "relu-transpose", "clip", "nan-constant", "mul-inf", "sub",
        "gather", "gather-nan-table", "gather-lazy-table", "softsign", "scaled", "conv-batchnorm", "softmax-bounded",
        "overflow", "div-by-zero", "cast-float16", "float16-overflow", "softmax-inf", "negative-variance",
        "conv-of-float-input"])
def test_nan_free(make, expected):
    assert is_nan_free(make()) is expected
