"""Finds plugin packs (entry-point group ``jax2onnx``) and builds the dispatch table.

Loading is lazy: nothing is imported at ``import jax2onnx``; the first conversion (or a call to
:func:`get_registry`) imports the packs' plugin modules, asks each for its lowerings once, and
validates them. Built-ins load first, then entry points, then the table is checked for conflicts.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata as metadata
import threading
import warnings
from collections.abc import Iterable, Sequence
from types import ModuleType
from typing import Any

import pluggy

from .._version import __version__
from ..compat import primitives_by_module
from ..errors import PluginConflictError, add_library_modules
from ..plugin import Lowering, ModulePatch, PackModules
from . import builtin_plugin, hookspecs, pack_catalog, plugin_api

ENTRY_POINT_GROUP = pack_catalog.ENTRY_POINT_GROUP


@dataclasses.dataclass
class PackInfo:
    """One installed pack: its distribution name, version, plugin module, and load error if any."""

    name: str
    version: str
    module: str
    error: str | None = None
    lowered: list[str] = dataclasses.field(default_factory=list)


class PackLoadWarning(UserWarning):
    """A plugin pack failed to import; the others still work."""


class PluginRegistry:
    """The installed packs and what each lowers, patches and tests."""

    def __init__(self, entry_points: Sequence[Any] | None = None, extra_plugins: Iterable[tuple[str, ModuleType | object]] = ()):
        self._entry_points = entry_points

        self._extra = [("jax2onnx-core", builtin_plugin), *extra_plugins]
        self._pm: pluggy.PluginManager | None = None
        self._lowerings: dict[str, Lowering] | None = None
        self._lock = threading.Lock()
        self.packs: list[PackInfo] = []
        #: primitive -> why two packs claim it (the conversions using it raise PluginConflictError)
        self.conflicts: dict[str, str] = {}
        self._pack_of_plugin: dict[int, str] = {}

    # -- loading ----------------------------------------------------------------------------------
    def _load(self) -> pluggy.PluginManager:
        if self._pm is not None:
            return self._pm
        pm = pluggy.PluginManager(hookspecs.PROJECT)
        pm.add_hookspecs(hookspecs)

        for name, plugin in self._extra:
            version = __version__ if name == "jax2onnx-core" else "local"
            self._register(pm, plugin, PackInfo(name, version, getattr(plugin, "__name__", type(plugin).__name__)))
        eps = self._entry_points if self._entry_points is not None else metadata.entry_points(group=ENTRY_POINT_GROUP)
        for ep in sorted(eps, key=lambda e: (_dist_name(e), e.name)):
            dist = _dist_name(ep)
            info = PackInfo(dist, _dist_version(ep), ep.value)
            try:
                plugin = ep.load()
            except Exception as exc:  # noqa: BLE001 - a broken pack must not break the others
                info.error = f"{type(exc).__name__}: {exc}"
                self.packs.append(info)
                warnings.warn(
                    f"jax2onnx plugin pack '{dist}' ({ep.value}) failed to import and is skipped: "
                    f"{info.error}. Reinstall or upgrade it (pip install -U {dist}).",
                    PackLoadWarning,
                    stacklevel=3,
                )
                continue
            incompatible = plugin_api.check_plugin_api(plugin_api.declared_api(plugin), dist)
            if incompatible is not None:
                info.error = incompatible
                self.packs.append(info)
                warnings.warn(incompatible, PackLoadWarning, stacklevel=3)
                continue
            self._register(pm, plugin, info)
        self._report_unknown_hooks(pm)
        self._pm = pm
        library = [_top_module(p.module) for p in self.packs if p.error is None]
        add_library_modules([*library, *(name for _, name in self._collect("jax2onnx_library_modules"))])
        return pm

    def _report_unknown_hooks(self, pm: pluggy.PluginManager) -> None:
        """Warn about hook implementations that match no hook (pluggy's ``check_pending`` finds
        them; it raises on the first, we name every one and keep the pack's valid hooks)."""
        for name, caller in vars(pm.hook).items():
            if isinstance(caller, pluggy.HookCaller) and not caller.has_spec():
                for impl in caller.get_hookimpls():
                    warnings.warn(
                        f"jax2onnx plugin pack '{self._pack_for_impl(impl)}' implements '{name}', which is not a "
                        f"jax2onnx hook (misspelled?); it is ignored. Hooks: {', '.join(_hook_names())}.",
                        PackLoadWarning,
                        stacklevel=4,
                    )
        for plugin in pm.get_plugins():
            misspelled = getattr(plugin, "misspelled_attributes", None)
            for attr in misspelled() if callable(misspelled) else ():
                warnings.warn(
                    f"jax2onnx plugin pack '{self._pack_of_plugin.get(id(plugin), plugin)}': module attribute "
                    f"'{attr}' looks like a misspelling of one of {', '.join(PackModules.HOOK_ATTRIBUTES)} and is ignored.",
                    PackLoadWarning,
                    stacklevel=4,
                )

    def _register(self, pm: pluggy.PluginManager, plugin: object, info: PackInfo) -> None:
        if pm.is_registered(plugin):
            return
        pm.register(plugin, name=f"{info.name}:{info.module}")
        self._pack_of_plugin[id(plugin)] = info.name
        self.packs.append(info)

    def _pack_for_impl(self, impl: pluggy.HookImpl) -> str:
        return self._pack_of_plugin.get(id(impl.plugin), impl.plugin_name)

    def _collect(self, hook_name: str) -> list[tuple[str, Any]]:
        """Call ``hook_name`` on each plugin separately so one failing pack is isolated."""
        pm = self._load()
        out = []
        hook = getattr(pm.hook, hook_name)
        for impl in hook.get_hookimpls():
            pack = self._pack_for_impl(impl)
            try:
                result = impl.function()
                items = list(result or ())
            except Exception as exc:  # noqa: BLE001
                info = next((p for p in self.packs if p.name == pack), None)
                if info is not None:
                    info.error = f"{hook_name}: {type(exc).__name__}: {exc}"
                warnings.warn(
                    f"jax2onnx plugin pack '{pack}' failed in {hook_name} and is skipped: {exc!r}",
                    PackLoadWarning,
                    stacklevel=3,
                )
                continue
            out.extend((pack, item) for item in items)
        return out

    # -- queries ----------------------------------------------------------------------------------
    def lowerings(self) -> dict[str, Lowering]:
        """The dispatch table ``name -> Lowering``; conflicts raise :class:`PluginConflictError`."""
        if self._lowerings is not None:
            return self._lowerings
        with self._lock:
            if self._lowerings is not None:
                return self._lowerings
            table: dict[str, Lowering] = {}
            for pack, low in self._collect("jax2onnx_lowerings"):
                low = low.with_pack(pack)
                prev = table.get(low.name)
                if prev is None or low.priority > prev.priority:
                    table[low.name] = low
                elif low.priority == prev.priority and prev.fn is not low.fn and prev.pack != _CONFLICT:
                    message = (
                        f"Primitive '{low.name}' is claimed by two plugin packs: '{prev.pack}' and "
                        f"'{low.pack}', both at priority {low.priority}. Uninstall one of them, or "
                        f"give one Lowering(priority=...) a higher value to make it win explicitly."
                    )
                    # Only conversions that use the contested primitive fail; every other one works.
                    self.conflicts[low.name] = message
                    table[low.name] = Lowering(low.name, _conflict_lowering(message), low.priority, pack=_CONFLICT)
            for info in self.packs:
                info.lowered = sorted(n for n, low in table.items() if low.pack == info.name)
            self._lowerings = table
            return table

    def module_patches(self) -> list[ModulePatch]:
        """The packs' overrides scoped to exported instances (:mod:`jax2onnx.lower.scoped`); anything
        else a pack returns is refused naming the pack (library functions are never replaced)."""
        found = self._collect("jax2onnx_patches")
        for pack, p in found:
            if not isinstance(p, ModulePatch):
                raise TypeError(f"the pack {pack!r} returned {p!r} from jax2onnx_patches: only ModulePatch "
                                "(an override of the exported instances) is applied; a library function is found in "
                                "the trace instead (Lowerings.register_library)")
        return [p for _, p in found]

    def adapt(self, fn: Any) -> Any | None:
        """The first pack adapter's traceable version of ``fn`` (e.g. a stateful NNX module), or None."""
        return self._load().hook.jax2onnx_adapt_callable(fn=fn)

    def demos(self) -> list[tuple[str, Any]]:
        """``(pack, Demo)`` pairs from every pack: the ready-made models the command line runs."""
        return self._collect("jax2onnx_demos")

    def pack_hint(self, primitive: str) -> str | None:
        """The loaded pack that lowers other primitives of the JAX module defining ``primitive`` (for
        error messages: it is the pack a lowering of ``primitive`` would belong in), else the
        published pack the catalog says lowers it (to install), else None."""
        if primitive.startswith("call:"):
            return None
        table = self.lowerings()
        defined = primitives_by_module()
        for module in sorted(m for m, names in defined.items() if primitive in names):
            packs = {table[n].pack for n in defined[module] if n in table and table[n].pack != _CONFLICT}
            if packs:
                return sorted(packs)[0]
        return pack_catalog.pack_for(primitive)

    def components(self) -> list[tuple[str, Any]]:
        """``(pack, Component)`` pairs from every pack."""
        return self._collect("jax2onnx_components")

    def describe(self) -> list[PackInfo]:
        self.lowerings()
        return list(self.packs)


def _dist_name(ep: Any) -> str:
    dist = getattr(ep, "dist", None)
    if dist is not None and getattr(dist, "name", None):
        return dist.name
    return ep.value.split(".")[0].split(":")[0]


def _dist_version(ep: Any) -> str:
    dist = getattr(ep, "dist", None)
    return getattr(dist, "version", "unknown") if dist is not None else "unknown"


_REGISTRY: PluginRegistry | None = None
_REGISTRY_LOCK = threading.Lock()


def get_registry() -> PluginRegistry:
    """The process-wide registry of installed packs (created on first use). Creating it changes
    nothing outside jax2onnx: no library attribute is replaced, then or at any export."""
    global _REGISTRY
    with _REGISTRY_LOCK:
        if _REGISTRY is None:
            _REGISTRY = PluginRegistry()
        return _REGISTRY


def set_registry(registry: PluginRegistry | None) -> PluginRegistry | None:
    """Swap the process-wide registry (tests use this); returns the previous one."""
    global _REGISTRY
    with _REGISTRY_LOCK:
        previous, _REGISTRY = _REGISTRY, registry
        return previous


_CONFLICT = "(conflict)"


def _conflict_lowering(message: str) -> Any:
    def lower(ctx: Any, *ins: Any) -> Any:
        raise PluginConflictError(message)

    return lower


def _hook_names() -> list[str]:
    return sorted(n for n in vars(hookspecs) if n.startswith("jax2onnx_"))


def _top_module(module: str) -> str:
    """``"jax2onnx_mypack"`` from a plugin's ``"jax2onnx_mypack.plugin:plugin"`` (or a module name)."""
    return module.partition(":")[0].partition(".")[0]
