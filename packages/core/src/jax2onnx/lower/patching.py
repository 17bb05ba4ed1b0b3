"""Patches that only the exporting thread sees, on attributes whose identity never flips.

A pack's :class:`jax2onnx.plugin.Patch` replaces e.g. ``jax.nn.relu`` so that an export
records a fused op (a layer's method is a :class:`jax2onnx.plugin.ModulePatch` instead, scoped to the exported
instances by :mod:`jax2onnx.lower.scoped`, which changes no library attribute). Replacing the attribute for the duration of an export (set, trace, restore) is
wrong as soon as two threads export at once, or one exports while another runs the model: each
thread restores the value *it* saw, which may be the other's replacement, and a thread that merely
calls the model traces through the export path.

So each patched attribute is swapped, once, for a :class:`_Dispatcher` that decides per call:
inside an export running in the current thread/``contextvars`` context it calls that export's
replacement, everywhere else the original, unchanged (``functools.wraps`` metadata, attribute
access, method binding and pickling delegated to the original).

**Installed once, never removed.** The dispatchers go in when the process-wide registry loads the
packs (:func:`jax2onnx.lower.registry.get_registry` calls :func:`install_dispatchers`), or, for a
patch whose library is imported only later, at the first export that applies it; they stay for the
life of the process. Earlier versions put the originals back after the last running export, so a
thread reading ``jax.nn.relu`` beside a running export saw one object, then another: the identity
of a library attribute changed under code that never exported. Now it changes at most once per
attribute, before or at the first export, and never again.

Guarantee: concurrent exports from any number of threads each get their own fused ops, code in
other threads computes what the original computes, and a patched attribute, once installed, is the
same object for the rest of the process.
"""

from __future__ import annotations

import contextvars
import dataclasses
import functools
import importlib
import operator
import signal
import threading
from collections.abc import Iterable, Sequence
from types import FrameType
from typing import Any

from ..plugin import original_of  # the pack author's API; kept importable from here for tests

_MISSING = object()

#: The running export's replacements, keyed like :data:`_INSTALLED`; None outside an export.
_ACTIVE: contextvars.ContextVar[dict[tuple[int, str], Any] | None] = contextvars.ContextVar(
    "jax2onnx_patches", default=None
)

_LOCK = threading.RLock()
#: (id(target), attribute) -> what was replaced; insertion order is install order. A record holds
#: its target, so the id in its key is never reused by another object.
_INSTALLED: dict[tuple[int, str], _Installed] = {}


class _Dispatcher:
    """Stands in for one patched attribute: the running export's replacement, else the original."""

    def __init__(self, key: tuple[int, str], original: Any, raw: Any):
        self._jax2onnx_key = key
        self._jax2onnx_original = original  # what getattr(target, attribute) gave
        self._jax2onnx_raw = raw  # the class-dict entry (staticmethod, function, ...) for binding
        try:
            functools.update_wrapper(self, original, updated=())
        except (AttributeError, TypeError):  # an original without the usual metadata
            self.__wrapped__ = original

    def _replacement(self) -> Any:
        table = _ACTIVE.get()
        if table is None:
            return _MISSING
        return table.get(self._jax2onnx_key, _MISSING)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        replacement = self._replacement()
        if replacement is _MISSING:
            return self._jax2onnx_original(*args, **kwargs)
        return replacement(*args, **kwargs)

    def __get__(self, obj: Any, cls: type | None = None) -> Any:
        # Installed on a class (``Linear.__call__``): bind what the original would bind outside an
        # export, and the replacement (a plain function, bound as a method) inside one.
        replacement = self._replacement()
        chosen = self._jax2onnx_raw if replacement is _MISSING else replacement
        get = getattr(type(chosen), "__get__", None)
        return chosen if get is None else get(chosen, obj, cls)

    def __getattr__(self, name: str) -> Any:
        # ``jax.nn.relu.defjvp``, ``jnp.matmul.lower``: the original's own attributes keep working.
        if name.startswith("_jax2onnx_"):  # not set yet (copy/pickle build the object bare)
            raise AttributeError(name)
        return getattr(self._jax2onnx_original, name)

    def __repr__(self) -> str:
        return repr(self._jax2onnx_original)

    def __reduce__(self) -> Any:
        # Pickled as a reference to the original (``module.qualname``), which unpickles without
        # jax2onnx; pickle's own by-name path would find the dispatcher and refuse the original.
        original = self._jax2onnx_original
        module, qualname = getattr(original, "__module__", None), getattr(original, "__qualname__", None)
        if not module or not qualname or "<locals>" in qualname:
            raise TypeError(f"cannot pickle {original!r}: it has no importable name")
        return operator.attrgetter(qualname), (_ModuleByName(module),)


class _ModuleByName:
    """A module in a pickle: unpickled by importing it by name."""

    def __init__(self, name: str):
        self.name = name

    def __reduce__(self) -> Any:
        return importlib.import_module, (self.name,)


@dataclasses.dataclass
class _Installed:
    target: Any
    attribute: str
    raw: Any
    original: Any
    dispatcher: _Dispatcher


