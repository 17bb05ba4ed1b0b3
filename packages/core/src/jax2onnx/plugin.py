"""The lowering API packs write against: :class:`Lowering`, :class:`Lowerings` (``register``,
``register_library``), :class:`ModulePatch`, :func:`marked_call`.

A lowering is a plain function ``fn(ctx, *inputs) -> Value | Sequence[Value] | None``: ``ctx`` is a
:class:`jax2onnx.lower.context.LoweringContext` (``ctx.op.Add(a, b)``, ``ctx.params``, ``ctx.avals_in``,
``ctx.const(...)``), ``inputs`` are the ONNX values of the equation's operands. Returning ``None``
from a marked-call lowering means "decline": core then lowers the call's body instead.
"""

from __future__ import annotations

import contextvars
import dataclasses
import importlib
import itertools
import pkgutil
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import numpy as np
import pluggy

from .compat import is_dim_expr

#: Marks a pack's hook implementations (pluggy project ``jax2onnx``; the hooks are specified in
#: ``jax2onnx.lower.hookspecs``). It lives here, with the rest of the pack author's API, so that
#: this module needs nothing of the lowering machinery; ``jax2onnx.hookimpl`` is the same marker.
hookimpl = pluggy.HookimplMarker("jax2onnx")

LoweringFn = Callable[..., Any]

#: Prefix of the ``jax.jit`` name that :func:`marked_call` gives a region.
MARK_PREFIX = "jax2onnx:"

#: Prefix of a library function's lowering in the dispatch table (``"library:jax.nn.relu"``).
LIBRARY_PREFIX = "library:"


@dataclasses.dataclass(frozen=True)
class Kernels:
    """A ``dtypes=`` facet that defers to the target onnxruntime: the dtypes ``op`` (every op of a
    tuple) has kernels for at the export's opset (:mod:`jax2onnx.ir.runtime`), less ``without``
    (what JAX's semantics compute elsewhere: XLA sums and computes float16/bfloat16 math in
    float32), plus ``also`` (dtypes the lowering handles itself: uint64 through an order key).
    ``dtypes="Max"`` is ``Kernels("Max")``."""

    op: str | tuple[str, ...]
    without: frozenset[Any] = frozenset()
    also: frozenset[Any] = frozenset()

    def resolve(self, runtime: Any, opset: int) -> frozenset[Any]:
        """The dtypes on ``runtime`` (a :class:`jax2onnx.ir.runtime.Runtime`) at ``opset``."""
        ops = (self.op,) if isinstance(self.op, str) else self.op
        common = frozenset.intersection(*(runtime.dtypes(op, opset) for op in ops))
        return (common - {np.dtype(d) for d in self.without}) | {np.dtype(d) for d in self.also}


