"""The pack's testcases, apart from its lowerings: ``<family>.py`` holds the ``components`` of the
lowering module of that name, ``complex_cases`` and ``physics_cases`` span several families, and
``_testdata`` has the input generators they share. Only the ``jax2onnx_components`` hook (the
pytest plugin, the coverage command) imports this package; an export never does."""
