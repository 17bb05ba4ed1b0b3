"""Stage 5, checking an export: run a model in onnxruntime and compare with JAX (compare), the
``verify``/``ExportReport`` built on it (report), where and at which matmul precision the JAX side
runs (reference; ``jax2onnx.Verify``, options), and 0.17's ``allclose`` /
``allclose_onnxruntime_web`` (allclose_compat). The public names are ``jax2onnx.verify``,
``jax2onnx.allclose``, ``jax2onnx.allclose_onnxruntime_web``, ``jax2onnx.ExportReport`` and
``jax2onnx.VerificationError``.
"""
