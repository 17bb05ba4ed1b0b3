"""The pack's testcases: each public module here may define ``components`` (a list of
``jax2onnx.testing.Component``). ``PackModules`` finds them by this package's name, ``testcases``,
and imports them only for the ``jax2onnx_components`` hook (the pytest plugin, the coverage
command), so exporting a model never imports test code. Name a module after the lowering module
it tests; helpers shared by several go in a module whose name starts with ``_``."""
