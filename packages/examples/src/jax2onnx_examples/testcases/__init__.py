"""The example models and their testcases (``components``), one module per example family;
``vit_models`` and ``_common`` hold models and initialisers several families share, ``helpers``
the graph checks. The pack lowers nothing, so an export never imports this package; only the
``jax2onnx_components`` hook (the pytest plugin, the coverage command) does."""
