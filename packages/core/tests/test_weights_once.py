"""Weights are stored once and copied once: deduplication without hashing, no serialization of
the weights before the final one (shape inference runs with them detached)."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import onnx
import onnx_ir as ir
from jax2onnx import allclose, to_onnx
from jax2onnx.ir.builder import ModelBuilder


def test_pool_dedups_by_buffer_and_by_value_but_not_different_arrays():
    mb = ModelBuilder(opset=23)
    w = np.random.default_rng(0).standard_normal((64, 64)).astype(np.float32)
    a = mb.initializer(w)
    assert mb.initializer(w) is a  # the same buffer
    assert mb.initializer(w.copy()) is a  # an equal copy
    almost = w.copy()
    almost[17, 3] += 1.0  # differs in one element the sampled fingerprint may miss
    assert mb.initializer(almost) is not a
    zeros = [mb.initializer(np.zeros(300, np.float32)) for _ in range(3)]
    assert zeros[0] is zeros[1] is zeros[2]
    assert mb.initializer(np.zeros(300, np.float64)) is not zeros[0]  # same bytes count, other dtype
    assert len(mb.initializers) == 4


def test_temporary_constants_never_alias(mini_registry):
    """Fresh small arrays reuse freed addresses; a lookup must not hand back another value."""
    def f(x):
        return x.reshape((x.shape[0] // 2, 6))

    model = to_onnx(f, [("2*B", 3)])
    for b in (1, 4):
        assert allclose(f, model, [np.random.rand(2 * b, 3).astype(np.float32)])


def test_weights_are_serialized_once(mini_registry, monkeypatch):
    w = np.random.default_rng(1).standard_normal((256, 256)).astype(np.float32)  # 256 KiB
    serialized: list[int] = []
    original = ir.Tensor.tobytes

    def counting(self):
        data = original(self)
        if len(data) >= w.nbytes:
            serialized.append(len(data))
        return data

    inferred_sizes: list[int] = []
    infer = onnx.shape_inference.infer_shapes

    def recording_infer(proto, *args, **kwargs):
        inferred_sizes.append(proto.ByteSize())
        return infer(proto, *args, **kwargs)

    monkeypatch.setattr(ir.Tensor, "tobytes", counting)
    monkeypatch.setattr(onnx.shape_inference, "infer_shapes", recording_infer)
    model = to_onnx(lambda x: jnp.sin(jnp.dot(x, w)), [(2, 256)])
    assert serialized == [w.nbytes], f"the weight was serialized {len(serialized)} times"
    assert inferred_sizes, "shape inference did not run"
    assert max(inferred_sizes) < w.nbytes // 10, f"shape inference saw the weights: {inferred_sizes} bytes"
    assert {vi.name for vi in model.graph.value_info}, "intermediate shapes are missing"
