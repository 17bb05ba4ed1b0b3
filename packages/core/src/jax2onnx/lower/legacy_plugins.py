"""0.17's plugin API (``jax2onnx.plugins.plugin_system``) as an adapter onto the lowering API.

A plugin written for the published jax2onnx 0.17::

    from jax2onnx.plugins.plugin_system import PrimitiveLeafPlugin, register_primitive

    @register_primitive(jaxpr_primitive="my_prim")
    class MyPlugin(PrimitiveLeafPlugin):
        def lower(self, ctx, eqn):
            x = ctx.get_value_for_var(eqn.invars[0])
            out = ctx.get_value_for_var(eqn.outvars[0])
            y = ctx.builder.Sin(x, _outputs=[out.name])
            ctx.bind_value_for_var(eqn.outvars[0], y)

keeps working: ``register_primitive`` turns it into a :class:`~jax2onnx.plugin.Lowering` for its
primitive (it wins over a pack's lowering of the same primitive, as a registered 0.17 plugin
replaced the built-in one), its ``patch_info`` into a monkey patch for the export's trace only
(:func:`legacy_patched`, with a warning naming the plugin), and binds its ``_PRIM``'s ``abstract_eval``. ``lower`` gets a context with the calls 0.17 plugins used:
``get_value_for_var``, ``bind_value_for_var``, ``fresh_name`` and ``builder.<Op>(..., _outputs=[...])``;
anything else of 0.17's context raises :class:`LegacyPluginError` naming the new API. New code
writes a lowering directly (``Lowerings().register("my_prim")``, docs/guide/plugin-pack.md).

The module is registered as ``jax2onnx.plugins`` and ``jax2onnx.plugins.plugin_system`` in
``sys.modules`` (not shipped at 0.17's paths: see docs/architecture.md "Distributions"); the other
0.17 module paths (``jax2onnx.converter``, ``jax2onnx.plugins.<anything else>``, ...) raise one
line naming the new API and the migration guide.
"""

from __future__ import annotations

import contextlib
import importlib.abc
import itertools
import sys
import threading
import types
import warnings
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from ..errors import Jax2OnnxError
from ..plugin import Lowering

#: Where a 0.17 plugin's author reads what replaced the API.
GUIDE = "docs/guide/migrating-from-0.17.md (plugins: docs/guide/plugin-pack.md)"
NEW_API = "jax2onnx.plugin.Lowerings / Lowering (a lowering is fn(ctx, *inputs) -> values)"
#: Above every pack's priority: a 0.17 plugin registered for a primitive replaces the pack's lowering.
LEGACY_PRIORITY = 1000
#: 0.17 module paths that no longer exist; importing one says what replaced it.
_REMOVED_MODULES = ("jax2onnx.converter", "jax2onnx.user_interface", "jax2onnx._compat", "jax2onnx.utils",
                    "jax2onnx.sandbox", "jax2onnx.ir_utils", "jax2onnx.quickstart")


class LegacyPluginError(Jax2OnnxError, ImportError):
    """A 0.17 plugin uses a part of 0.17's API this adapter does not provide."""


_lock = threading.Lock()
_plugins: dict[str, PrimitiveLeafPlugin] = {}
#: 0.17's registry name, for plugins that look themselves up.
PLUGIN_REGISTRY = _plugins


class PrimitivePlugin:
    """0.17's base class (kept for ``isinstance`` checks in ported code)."""

    def get_patch_params(self) -> list[tuple[Any, str, Callable[..., Any]]]:
        raise NotImplementedError


class PrimitiveLeafPlugin(PrimitivePlugin):
    """0.17's base class of a primitive lowering: subclass it, implement ``lower(ctx, eqn)`` and
    decorate with :func:`register_primitive`."""

    primitive: str = ""
    metadata: Mapping[str, Any] = {}
    patch_info: Callable[[], dict[str, Any]] | None = None

    def lower(self, ctx: Any, eqn: Any) -> None:
        raise NotImplementedError(f"{type(self).__name__} must implement lower(self, ctx, eqn)")

    @classmethod
    def ensure_abstract_eval_bound(cls) -> None:
        prim = getattr(cls, "_PRIM", None)
        abstract_eval = getattr(cls, "abstract_eval", None)
        if prim is not None and callable(abstract_eval) and not getattr(cls, "_ABSTRACT_EVAL_BOUND", False):
            prim.def_abstract_eval(abstract_eval)
            cls._ABSTRACT_EVAL_BOUND = True

    def get_patch_params(self) -> list[tuple[Any, str, Callable[..., Any]]]:
        info = self.patch_info() if callable(self.patch_info) else None
        if not info:
            return []
        return [(t, info.get("target_attribute", "__call__"), info["patch_function"]) for t in info["patch_targets"]]


