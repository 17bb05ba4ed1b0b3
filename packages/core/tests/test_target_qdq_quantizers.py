"""target="qdq"'s weight and activation quantizers (jax2onnx.targets.qdq.transform) against their
definitions, in numpy, with core alone: dequantized codes within half a step of the weights, the
layouts blocked DequantizeLinear reads (both orientations of a Gemm weight), zero exactly
representable in every activation range (which the
rounded zero point shifts by at most half a step). The exports using them are tested in
packages/plugins-nnx/tests/test_target_qdq.py."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from jax2onnx import PrecisionError, to_onnx
from jax2onnx.targets.qdq.transform import activation_params, int4_blocked, per_channel


@pytest.mark.parametrize("kind", ["int8", "uint8"])
@pytest.mark.parametrize("axis", [0, 1])
def test_per_channel_codes_dequantize_within_half_a_step(kind, axis):
    w = np.random.default_rng(0).standard_normal((6, 5, 3)).astype(np.float32)
    w[2] = np.abs(w[2])  # an all-positive channel: the uint8 zero point sits at its bottom
    codes, scale, zp = per_channel(w, axis, kind)
    assert codes.dtype == np.dtype(kind) and scale.shape == zp.shape == (w.shape[axis],)
    shape = [1] * w.ndim
    shape[axis] = w.shape[axis]
    back = (codes.astype(np.float32) - zp.reshape(shape)) * scale.reshape(shape)
    assert np.all(np.abs(back - w) <= scale.reshape(shape) / 2 + 1e-7)
    if kind == "int8":
        assert np.all(zp == 0) and codes.min() >= -127


@pytest.mark.parametrize("axis", [0, 1])
def test_int4_blocks_along_k_in_blocked_dequantize_layout(axis):
    K, N, block = 40, 3, 16  # K not a multiple of the block: the last block is short
    w = np.random.default_rng(1).standard_normal((K, N)).astype(np.float32)
    stored = w if axis == 0 else w.T
    codes, scale = int4_blocked(stored, axis, block)
    assert codes.dtype == ml_dtypes.int4 and codes.shape == stored.shape
    assert scale.shape == ((3, N) if axis == 0 else (N, 3))  # ceil(40 / 16) blocks along K
    widened = np.repeat(scale, block, axis=axis).take(range(K), axis=axis)
    back = codes.astype(np.float32) * widened
    assert np.all(np.abs(back - stored) <= widened / 2 + 1e-7)
    assert np.abs(codes.astype(np.int8)).max() == 7


@pytest.mark.parametrize(("low", "high"), [(-3.0, 5.0), (0.5, 2.0), (-4.0, -1.0), (0.0, 0.0)])
def test_activation_ranges_hold_zero_exactly(low, high):
    for qmax in (255, 65535):
        scale, zp = activation_params(low, high, qmax)
        assert 0 <= zp <= qmax and scale > 0
        # zero is code zp exactly; rounding the zero point moves the range by at most half a step
        assert min(low, 0.0) >= -zp * scale - scale / 2 - 1e-6
        assert max(high, 0.0) <= (qmax - zp) * scale + scale / 2 + 1e-6


def test_dims_naming_no_input_axis_is_one_clear_line(mini_registry):
    from jax2onnx import Precision

    with pytest.raises(PrecisionError, match="dims names 'T', which no input axis is.*'B'") as info:
        to_onnx(lambda x: x + 1.0, [("B", 3)], target="qdq", precision=Precision("qdq", dims={"B": 2, "T": 4}))
    assert "\n" not in str(info.value)
