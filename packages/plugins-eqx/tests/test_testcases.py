"""Every testcase of this pack, in every variant, exported and compared with JAX in onnxruntime."""

from jax2onnx.testing import run_variant

JAX2ONNX_PACKS = ["jax2onnx-eqx"]


def test_testcase(jax2onnx_variant):
    run_variant(jax2onnx_variant)
