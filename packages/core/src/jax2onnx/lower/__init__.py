"""Stage 2, lowering JAX equations to ONNX: the interpreter's walk over the jaxpr, the lowering
context handed to each lowering, the plugin registry and its hooks, core's own plugin
(``onnx_function``), library functions found in the trace (``library``) and the overrides scoped to
the exported instances (``scoped``): an export replaces no library attribute.

The pack author's API is ``jax2onnx.plugin`` (with ``jax2onnx.fusion`` and
``jax2onnx.dtypes``): the public face of this stage, kept at the top of the package.
"""