@dataclasses.dataclass(frozen=True)
class Lowering:
    """Maps one primitive name (or ``"call:<mark>"``) to the function that emits ONNX for it.

    Facets the interpreter applies, so a lowering states them instead of re-implementing them:

    * ``dtypes``: the operand dtypes the lowering computes in. Name the ONNX op it emits
      (``dtypes="Max"``) and the dtypes are those the target onnxruntime has kernels for at the
      export's opset (:mod:`jax2onnx.ir.runtime`); a set of dtypes states what JAX's semantics ask
      for instead (float16 math computed in float32). An operand of another dtype is cast to the
      narrowest listed dtype that holds it exactly (int8 → int32, float16 → float32, see
      :func:`jax2onnx.dtypes.carrier`); the lowering sees that dtype in
      ``ctx.avals_in``/``ctx.avals_out`` and results are cast back to JAX's dtype.
    * ``complex``: the lowering to use when an operand or a result is complex (complex values travel
      as ``(..., 2)`` real pairs); without it the lowering itself receives the pairs (data movement
      such as reshape or gather handles them as they are; arithmetic that does not should register a
      ``complex=`` variant that raises a clear error).
    * ``keys``: the lowering takes typed PRNG keys as their uint32 key data (``key<fry>[3]`` as
      ``uint32[3, 2]``), as the ``random_*`` primitives do. Without it an equation on keys (``slice``,
      ``reshape``, ``select_n`` ... moving keys around) is lowered once per word of the key data.
    """

    name: str
    fn: LoweringFn
    priority: int = 0
    pack: str = ""  # filled in by the registry from the entry point's distribution
    dtypes: frozenset[Any] | Kernels | None = None
    complex: LoweringFn | None = None
    keys: bool = False
    #: a library function's lowering (:meth:`Lowerings.register_library`): ``recognize(site)``
    #: reads its static parameters back from the traced region, ``library_call(original, arrays,
    #: params)`` calls the function the way ``recognize``'s parameters mean (verifying retrace)
    recognize: Callable[[Any], Any] | None = None
    library_call: Callable[..., Any] | None = None
    #: the library function acts on each element alone (see :meth:`Lowerings.register_library`)
    elementwise: bool = False

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

    def register(
        self,
        *names: str,
        priority: int = 0,
        dtypes: Iterable[Any] | str | Kernels | None = None,
        complex: LoweringFn | None = None,
        keys: bool = False,
    ) -> Callable[[LoweringFn], LoweringFn]:
        """Register the decorated function for each primitive in ``names`` (facets: see :class:`Lowering`)."""
        kinds: frozenset[Any] | Kernels | None
        if dtypes is None or isinstance(dtypes, Kernels):
            kinds = dtypes
        elif isinstance(dtypes, str):
            kinds = Kernels(dtypes)
        else:
            kinds = frozenset(np.dtype(d) for d in dtypes)

        def deco(fn: LoweringFn) -> LoweringFn:
            for name in names:
                self._items.append(Lowering(name, fn, priority, dtypes=kinds, complex=complex, keys=keys))
            return fn

        return deco

    def register_call(self, mark: str, *, priority: int = 0) -> Callable[[LoweringFn], LoweringFn]:
        """Register the lowering of a region marked with :func:`marked_call` (``mark``)."""
        return self.register(f"call:{mark}", priority=priority)

    def register_library(
        self,
        path: str,
        *,
        recognize: Callable[[Any], Any],
        call: Callable[..., Any] | None = None,
        priority: int = 0,
        elementwise: bool = False,
    ) -> Callable[[LoweringFn], LoweringFn]:
        """Register the decorated lowering for the library function at ``path`` (``"jax.nn.relu"``,
        or ``"module:attr"`` for a private one), recognized in the trace with no patch of the
        library (:mod:`jax2onnx.lower.library`): a jitted function by its ``jit`` equation, a
        plain one by the equations its call emits (their traceback passes through it).
        ``flax.nnx.relu`` being the same object as ``jax.nn.relu``, one registration covers both.

        ``recognize(site)`` gets a :class:`jax2onnx.lower.library.LibrarySite` (the region's
        ``body``, ``operands``, ``avals_in``/``avals_out``, ``literal(i)``, ``eqns(*primitives)``)
        and returns the static parameters as a dict (``{"axis": 1}``), ``(params, order)`` with
        ``order`` the operand indices in argument order (a plain function's operands come in order
        of first use), or None to leave the region to its equations. Core verifies the answer by
        tracing ``call(original, arrays, params)`` (default ``original(*arrays, **params)``; the
        arrays are the non-literal operands, in argument order) at the region's avals: only the
        same jaxpr is accepted. The lowering then gets those arrays, ``ctx.avals_in`` theirs, and
        ``ctx.marked.params`` the parameters; it may decline (return None) as a marked-call
        lowering does.

        ``elementwise=True``: the function acts on each element alone (an activation), so the
        lowering applied to batched operands is the function under ``jax.vmap``. A jitted call
        inside ``jax.vmap`` (whose batched body JAX writes differently from a fresh trace at the
        batched shape) is then also accepted when it retraces as the vmapped function."""

        def deco(fn: LoweringFn) -> LoweringFn:
            self._items.append(Lowering(f"{LIBRARY_PREFIX}{path}", fn, priority, recognize=recognize,
                                        library_call=call, elementwise=elementwise))
            return fn

        return deco

    def add(self, name: str, fn: LoweringFn, priority: int = 0, *, dtypes: Iterable[Any] | str | Kernels | None = None,
            complex: LoweringFn | None = None) -> None:
        self.register(name, priority=priority, dtypes=dtypes, complex=complex)(fn)

    def __iter__(self) -> Iterator[Lowering]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)


