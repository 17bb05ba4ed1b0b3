"""Stage 5, checking an export: run a model in onnxruntime and compare with JAX (compare) and the
``verify``/``ExportReport`` built on it (report). The public names are ``jax2onnx.verify``,
``jax2onnx.allclose``, ``jax2onnx.ExportReport`` and ``jax2onnx.VerificationError``.
"""
