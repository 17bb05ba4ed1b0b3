"""The pack's testcases, apart from its lowerings: ``<family>.py`` holds the ``components`` of the
lowering module of that name, ``_testing`` the model factories and checks they share. Only the
``jax2onnx_components`` hook (the pytest plugin, the coverage command) imports this package; an
export never does."""