class Patch:
    """Gone since 0.18 (issue #33): an export replaces no library function, not even while it runs.

    Constructing one raises a ``TypeError`` that names the replacements, so a pack written against the
    earlier API fails to load with the fix in its message (``jax2onnx packs`` shows it):
    :meth:`Lowerings.register_library` for a library *function* (found in the trace, nothing
    replaced), :class:`ModulePatch` for a method of the *instances* being exported."""

    def __init__(self, target: Any = None, attribute: str = "", *args: Any, **kwargs: Any) -> None:
        raise TypeError(
            f"jax2onnx.plugin.Patch({target!r}, {attribute!r}): jax2onnx no longer replaces library attributes "
            "(an export changes nothing outside itself). For a library function register a lowering that finds it "
            "in the trace: lowerings.register_library('module.function', recognize=...); for a layer's method use "
            "ModulePatch, which overrides the exported instances only. See docs/guide/plugin-pack.md.")


@dataclasses.dataclass(frozen=True)
class ModulePatch:
    """Override ``attribute`` of the *instances* of class ``target`` that the exported callable
    reaches, for the duration of that export only; ``replacement(original)`` builds the new method
    (``original`` is the class's own function; the new one takes ``self`` first, as it does).

    The class itself is never changed (:mod:`jax2onnx.lower.scoped`): each instance found gets a
    cached subclass as its ``__class__`` while the export runs, and its own class back when it ends.
    ``target`` is a class or a dotted path (``"flax.nnx.Linear"``); a path whose module is not
    imported yet is skipped (no instance of it can exist), so packs can name optional libraries.

    ``interceptor``: for a library that builds its module instances during the call (Linen's
    ``setup``/``@compact`` submodules), where no instance exists to walk to beforehand: a function
    ``interceptor(lookup) -> context manager`` that routes the library's own method calls, in the
    exporting thread only (``flax.linen.intercept_methods``), to ``lookup(module, method_name,
    function)`` (``function``: the class-level function being run, if the library tells; the
    answer is the export's replacement bound to the module, or ``None`` for the module's own code).
    """

    target: Any
    attribute: str
    replacement: Callable[[Any], Any]
    interceptor: Callable[[Callable[..., Any]], Any] | None = None
    #: ``holders(obj) -> [(holder, slot), ...]``: places where an object reachable from the exported
    #: callable records a class its copies are later built from (an NNX ``GraphDef``'s node types,
    #: ``nnx.merge``d inside the trace); those slots hold the overriding subclass for the export.
    holders: Callable[[Any], Iterable[tuple[Any, str]]] | None = None

    def resolve(self) -> type | None:
        """The class, found among modules already imported: a library nobody imported has no
        instances to override, so an export never imports one for this (a pack may narrow it
        further, e.g. to one Keras backend)."""
        import sys

        if isinstance(self.target, type):
            return self.target
        module_name, _, path = str(self.target).partition(":")
        if not path:
            parts = module_name.split(".")
            for i in range(len(parts) - 1, 0, -1):
                if ".".join(parts[:i]) in sys.modules:
                    module_name, path = ".".join(parts[:i]), ".".join(parts[i:])
                    break
            else:
                return None
        obj = sys.modules.get(module_name)
        for p in path.split("."):
            obj = getattr(obj, p, None) if obj is not None else None
        return obj if isinstance(obj, type) else None


# ---------------------------------------------------------------------------------------------
# Argument checks for patch replacements (trace time)