def register_primitive(**metadata: Any) -> Callable[[type[PrimitiveLeafPlugin]], type[PrimitiveLeafPlugin]]:
    """0.17's decorator: ``@register_primitive(jaxpr_primitive="name", ...)`` on a
    :class:`PrimitiveLeafPlugin` subclass registers its lowering for the next conversions."""
    primitive = metadata.get("jaxpr_primitive", "")

    def decorate(cls: type[PrimitiveLeafPlugin]) -> type[PrimitiveLeafPlugin]:
        if not (isinstance(cls, type) and issubclass(cls, PrimitiveLeafPlugin)):
            raise LegacyPluginError(f"@register_primitive decorates a PrimitiveLeafPlugin subclass, got {cls!r}; "
                                    f"new code: {NEW_API}, see {GUIDE}")
        if not isinstance(primitive, str) or not primitive:
            raise LegacyPluginError(f"@register_primitive on {cls.__name__} needs jaxpr_primitive='<primitive name>'")
        cls.ensure_abstract_eval_bound()
        instance = cls()
        instance.primitive = primitive
        instance.metadata = dict(metadata)
        with _lock:
            _plugins[primitive] = instance
        return cls

    return decorate


def lowerings_with_legacy(lowerings: Mapping[str, Lowering]) -> Mapping[str, Lowering]:
    """``lowerings`` with every registered 0.17 plugin's lowering added (replacing a pack's)."""
    with _lock:
        plugins = dict(_plugins)
    if not plugins:
        return lowerings
    table = dict(lowerings)
    for name, plugin in plugins.items():
        table[name] = Lowering(name, _adapter(plugin), LEGACY_PRIORITY, pack=f"0.17 plugin {type(plugin).__name__}")
    return table


class LegacyPatchWarning(UserWarning):
    """A 0.17 plugin's ``patch_info`` replaced a library attribute while an export traced."""


#: One export at a time applies 0.17 monkey patches: each restores what it found, as 0.17 did.
_PATCH_LOCK = threading.RLock()


def _owner_name(target: Any) -> str:
    module = getattr(target, "__module__", None) if isinstance(target, type) else None
    name = getattr(target, "__qualname__", None) or getattr(target, "__name__", None) or repr(target)
    return f"{module}.{name}" if module and module != name else name


@contextlib.contextmanager
def legacy_patched() -> Iterator[None]:
    """The registered 0.17 plugins' ``patch_info`` applied while the block runs (the export's trace):
    each attribute set to ``patch_function(original)`` and restored when the block ends, however
    it ends. This is the one place an export replaces a library attribute (docs/architecture.md):
    0.17's plugins are monkey patches by design, so for the block's duration every thread sees
    the replacement; each one is named in a :class:`LegacyPatchWarning`. A lowering registered with
    ``Lowerings.register_library`` fuses the same call with nothing replaced."""
    with _lock:
        plugins = list(_plugins.values())
    params = [(type(p).__name__, target, attr, make) for p in plugins for target, attr, make in p.get_patch_params()]
    if not params:
        yield
        return
    with _PATCH_LOCK:
        undo: list[tuple[Any, str, Any]] = []
        try:
            for plugin, target, attr, make in params:
                warnings.warn(
                    f"0.17 plugin {plugin} replaces {_owner_name(target)}.{attr} while this export traces "
                    "(its patch_info; every thread sees the replacement until the export's trace ends). "
                    f"Port it to a lowering: {NEW_API}, Lowerings.register_library for a library "
                    f"function ({GUIDE}).", LegacyPatchWarning, stacklevel=4)
                own = vars(target) if hasattr(target, "__dict__") else {}
                undo.append((target, attr, own.get(attr, _ABSENT)))
                setattr(target, attr, make(getattr(target, attr)))
            yield
        finally:
            for target, attr, before in reversed(undo):
                if before is _ABSENT:
                    delattr(target, attr)  # it was inherited (a class attribute): inherited again
                else:
                    setattr(target, attr, before)


_ABSENT = object()


def _adapter(plugin: PrimitiveLeafPlugin) -> Callable[..., Any]:
    def lower(ctx: Any, *inputs: Any) -> Any:
        legacy = _LegacyContext(ctx, inputs)
        plugin.lower(legacy, ctx.eqn)
        return legacy.results()

    lower.__name__ = f"legacy_{type(plugin).__name__}"
    return lower


