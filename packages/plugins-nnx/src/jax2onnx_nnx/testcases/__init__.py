"""The pack's testcases, apart from its lowerings: ``<family>.py`` holds the ``components`` of the
lowering module of that name, ``models`` whole models across families, ``helpers`` what they
share. Only the ``jax2onnx_components`` hook (the pytest plugin, the coverage command) imports
this package; an export never does."""