def is_array(x: Any) -> bool:
    """A JAX array, a tracer or a numpy array: something ``jax.jit`` takes as an operand (not a
    Python scalar, which a replacement treats as a static parameter)."""
    import jax

    return isinstance(x, (jax.Array, np.ndarray)) or hasattr(x, "aval")


def is_symbolic_dim(d: Any) -> bool:
    """A shape-polymorphic dimension (``B``, ``2*B``) as found in traced shapes and avals. Any other
    value (a float, an array, None) is not one, so a replacement may test its arguments with it."""
    return is_dim_expr(d)


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
    def __init__(self, adapt: Callable[[Any], Callable[..., Any] | None] | None = None) -> None:
        self.calls: dict[str, MarkedCall] = {}
        self._ids = itertools.count()
        #: the export's ``jax2onnx_adapt_callable`` (its plugin registry's ``adapt``)
        self.adapt = adapt

    def new_token(self) -> str:
        return str(next(self._ids))


_ACTIVE_MARKS: contextvars.ContextVar[_MarkRegistry | None] = contextvars.ContextVar(
    "jax2onnx_marks", default=None
)


def exporting() -> bool:
    """True while jax2onnx traces a function for export (patches and marks are active)."""
    return _ACTIVE_MARKS.get() is not None


def adapt_for_export(obj: Any) -> Callable[..., Any] | None:
    """The running export's traceable version of ``obj`` from the packs' ``jax2onnx_adapt_callable``
    (an NNX module with state), or ``None`` (no pack adapts it, or no export is running). Read from
    the export in progress, so lowering-time code needs no global plugin registry."""
    marks = _ACTIVE_MARKS.get()
    if marks is None or marks.adapt is None:
        return None
    return marks.adapt(obj)


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
    """Context manager that opens a fresh mark registry for one export; ``adapt``: the export's
    plugin registry's ``adapt`` (what :func:`adapt_for_export` answers with). ``resume``: the
    registry a trace recorded its marked calls in, made active again for lowering that trace."""

    def __init__(
        self, adapt: Callable[[Any], Callable[..., Any] | None] | None = None, *, resume: _MarkRegistry | None = None
    ) -> None:
        self._adapt = adapt
        self._resume = resume

    def __enter__(self) -> _MarkRegistry:
        self._registry = self._resume if self._resume is not None else _MarkRegistry(self._adapt)
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
# Ready-made models a pack offers to the command line


@dataclasses.dataclass(frozen=True)
class Demo:
    """A ready-made model a pack offers to the CLI (``jax2onnx demo NAME``; ``jax2onnx quickstart``
    runs the one named ``quickstart``): ``target`` is ``"module:function"``, a function taking the
    output path and returning an exit status. Imported only when run."""

    name: str
    target: str
    help: str = ""

    def run(self, output: str | None) -> int:
        module, _, attr = self.target.partition(":")
        fn = getattr(importlib.import_module(module), attr)
        return int(fn(output) if output is not None else fn())


# ---------------------------------------------------------------------------------------------
# Packs made of several lowering modules


