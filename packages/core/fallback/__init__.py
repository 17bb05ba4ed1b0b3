"""jax2onnx-core's second way in, used only when ``site-packages/jax2onnx/__init__.py`` is gone.

Why: the published ``jax2onnx`` 0.17 wheel also lists ``jax2onnx/__init__.py`` in its RECORD. pip
upgrading ``jax2onnx`` 0.17 to the 1.x meta package installs jax2onnx-core first (overwriting that
file) and uninstalls 0.17 afterwards, deleting it; so does ``pip uninstall jax2onnx`` with both
installed. Without ``__init__.py`` the folder is a namespace package and ``from jax2onnx import
to_onnx`` fails. ``jax2onnx_core_fallback.pth`` appends this folder's parent to ``sys.path`` (after
site-packages): Python takes a regular package found on a later path entry over a namespace
portion, so this file then becomes ``jax2onnx``. It points ``__path__`` at the real folder and runs
core's ``__init__.py``, shipped beside it as ``_init_body.py``. While the real file exists (every
other time) Python never gets here. See docs/architecture.md "Distributions".
"""

import os as _os

_here = _os.path.dirname(_os.path.abspath(__file__))
__path__ = [_os.path.join(_os.path.dirname(_os.path.dirname(_here)), "jax2onnx")]
_body = _os.path.join(_here, "_init_body.py")
with open(_body, encoding="utf-8") as _f:
    exec(compile(_f.read(), _body, "exec"))  # noqa: S102 - core's own __init__.py, as shipped in its wheel
del _os, _here, _body, _f
