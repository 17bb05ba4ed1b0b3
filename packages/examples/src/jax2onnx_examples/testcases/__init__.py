"""Test-only code of the pack: the helpers its testcases share (``cases.helpers``: ``check``
callables taking ``(model, variant)``). The example models and their testcases stay together in
the modules named in ``plugin.py``."""