class PackModules:
    """A pack as one plugin object: it implements core's hooks from the pack's modules.

    A pack's ``plugin.py`` is one statement, and its entry point names the object::

        plugin = PackModules("jax2onnx_mypack", ["elementwise", "reductions", ...], plugin_api="1.0")

        # pyproject.toml
        [project.entry-points.jax2onnx]
        mypack = "jax2onnx_mypack.plugin:plugin"

    ``library_modules``: the model libraries the pack serves (``["keras"]``), whose frames (like the
    pack's own) are never blamed as the user's line in error messages. ``demos``: :class:`Demo`
    models the command line offers.

    Each module (one lowering family) may define ``lowerings`` (a :class:`Lowerings`), ``patches``
    (a list of :class:`ModulePatch`) and ``callable_adapters`` (functions ``obj -> traceable | None``).
    Modules are imported on the first hook call, once.

    Testcases live apart, in the pack's ``testcases`` subpackage (``jax2onnx_mypack.testcases``):
    every public module there (name not starting with ``_``) may define ``components`` (a list of
    :class:`jax2onnx.testing.Component`). They are imported only when the ``jax2onnx_components``
    hook is called, which only the pytest plugin and the coverage command do, so an export never
    imports testcase code. (A ``components`` list in a listed module is still read, for packs
    written before the split; it is then imported with the lowerings.)
    """

    #: Module attributes the hooks read; a module-level name close to one of these is reported.
    HOOK_ATTRIBUTES = ("lowerings", "components", "patches", "callable_adapters")

    #: The subpackage of the pack whose modules hold its testcases (``components``).
    TESTCASES = "testcases"

    def __init__(
        self,
        package: str,
        modules: Sequence[str],
        *,
        plugin_api: str | None = None,
        library_modules: Sequence[str] = (),
        demos: Sequence[Demo] = (),
    ):
        self.package = package
        self.module_names = list(modules)
        #: the model libraries the pack serves (``"keras"``): their frames are not the user's line
        self.library_modules = [package.partition(".")[0], *library_modules]
        self.demos = list(demos)
        self._modules: list[Any] | None = None
        self._testcase_modules: list[Any] | None = None
        if plugin_api is not None:  # the plugin API the pack was written for (see jax2onnx.lower.plugin_api)
            self.JAX2ONNX_PLUGIN_API = plugin_api

    def __repr__(self) -> str:
        return f"PackModules({self.package!r})"

    def modules(self) -> list[Any]:
        if self._modules is None:
            self._modules = [importlib.import_module(f"{self.package}.{m}") for m in self.module_names]
        return self._modules

    def testcase_modules(self) -> list[Any]:
        """The public modules of the pack's ``testcases`` subpackage (none when it has none), imported
        here on first use: only the ``jax2onnx_components`` hook asks for them."""
        if self._testcase_modules is None:
            name = f"{self.package}.{self.TESTCASES}"
            try:
                package = importlib.import_module(name)
            except ModuleNotFoundError as exc:
                if exc.name != name:  # the subpackage exists but something it imports is missing
                    raise
                package = None
            found = sorted(info.name for info in pkgutil.iter_modules(getattr(package, "__path__", ())))
            self._testcase_modules = [importlib.import_module(f"{name}.{m}") for m in found if not m.startswith("_")]
        return self._testcase_modules

    def _gather(self, attribute: str) -> list[Any]:
        return [item for m in self.modules() for item in getattr(m, attribute, ())]

    @hookimpl
    def jax2onnx_lowerings(self) -> list[Lowering]:
        return self._gather("lowerings")

    @hookimpl
    def jax2onnx_components(self) -> list[Any]:
        own = [c for m in self.testcase_modules() for c in getattr(m, "components", ())]
        return self._gather("components") + own

    @hookimpl
    def jax2onnx_patches(self) -> list[ModulePatch]:
        return self._gather("patches")

    @hookimpl
    def jax2onnx_library_modules(self) -> list[str]:
        return list(self.library_modules)

    @hookimpl
    def jax2onnx_demos(self) -> list[Demo]:
        return list(self.demos)

    @hookimpl
    def jax2onnx_adapt_callable(self, fn: Any) -> Any | None:
        for adapter in self._gather("callable_adapters"):
            adapted = adapter(fn)
            if adapted is not None:
                return adapted
        return None

    def misspelled_attributes(self) -> list[str]:
        """``module.name`` entries that look like a hook attribute but are not one (``lowering``)."""
        import difflib

        out = []
        for m in self.modules():
            for attr, value in vars(m).items():
                if attr in self.HOOK_ATTRIBUTES or not attr.islower() or not isinstance(value, (Lowerings, list, tuple)):
                    continue
                if difflib.get_close_matches(attr, self.HOOK_ATTRIBUTES, n=1, cutoff=0.85):
                    out.append(f"{m.__name__}.{attr}")
        return out
