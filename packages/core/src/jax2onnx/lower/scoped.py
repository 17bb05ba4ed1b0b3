"""Overrides scoped to the objects being exported: the library's classes are never touched.

A pack's :class:`jax2onnx.plugin.ModulePatch` (``flax.nnx.Linear.__call__`` recorded as a fused
region) applies to the module *instances* reachable from the exported callable, for the duration of
that export only. Each such instance has its ``__class__`` set to a cached subclass of its own class
whose patched attributes decide per call: inside an export running in the current thread/
``contextvars`` context they call that export's replacement, everywhere else the class's own
attribute, unchanged. When the export ends (return, error, Ctrl-C) the instance gets its class back.

What stays true at every moment, in every thread: no attribute of the library (``flax.nnx.Linear``,
its ``__call__``) is replaced. What an observer can see is only the exported instance's own
``type(model)`` being that subclass *while* its export runs (``isinstance`` and everything the class
defines still answer as before); a thread calling the model meanwhile runs the class's own code.

Instances are found by walking from the exported callable and its inputs: a module instance itself,
a bound method's ``__self__``, ``functools.partial`` parts, a function's closure cells, defaults and
the globals its code names, and the attributes of plain objects and containers. An NNX model is
rebuilt from its graph definition inside the trace (``nnx.merge``); the definition records the
subclass, so the copies dispatch as the instance does.

An instance whose class overrides the patched attribute itself (a user subclass defining its own
``__call__``) is left alone: its own code runs, as it would without jax2onnx.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import inspect
import signal
import threading
import types
from collections.abc import Iterable, Iterator, Sequence
from types import FrameType
from typing import Any

#: The running export's replacements, ``(patched class, attribute) -> replacement``; None outside.
_ACTIVE: contextvars.ContextVar[dict[tuple[type, str], Any] | None] = contextvars.ContextVar(
    "jax2onnx_scoped_overrides", default=None
)

#: The running export's replacements reached through a pack's interceptor (``ModulePatch.interceptor``).
_INTERCEPTED: contextvars.ContextVar[dict[Any, dict[tuple[type, str], Any]] | None] = contextvars.ContextVar(
    "jax2onnx_intercepted", default=None
)
#: ``(id(module), method)`` whose next intercepted call is the module's own code: a replacement
#: calling ``original(module, ...)`` must reach the library's method, not itself again.
_BYPASS: contextvars.ContextVar[tuple[int, str] | None] = contextvars.ContextVar("jax2onnx_bypass", default=None)

_LOCK = threading.RLock()
#: (id(holder), slot) -> [holder, slot, the class it held, how many running exports hold it swapped];
#: the slot is an instance's ``__class__`` or a class a pack's ``holders`` named (a GraphDef's node type)
_SWAPPED: dict[tuple[int, str], list[Any]] = {}
#: (instance class, patched attributes with the class that defines each) -> the dispatching subclass
_SUBCLASSES: dict[tuple[type, tuple[tuple[str, type], ...]], type] = {}

#: Module prefixes whose objects are libraries, not the user's: the walk does not enter them.
_LIBRARY_PREFIXES = ("jax", "jaxlib", "numpy", "flax", "equinox", "keras", "keras_hub", "transformers",
                     "optax", "jax2onnx", "onnx", "onnxruntime", "builtins", "typing", "functools")
_WALK_LIMIT = 200_000  # objects visited at most (a model graph is far smaller)


class _DeferredInterrupts:
    """Hold back Ctrl-C (SIGINT in the main thread) while the exported instances' classes change.

    A ``KeyboardInterrupt`` landing between two steps of swapping or restoring would otherwise
    leave some instances overridden. Outside the main thread no signal handler runs, so there is
    nothing to defer.
    """

    def __init__(self) -> None:
        self.pending: FrameType | None | bool = False
        self._previous: Any = None

    def __enter__(self) -> _DeferredInterrupts:
        if threading.current_thread() is threading.main_thread():
            previous = signal.getsignal(signal.SIGINT)
            if callable(previous):
                self._previous = previous
                signal.signal(signal.SIGINT, self._note)
        return self

    def _note(self, signum: int, frame: FrameType | None) -> None:
        self.pending = frame if frame is not None else True

    def __exit__(self, *exc: Any) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)

    def deliver(self) -> None:
        """Run the held-back handler now (the default one raises ``KeyboardInterrupt``)."""
        if self.pending is not False and self._previous is not None:
            frame = self.pending if isinstance(self.pending, FrameType) else None
            self.pending = False
            self._previous(signal.SIGINT, frame)


def _dispatching(patched: type, attribute: str, raw: Any) -> Any:
    """The subclass attribute standing in for ``patched.attribute`` (``raw``: its class-dict entry)."""

    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        table = _ACTIVE.get()
        replacement = None if table is None else table.get((patched, attribute))
        if replacement is None:  # not in this export's context: the class's own code
            return raw.__get__(self, type(self))(*args, **kwargs)
        return replacement(self, *args, **kwargs)

    try:
        functools.update_wrapper(method, raw)
    except (AttributeError, TypeError):
        pass
    return method


def _bypassing(method: Any, attribute: str) -> Any:
    """``method`` (the library's own, called through its interceptors) as the ``original`` a
    replacement receives: its next interception for that module runs the module's own code."""

    @functools.wraps(method)
    def original(module: Any, *args: Any, **kwargs: Any) -> Any:
        token = _BYPASS.set((id(module), attribute))
        try:
            return method(module, *args, **kwargs)
        finally:
            _BYPASS.reset(token)

    return original


def _lookup(interceptor: Any, module: Any, method: str, function: Any = None) -> Any:
    """What ``interceptor`` runs for ``module.method(...)``: the export's replacement bound to the
    module, or ``None`` for the module's own code. Each interceptor answers only for the patches
    that name it (two packs may each install one for the same library; a call passes both).
    ``function``: the class-level function being run, when the library says (Linen does): a
    subclass's ``super().__call__`` then reaches the patched class's method, as it would reach a
    patched attribute."""
    tables = _INTERCEPTED.get()
    table = None if tables is None else tables.get(interceptor)
    if not table:
        return None
    own = type(module)
    for (patched, attribute), replacement in table.items():
        if attribute != method or not isinstance(module, patched):
            continue
        defined = inspect.getattr_static(patched, attribute)
        if function is not None:
            applies = function is defined or function is getattr(defined, "__wrapped__", None)
        else:
            applies = inspect.getattr_static(own, attribute, None) is defined
        if not applies:
            continue
        if _BYPASS.get() == (id(module), method):  # the replacement calling the module's own code
            _BYPASS.set(None)  # only this one call: that code may call others
            return None
        return functools.partial(replacement, module)
    return None


def _subclass(cls: type, attributes: tuple[tuple[str, type], ...]) -> type:
    key = (cls, attributes)
    sub = _SUBCLASSES.get(key)
    if sub is None:
        namespace: dict[str, Any] = {"__module__": cls.__module__, "__qualname__": cls.__qualname__,
                                     "_jax2onnx_own_class": cls}
        for attribute, patched in attributes:
            namespace[attribute] = _dispatching(patched, attribute, inspect.getattr_static(cls, attribute))
        sub = type(cls)(cls.__name__, (cls,), namespace)
        _SUBCLASSES[key] = sub
    return sub


def _overridden(own: type, table: dict[tuple[type, str], Any]) -> tuple[tuple[str, type], ...]:
    """``(attribute, patched class)`` of each patch that applies to instances of ``own``: a subclass
    of the patched class that does not define the attribute itself."""
    return tuple(sorted(
        ((attribute, patched) for patched, attribute in table
         if issubclass(own, patched)
         and inspect.getattr_static(own, attribute, None) is inspect.getattr_static(patched, attribute)),
        key=lambda item: (item[0], item[1].__qualname__),
    ))


def _is_library(obj: Any) -> bool:
    module = getattr(obj, "__module__", None) if not isinstance(obj, types.FunctionType) else obj.__globals__.get("__name__")
    return isinstance(module, str) and module.partition(".")[0] in _LIBRARY_PREFIXES


def _code_names(code: types.CodeType) -> Iterator[str]:
    yield from code.co_names
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _code_names(const)


def _children(obj: Any) -> Iterable[Any]:
    if isinstance(obj, dict):
        return list(obj.values())
    if isinstance(obj, (list, tuple, set, frozenset)):
        return list(obj)
    if isinstance(obj, functools.partial):
        return [obj.func, *obj.args, *obj.keywords.values()]
    if isinstance(obj, types.MethodType):
        return [obj.__self__, obj.__func__]
    wrapped = getattr(obj, "__wrapped__", None)  # jax.jit(model), functools.wraps wrappers
    extra = [wrapped] if wrapped is not None and not isinstance(obj, types.FunctionType) else []
    if isinstance(obj, types.FunctionType):
        # A library's wrapper (jax.vmap(model)) holds the user's callable in its closure; its
        # module globals are the library's own and are not walked.
        out = [c.cell_contents for c in obj.__closure__ or () if _cell_filled(c)]
        out += list(obj.__defaults__ or ()) + list((obj.__kwdefaults__ or {}).values())
        if not _is_library(obj):
            g = obj.__globals__
            out += [g[n] for n in set(_code_names(obj.__code__)) if n in g]
        return out + ([wrapped] if wrapped is not None else [])
    try:
        own = vars(obj)
    except TypeError:
        return extra
    return list(own.values()) + extra


def _cell_filled(cell: Any) -> bool:
    try:
        cell.cell_contents  # noqa: B018 - an empty cell raises
    except ValueError:
        return False
    return True


def reachable(roots: Iterable[Any]) -> Iterator[Any]:
    """Objects reachable from ``roots`` through the links described in the module docstring."""
    seen: set[int] = set()
    stack = list(roots)
    while stack and len(seen) < _WALK_LIMIT:
        obj = stack.pop()
        if id(obj) in seen or obj is None or isinstance(obj, (type, types.ModuleType, str, bytes, int, float, complex, bool)):
            continue
        seen.add(id(obj))
        yield obj
        try:
            if hasattr(obj, "shape") and hasattr(obj, "dtype"):  # an array: nothing inside to find
                continue
            stack.extend(_children(obj))
        except Exception:  # noqa: BLE001 - an object whose __getattr__ raises: nothing found in it
            continue


class scoped_overrides:
    """Context manager: inside the block, in this thread/context, ``patches`` (pack
    :class:`~jax2onnx.plugin.ModulePatch` entries) apply to the instances reachable from ``roots``.

    Re-entrant and safe from many threads: an instance two exports hold is given its class back
    when the last one ends. Ctrl-C while classes change is delivered once the state is consistent.
    """

    def __init__(self, patches: Sequence[Any], roots: Sequence[Any]):
        self._patches = list(patches)
        self._roots = list(roots)
        self._held: list[Any] = []
        self._token: contextvars.Token[Any] | None = None
        self._intercept_token: contextvars.Token[Any] | None = None
        self._stack = contextlib.ExitStack()

    def __enter__(self) -> scoped_overrides:
        classes = [(p, p.resolve()) for p in self._patches]
        classes = [(p, c) for p, c in classes if c is not None and hasattr(c, p.attribute)]
        table: dict[tuple[type, str], Any] = {}
        intercepted: dict[Any, dict[tuple[type, str], Any]] = {}  # per interceptor
        for patch, cls in classes:
            key = (cls, patch.attribute)
            if patch.interceptor is None:
                base = table.get(key, getattr(cls, patch.attribute))  # a second patch wraps the first
                table[key] = patch.replacement(base)
            else:
                own = intercepted.setdefault(patch.interceptor, {})
                base = own.get(key, _bypassing(getattr(cls, patch.attribute), patch.attribute))
                own[key] = patch.replacement(base)
        if intercepted:
            self._enter_interceptors(intercepted)
        if not table:
            return self
        holders = list(dict.fromkeys(p.holders for p, _ in classes if p.holders is not None))
        found = []
        for obj in reachable(self._roots):
            own = getattr(type(obj), "_jax2onnx_own_class", type(obj))
            attributes = _overridden(own, table)
            if attributes:
                found.append((obj, "__class__", own, attributes))
            for class_slots in holders:  # classes an object records (an NNX GraphDef's node types)
                for holder, slot in class_slots(obj):
                    held = getattr(holder, slot, None)
                    if isinstance(held, type):
                        own = getattr(held, "_jax2onnx_own_class", held)
                        attributes = _overridden(own, table)
                        if attributes:
                            found.append((holder, slot, own, attributes))
        with _DeferredInterrupts() as guard:
            with _LOCK:
                for holder, slot, own, attributes in found:
                    self._hold(holder, slot, own, attributes)
            self._token = _ACTIVE.set(table)
        if guard.pending is not False:
            self._release()
            guard.deliver()
        return self

    def _hold(self, holder: Any, slot: str, own: type, attributes: tuple[tuple[str, type], ...]) -> None:
        key = (id(holder), slot)
        record = _SWAPPED.get(key)
        if record is None:
            sub = _subclass(own, attributes)
            try:
                object.__setattr__(holder, slot, sub)
            except (TypeError, AttributeError):  # the object refuses: this one is not fused
                return
            _SWAPPED[key] = record = [holder, slot, own, 0]
        record[3] += 1
        self._held.append(key)

    def __exit__(self, *exc: Any) -> None:
        with _DeferredInterrupts() as guard:
            self._release()
        guard.deliver()

    def _enter_interceptors(self, intercepted: dict[Any, dict[tuple[type, str], Any]]) -> None:
        self._intercept_token = _INTERCEPTED.set(intercepted)
        try:
            for interceptor in intercepted:
                self._stack.enter_context(interceptor(functools.partial(_lookup, interceptor)))
        except BaseException:
            self._release()
            raise

    def _release(self) -> None:
        self._stack.close()
        if self._intercept_token is not None:
            _INTERCEPTED.reset(self._intercept_token)
            self._intercept_token = None
        if self._token is not None:
            _ACTIVE.reset(self._token)
            self._token = None
        with _LOCK:
            for key in self._held:
                record = _SWAPPED[key]
                record[3] -= 1
                if record[3] == 0:
                    holder, slot, own, _ = record
                    object.__setattr__(holder, slot, own)
                    del _SWAPPED[key]
            self._held = []


__all__ = ["reachable", "scoped_overrides"]
