"""The lowering API packs write against: :class:`Lowering`, :class:`Lowerings`, :class:`Patch`,
:func:`marked_call`.

A lowering is a plain function ``fn(ctx, *inputs) -> Value | Sequence[Value] | None``: ``ctx`` is a
:class:`jax2onnx.context.LoweringContext` (``ctx.op.Add(a, b)``, ``ctx.params``, ``ctx.avals_in``,
``ctx.const(...)``), ``inputs`` are the ONNX values of the equation's operands. Returning ``None``
from a marked-call lowering means "decline": core then lowers the call's body instead.
"""

from __future__ import annotations

import contextvars
import dataclasses
import importlib
import itertools
from collections.abc import Callable, Iterator, Sequence
from typing import Any

LoweringFn = Callable[..., Any]

#: Prefix of the ``jax.jit`` name that :func:`marked_call` gives a region.
MARK_PREFIX = "jax2onnx:"


@dataclasses.dataclass(frozen=True)
class Lowering:
    """Maps one primitive name (or ``"call:<mark>"``) to the function that emits ONNX for it."""

    name: str
    fn: LoweringFn
    priority: int = 0
    pack: str = ""  # filled in by the registry from the entry point's distribution

    def with_pack(self, pack: str) -> Lowering:
        return dataclasses.replace(self, pack=pack)


class Lowerings:
    """A module-level table of lowerings; iterate it from the ``jax2onnx_lowerings`` hook.

    >>> lowerings = Lowerings()
    >>> @lowerings.register("sin")
    ... def lower_sin(ctx, x):
    ...     return ctx.op.Sin(x)
    """

    def __init__(self) -> None:
        self._items: list[Lowering] = []

    def register(self, *names: str, priority: int = 0) -> Callable[[LoweringFn], LoweringFn]:
        def deco(fn: LoweringFn) -> LoweringFn:
            for name in names:
                self._items.append(Lowering(name, fn, priority))
            return fn

        return deco

    def register_call(self, mark: str, *, priority: int = 0) -> Callable[[LoweringFn], LoweringFn]:
        """Register the lowering of a region marked with :func:`marked_call` (``mark``)."""
        return self.register(f"call:{mark}", priority=priority)

    def add(self, name: str, fn: LoweringFn, priority: int = 0) -> None:
        self._items.append(Lowering(name, fn, priority))

    def __iter__(self) -> Iterator[Lowering]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)


@dataclasses.dataclass(frozen=True)
class Patch:
    """Replace ``target.attribute`` while tracing; ``replacement(original)`` builds the new value.

    ``target`` is an object or a dotted import path (``"flax.nnx.LayerNorm"``); a path whose module
    is not installed is skipped, so packs can patch optional dependencies.
    """

    target: Any
    attribute: str
    replacement: Callable[[Any], Any]

    def resolve(self) -> Any | None:
        if not isinstance(self.target, str):
            return self.target
        module_name, _, attr_path = self.target.partition(":")
        if not attr_path:
            parts = self.target.split(".")
            for i in range(len(parts), 0, -1):
                try:
                    obj = importlib.import_module(".".join(parts[:i]))
                except ImportError:
                    continue
                for p in parts[i:]:
                    obj = getattr(obj, p, None)
                    if obj is None:
                        return None
                return obj
            return None
        try:
            obj = importlib.import_module(module_name)
        except ImportError:
            return None
        for p in attr_path.split("."):
            obj = getattr(obj, p, None)
            if obj is None:
                return None
        return obj


# ---------------------------------------------------------------------------------------------
# Marked calls


@dataclasses.dataclass
class MarkedCall:
    """What :func:`marked_call` recorded: the mark, its static params and the operand shapes."""

    mark: str
    params: dict[str, Any]
    in_shapes: tuple[tuple[Any, ...], ...]
    #: The jaxpr the region traced to. Under ``grad`` the backward pass is a jit of the same name
    #: whose operands can have the very same shapes (square matrices), and the forward pass may
    #: gain residual outputs; only an equation whose body is this one is the call as recorded.
    body: Any = None


class _MarkRegistry:
    def __init__(self) -> None:
        self.calls: dict[str, MarkedCall] = {}
        self._ids = itertools.count()

    def new_token(self) -> str:
        return str(next(self._ids))


_ACTIVE_MARKS: contextvars.ContextVar[_MarkRegistry | None] = contextvars.ContextVar(
    "jax2onnx_marks", default=None
)


def exporting() -> bool:
    """True while jax2onnx traces a function for export (patches and marks are active)."""
    return _ACTIVE_MARKS.get() is not None