class _Builder:
    """``ctx.builder.<Op>(*inputs, _outputs=[names], **attributes)`` of 0.17 onto ``ctx.op``."""

    def __init__(self, ctx: Any):
        self._ctx = ctx

    def __getattr__(self, op_type: str) -> Callable[..., Any]:
        if op_type.startswith("_") or not op_type[:1].isupper():
            raise LegacyPluginError(f"0.17's ctx.builder.{op_type} is not provided by the 0.17 plugin adapter; "
                                    f"write the lowering with {NEW_API} (ctx.op.<Op>, ctx.const), see {GUIDE}")
        emit = getattr(self._ctx.op, op_type)

        def make(*inputs: Any, _outputs: Any = None, **attrs: Any) -> Any:
            names = list(_outputs) if isinstance(_outputs, (list, tuple)) else None
            n = len(names) if names else (_outputs if isinstance(_outputs, int) else 1)
            out = emit(*inputs, _outputs=n, **attrs)
            for value, name in zip(out if isinstance(out, (list, tuple)) else [out], names or ()):
                value.name = name  # the builder renames on clashes when the model is assembled
            return out

        return make


class _LegacyContext:
    """The part of 0.17's lowering context its plugins used, over one equation's inputs."""

    _counter = itertools.count()

    def __init__(self, ctx: Any, inputs: tuple[Any, ...]):
        self._ctx = ctx
        self._inputs = {id(v): value for v, value in zip(ctx.eqn.invars, inputs)}
        self._bound: dict[int, Any] = {}
        self.builder = _Builder(ctx)

    def fresh_name(self, base: str = "v") -> str:
        return f"{base}_{next(self._counter)}"

    def get_value_for_var(self, var: Any, name_hint: str | None = None, prefer_np_dtype: Any = None) -> Any:
        if id(var) in self._inputs:
            return self._inputs[id(var)]
        if id(var) in self._bound:
            return self._bound[id(var)]
        if any(var is o for o in self._ctx.eqn.outvars):
            # An output not produced yet: 0.17 handed out a typed placeholder whose name the plugin
            # passes as _outputs=[...]; its type and shape are the equation's output aval.
            import onnx_ir as ir

            placeholder = ir.Value(name=name_hint or self.fresh_name("out"))
            self._ctx.set_aval(placeholder, var.aval)
            return placeholder
        value = getattr(var, "val", None)  # a literal operand
        if value is not None:
            return self._ctx.const(value, getattr(var.aval, "dtype", None))
        raise LegacyPluginError(f"get_value_for_var({var}): not an operand or result of this equation")

    def bind_value_for_var(self, var: Any, value: Any) -> None:
        self._bound[id(var)] = value

    def results(self) -> list[Any]:
        missing = [str(v) for v in self._ctx.eqn.outvars if id(v) not in self._bound]
        if missing:
            raise LegacyPluginError(f"0.17 plugin for '{self._ctx.primitive}' bound no value for output(s) {missing}: "
                                    "call ctx.bind_value_for_var(eqn.outvars[i], value) for each")
        return [self._bound[id(v)] for v in self._ctx.eqn.outvars]

    def __getattr__(self, name: str) -> Any:
        raise LegacyPluginError(f"0.17's lowering context attribute '{name}' is not provided by the 0.17 plugin adapter "
                                f"(it offers get_value_for_var, bind_value_for_var, fresh_name, builder.<Op>); write the "
                                f"lowering with {NEW_API}, see {GUIDE}")


# ---------------------------------------------------------------------------------------------
# 0.17's module paths


class _RemovedModules(importlib.abc.MetaPathFinder):
    """Imports of 0.17 module paths that no longer exist fail with one line saying what replaced them."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> None:
        removed = fullname.startswith("jax2onnx.plugins.") or any(
            fullname == m or fullname.startswith(m + ".") for m in _REMOVED_MODULES)
        if removed and fullname not in sys.modules:
            raise ModuleNotFoundError(
                f"No module named '{fullname}': jax2onnx 0.17's internals are gone. Plugins: "
                f"jax2onnx.plugins.plugin_system.register_primitive still works, new code uses {NEW_API}; see {GUIDE}",
                name=fullname,
            )
        return None


def install() -> None:
    """Make ``jax2onnx.plugins`` / ``jax2onnx.plugins.plugin_system`` importable (called by ``jax2onnx``)."""
    package = types.ModuleType("jax2onnx.plugins", "jax2onnx 0.17's plugin package: only plugin_system remains.")
    package.__path__ = []  # a package, so `import jax2onnx.plugins.plugin_system` resolves
    package.plugin_system = sys.modules[__name__]
    package = sys.modules.setdefault("jax2onnx.plugins", package)
    sys.modules.setdefault("jax2onnx.plugins.plugin_system", sys.modules[__name__])
    parent = sys.modules.get("jax2onnx")
    if parent is not None and not hasattr(parent, "plugins"):
        parent.plugins = package  # `import jax2onnx.plugins.plugin_system` then attribute access
    if not any(isinstance(f, _RemovedModules) for f in sys.meta_path):
        sys.meta_path.append(_RemovedModules())
