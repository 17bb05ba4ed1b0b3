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


def _pixels():
    return _op("Cast", _input("pixels", INT), to=int(FLOAT))


TABLE = np.arange(12, dtype=np.float32).reshape(4, 3)


@pytest.mark.parametrize(("make", "expected"), [
    (lambda: _input("x", FLOAT), False),  # a float graph input may hold anything
    (lambda: _input("ids", INT), True),  # integers have no NaN
    (_pixels, True),
    (lambda: _op("Relu", _op("Transpose", _pixels())), True),
    (lambda: _op("Clip", _pixels(), _const(np.float32(0)), _const(np.float32(6))), True),
    (lambda: _op("Max", _pixels(), _const(np.float32(np.nan))), False),  # a NaN constant
    (lambda: _op("Mul", _pixels(), _const(np.float32(np.inf))), False),  # 0 * inf
    (lambda: _op("Sub", _pixels(), _pixels()), False),  # arithmetic: not followed
    (lambda: _op("Gather", _const(TABLE), _input("ids", INT)), True),  # an embedding's rows
    (lambda: _op("Gather", _const(np.where(TABLE == 5, np.nan, TABLE)), _input("ids", INT)), False),
    (lambda: _op("Gather", ir.Value(name="lazy", type=ir.TensorType(FLOAT), shape=ir.Shape([4, 3]),
                                    const_value=ir.LazyTensor(lambda: ir.Tensor(TABLE), dtype=FLOAT,
                                                              shape=ir.Shape([4, 3]))),
                 _input("ids", INT)), False),  # streamed weights are not read for this
    (lambda: _op("Relu", _op("Softsign", _pixels())), False),  # softsign(inf) = inf / inf
], ids=["float-input", "int-input", "cast-int", "relu-transpose", "clip", "nan-constant", "mul-inf", "sub",
        "gather", "gather-nan-table", "gather-lazy-table", "softsign"])
def test_nan_free(make, expected):
    assert is_nan_free(make()) is expected