def marked_call(mark: str, fn: Callable[..., Any], *args: Any, **params: Any) -> Any:
    """Evaluate ``fn(*args, **params)`` as a region a lowering can recognise.

    Outside an export this is just ``fn(*args, **params)``. During an export the call is wrapped in
    a ``jax.jit`` named ``jax2onnx:<mark>:<token>``: JAX's transformations all understand ``jit``,
    so ``vmap``/``grad`` keep working. ``params`` (static Python values) are recorded under the
    token and reach the lowering as ``ctx.marked.params``; ``args`` must be arrays. Core only calls
    the ``call:<mark>`` lowering when the equation's operand shapes still equal the recorded ones
    (under ``vmap`` they gain a batch axis, and core lowers the body instead).
    """
    registry = _ACTIVE_MARKS.get()
    if registry is None:
        return fn(*args, **params)
    import jax
    import numpy as np

    token = registry.new_token()
    shapes = tuple(tuple(np.shape(a)) for a in args)
    call = MarkedCall(mark, dict(params), shapes)
    registry.calls[token] = call

    def region(*xs: Any) -> Any:
        return fn(*xs, **params)

    region.__name__ = f"{MARK_PREFIX}{mark}:{token}"
    region.__qualname__ = region.__name__
    jitted = jax.jit(region)
    # Tracing first records the body; the call below reuses JAX's cached trace of it.
    call.body = jitted.trace(*args).jaxpr
    return jitted(*args)


def parse_mark(jit_name: str) -> tuple[str, MarkedCall] | None:
    """``(mark, recorded call)`` for a jit name made by :func:`marked_call` in this export."""
    registry = _ACTIVE_MARKS.get()
    if registry is None or not jit_name.startswith(MARK_PREFIX):
        return None
    mark, _, token = jit_name[len(MARK_PREFIX) :].rpartition(":")
    call = registry.calls.get(token)
    if call is None or call.mark != mark:
        return None
    return mark, call


class marks_active:
    """Context manager that opens a fresh mark registry for one export."""

    def __enter__(self) -> _MarkRegistry:
        self._registry = _MarkRegistry()
        self._reset = _ACTIVE_MARKS.set(self._registry)
        return self._registry

    def __exit__(self, *exc: Any) -> None:
        _ACTIVE_MARKS.reset(self._reset)


def body_matches(call: MarkedCall, body: Any) -> bool:
    """True when ``body`` (a jit equation's jaxpr) is the region :func:`marked_call` traced."""
    if call.body is None:
        return False
    return body is call.body or str(body) == str(call.body)


def shapes_match(recorded: Sequence[Sequence[Any]], actual: Sequence[Sequence[Any]]) -> bool:
    if len(recorded) != len(actual):
        return False
    for r, a in zip(recorded, actual):
        if len(r) != len(a):
            return False
        for x, y in zip(r, a):
            if str(x) != str(y):
                return False
    return True


# ---------------------------------------------------------------------------------------------
# Packs made of several lowering modules


class PackModules:
    """Collects ``lowerings``/``components``/``patches`` from a pack's modules, importing each once.

    A pack's ``plugin.py`` lists its modules (one lowering family each) and forwards the hooks::

        _pack = PackModules("jax2onnx_lax", ["elementwise", "reductions", ...])

        @hookimpl
        def jax2onnx_lowerings():
            return _pack.lowerings()

    Each module may define ``lowerings`` (a :class:`Lowerings`), ``components`` (a list of
    :class:`jax2onnx.testing.Component`), ``patches`` (a list of :class:`Patch`) and
    ``callable_adapters`` (functions for the ``jax2onnx_callable_adapters`` hook).
    """

    def __init__(self, package: str, modules: Sequence[str]):
        self.package = package
        self.module_names = list(modules)
        self._modules: list[Any] | None = None

    def modules(self) -> list[Any]:
        if self._modules is None:
            self._modules = [importlib.import_module(f"{self.package}.{m}") for m in self.module_names]
        return self._modules

    def lowerings(self) -> list[Lowering]:
        return [low for m in self.modules() for low in getattr(m, "lowerings", ())]

    def components(self) -> list[Any]:
        return [c for m in self.modules() for c in getattr(m, "components", ())]

    def patches(self) -> list[Patch]:
        return [p for m in self.modules() for p in getattr(m, "patches", ())]

    def callable_adapters(self) -> list[Callable[[Any], Any]]:
        return [a for m in self.modules() for a in getattr(m, "callable_adapters", ())]
