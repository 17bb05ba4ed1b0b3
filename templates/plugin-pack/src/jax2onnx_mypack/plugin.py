"""The pack's entry point (pyproject.toml: ``[project.entry-points.jax2onnx]``).

One object implements core's hooks from the listed modules: each may define ``lowerings``,
``patches`` and ``callable_adapters``. The testcases (``components``) are in the ``testcases``
subpackage, found by name and imported only when tests ask for them. ``plugin_api`` is the jax2onnx
plugin API this pack was written for; a core with an incompatible API skips the pack with a
warning that says what to upgrade, instead of failing later inside a lowering.
"""

from jax2onnx.plugin import PackModules

plugin = PackModules("jax2onnx_mypack", ["softclip", "mish"], plugin_api="1.0")
