"""Stage 5, checking an export: run a model in onnxruntime and compare with JAX (compare), the
``verify``/``ExportReport`` built on it (report), and where and at which matmul precision the JAX
side runs (reference; ``jax2onnx.Verify``, options). The public names are ``jax2onnx.verify``,
``jax2onnx.Verify``, ``jax2onnx.ExportReport`` and ``jax2onnx.VerificationError``; 0.17's
``allclose`` / ``allclose_onnxruntime_web`` are export's (``export/allclose_compat.py``, beside the
0.17 option layer).

This folder imports nothing of ``export/``: the export runs verification as its last stage, so
verification sits below it and checks any model, however it was made.
"""
