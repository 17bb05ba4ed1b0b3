"""The pack's testcases, apart from its lowerings: ``<family>.py`` holds the ``components`` of the
lowering module of that name (``attention``: ``jax.nn.dot_product_attention``), ``helpers`` the
checks they share. Only the ``jax2onnx_components`` hook (the pytest plugin, the coverage command)
imports this package; an export never does."""
