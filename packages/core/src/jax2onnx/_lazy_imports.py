"""Defer heavy transitive imports that a conversion never touches.

onnx_ir imports sympy at module level, for symbolic-dim arithmetic (``onnx_ir._symbolic_shapes``)
that jax2onnx never uses: our dims are plain strings computed by JAX. sympy costs 1-2 s, more
than JAX itself. Both modules are registered as stand-ins that import the real module on first
attribute access, so whoever really uses them still gets the real thing. (The stdlib LazyLoader
does not help here: ``import sympy`` inside onnx_ir reads ``__spec__``, which loads it.) Any
surprise (a renamed module, sympy already imported) leaves the normal eager import in place.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import types
from typing import Any


class _Deferred(types.ModuleType):
    """Stands in for module ``name`` until an attribute is read, then imports and forwards."""

    def __init__(self, name: str, spec: Any):
        super().__init__(name)
        self.__spec__ = spec
        self.__dict__["_jax2onnx_real"] = None

    def __getattr__(self, attr: str) -> Any:
        real = self.__dict__["_jax2onnx_real"]
        if real is None:
            name = self.__name__
            if sys.modules.get(name) is self:
                del sys.modules[name]
            real = importlib.import_module(name)
            self.__dict__["_jax2onnx_real"] = real
        return getattr(real, attr)


def defer_sympy_for_onnx_ir() -> None:
    if "onnx_ir" in sys.modules or "sympy" in sys.modules:
        return
    try:
        sympy_spec = importlib.util.find_spec("sympy")
        onnx_ir_spec = importlib.util.find_spec("onnx_ir")  # locates the package without executing it
        if sympy_spec is None or onnx_ir_spec is None:
            return
        sys.modules["sympy"] = _Deferred("sympy", sympy_spec)
        # Only an onnx_ir that has the module (not 0.1.x, core's floor): a stand-in for a module
        # that does not exist turns every later lookup of it into a ModuleNotFoundError.
        folders = onnx_ir_spec.submodule_search_locations or []
        if any(os.path.exists(os.path.join(folder, "_symbolic_shapes.py")) for folder in folders):
            sys.modules["onnx_ir._symbolic_shapes"] = _Deferred("onnx_ir._symbolic_shapes", None)
    except Exception:  # noqa: BLE001 - an optimisation must never break the import
        return


defer_sympy_for_onnx_ir()
