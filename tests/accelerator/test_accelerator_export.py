"""Exports of parameters that live on a TPU or GPU (issue #34): the ONNX model, run by onnxruntime
on the CPU, computes what JAX computes on the accelerator at highest matmul precision."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import onnx
from accelerator_models import (
    BACKEND,
    TRANSFORMER_SPECS,
    assert_float32_close,
    assert_on_the_accelerator,
    at_highest,
    normal,
    platforms_of,
    requires_accelerator,
    transformer,
)
from jax2onnx import to_onnx
from jax2onnx.verification.compare import run_onnx

pytestmark = requires_accelerator


def test_transformer_on_the_accelerator_exports_with_external_data_and_matches_jax(tmp_path):
    model = transformer()
    assert_on_the_accelerator(model)
    path = to_onnx(model, TRANSFORMER_SPECS, return_mode="file", output_path=str(tmp_path / "t.onnx"),
                   external_data=True)
    onnx.checker.check_model(path, full_check=True)
    x = normal((3, 16, 64))
    want = at_highest(model, x)
    got = run_onnx(path, [x])[0]
    assert_float32_close(got, want)
    assert_on_the_accelerator(model)  # the export left the parameters where they were


def test_a_jitted_function_closing_over_device_arrays():
    w = jax.device_put(normal((8, 8), seed=1))
    assert platforms_of(w) == {BACKEND}
    fn = jax.jit(lambda x: jnp.tanh(x @ w) @ w.T)
    model = to_onnx(fn, [("B", 8)], verify=True)
    x = normal((5, 8), seed=2)
    assert_float32_close(run_onnx(model, [x])[0], at_highest(fn, x))
