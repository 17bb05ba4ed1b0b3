"""Stage 2, lowering JAX equations to ONNX: the interpreter's walk over the jaxpr, the lowering
context handed to each lowering, the plugin registry and its hooks, core's own plugin
(``onnx_function``), and the thread-safe patching of library functions during an export.

The pack author's API is ``jax2onnx.plugin`` (with ``jax2onnx.fusion`` and
``jax2onnx.dtypes``): the public face of this stage, kept at the top of the package.
"""