def _own_dict(target: Any) -> dict[str, Any]:
    try:
        return vars(target)
    except TypeError:
        return {}


def _install(target: Any, attribute: str, key: tuple[int, str]) -> _Installed:
    own = _own_dict(target)
    had = attribute in own
    original = getattr(target, attribute)
    if had:
        raw = own[attribute]
    elif isinstance(target, type):
        raw = next((vars(k)[attribute] for k in target.__mro__ if attribute in vars(k)), original)
    else:
        raw = original
    record = _Installed(target, attribute, raw, original, _Dispatcher(key, original, raw))
    # Recorded before the setattr: an interruption between the two leaves a record without its
    # dispatcher in place (the next export's replacement is then simply not reached), never a
    # dispatcher without a record.
    _INSTALLED[key] = record
    setattr(target, attribute, record.dispatcher)
    return record


def installed_patches() -> list[str]:
    """``"module.Class.attribute"`` for each dispatcher in place (installed ones stay)."""
    with _LOCK:
        out = []
        for record in _INSTALLED.values():
            owner = getattr(record.target, "__qualname__", None) or getattr(record.target, "__name__", repr(record.target))
            module = getattr(record.target, "__module__", None)
            prefix = f"{module}." if module and isinstance(record.target, type) else ""
            out.append(f"{prefix}{owner}.{record.attribute}")
        return out


def dispatcher_of(fn: Any) -> Any:
    """The dispatcher standing in for ``fn`` when ``fn`` is a patched library function itself, else
    ``fn``. A reference taken before the packs loaded (``to_onnx(jnp.linalg.solve, ...)`` as a
    process's first export) is the original: calling it would bypass the pack's fusion, so the
    export traces the dispatcher in its place (same result outside an export by construction)."""
    if not callable(fn) or isinstance(fn, _Dispatcher):
        return fn
    with _LOCK:
        for record in _INSTALLED.values():
            if record.original is fn:
                return record.dispatcher
    return fn


class _DeferredInterrupts:
    """Hold back Ctrl-C (SIGINT in the main thread) while patch state changes.

    A ``KeyboardInterrupt`` landing between two steps of installing or restoring would otherwise
    leave the process half patched. Outside the main thread no signal handler runs, so there is
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


def install_dispatchers(patches: Iterable[Any]) -> None:
    """Put the dispatcher of every applicable patch in place now (a no-op for installed ones), so
    that the attributes' identity is settled before any export runs. Resolving may import the
    patched libraries; a patch whose library is absent, or that declines its attribute, is skipped."""
    resolved = [(p, p.resolve()) for p in patches]
    with _DeferredInterrupts() as guard:
        with _LOCK:
            seen: set[tuple[int, str]] = set()
            for patch, target in resolved:
                if target is None or not hasattr(target, patch.attribute):
                    continue
                key = (id(target), patch.attribute)
                if key in _INSTALLED or key in seen:
                    continue
                base = getattr(target, patch.attribute)
                if patch.replacement(base) is base:
                    continue  # declined (e.g. a re-export that differs): leave the attribute alone
                seen.add(key)
                _install(target, patch.attribute, key)
    guard.deliver()


class applied_patches:
    """Context manager: inside the block, in this thread/context, ``patches`` are in effect.

    Other threads, and code outside the block, see the originals' behaviour. Re-entrant and
    safe to use from many threads at once. Dispatchers it installs stay after the block.
    """

    def __init__(self, patches: Iterable[Any]):
        self._patches: Sequence[Any] = list(patches)
        self._token: contextvars.Token[Any] | None = None

    def __enter__(self) -> applied_patches:
        # Resolving may import modules: done before taking the lock.
        resolved = [(p, p.resolve()) for p in self._patches]
        with _DeferredInterrupts() as guard:
            with _LOCK:
                self._acquire(resolved)
        if guard.pending is not False:
            self._exit_state()
            guard.deliver()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._exit_state()

    def _exit_state(self) -> None:
        with _DeferredInterrupts() as guard:
            if self._token is not None:
                _ACTIVE.reset(self._token)
                self._token = None
        guard.deliver()

    def _acquire(self, resolved: Sequence[tuple[Any, Any]]) -> None:
        table: dict[tuple[int, str], Any] = {}
        for patch, target in resolved:
            if target is None or not hasattr(target, patch.attribute):
                continue  # an optional dependency (or an attribute this version lacks) is absent
            key = (id(target), patch.attribute)
            record = _INSTALLED.get(key)
            if key in table:
                base = table[key]  # a second patch of the same attribute wraps the first
            elif record is not None:
                base = record.original
            else:
                base = getattr(target, patch.attribute)
            replacement = patch.replacement(base)
            if replacement is base and key not in table:
                continue  # the patch declined this attribute (e.g. a re-export that differs)
            if record is None:
                _install(target, patch.attribute, key)
            table[key] = replacement
        self._token = _ACTIVE.set(table)


__all__ = ["applied_patches", "install_dispatchers", "installed_patches", "original_of"]
