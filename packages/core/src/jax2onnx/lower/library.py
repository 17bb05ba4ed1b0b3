"""Library calls: a pack's lowering of a library function, found in the trace without patching it.

A pack registers a lowering for a function at its public path
(``lowerings.register_library("jax.nn.relu", recognize=...)``, :meth:`jax2onnx.plugin.Lowerings.
register_library`). Nothing in the library is replaced, ever: the interpreter recognizes the
function's calls in the jaxpr from what the trace already carries.

* **Jitted functions** (``jax.nn.relu``, ``jax.nn.log_softmax``, most of ``jax.numpy``): calling one
  inside a trace leaves a ``jit``/``pjit`` equation whose body's ``debug_info.func_src_info`` names
  the function's code (``"relu at /…/jax/_src/nn/functions.py:71"``). The key is the code object's
  (file, first line, name), found by unwrapping the public object (``custom_jvp.fun``,
  ``__wrapped__``). ``flax.nnx.relu`` is the very same object, so one key covers every re-export.
* **Plain Python functions** (``jax.nn.gelu``, ``jax.nn.softmax``, flax's pools and attention):
  they leave no equation of their own, but every equation they emit carries a source traceback
  whose frames pass through the function. A maximal run of consecutive equations whose traceback
  holds the same call of the function (the same frames above it) is that call's region.

Either way the pack's ``recognize(site)`` reads the static parameters back from the region (the
body's ops, literals, avals: :class:`LibrarySite`) and returns them, or None to decline. Core then
**verifies**: it traces the original function again at the region's operand avals with those
parameters and accepts only when the result is the same jaxpr (and, for a jit, the same literal
operands). A wrong guess therefore only ever declines (the region's equations are lowered one by
one), it never exports something else. The lowering then runs with ``ctx.marked`` holding the
parameters, as for a :func:`jax2onnx.plugin.marked_call` region, and may itself decline (None).
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import re
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import numpy as np

from ..compat import (
    JIT_PRIMITIVES,
    ClosedJaxpr,
    call_body,
    is_key_dtype,
    is_literal,
    jit_src_info,
    region_jaxpr,
    sub_jaxprs,
    traceback_codes,
    traceback_frames,
)
from ..ir.builder import OpUnavailableError
from ..plugin import LIBRARY_PREFIX, Lowering, MarkedCall
from .context import LoweringContext

#: A function's key: (source file, first line of its code, name).
CodeKey = tuple[str, int, str]


@dataclasses.dataclass(frozen=True)
class _Resolved:
    path: str
    original: Any  # the public object (what the retrace calls)
    key: CodeKey
    jitted: bool
    last_line: int  # the code's last line (a traceback frame inside the function lies in range)
    qualname: str = ""  # the code's __qualname__ (JAX >= 0.7 names frames by it)


_CACHE_LOCK = threading.Lock()
#: path -> resolution of a library function (only successes: a library imported later is retried).
_RESOLVED: dict[str, _Resolved] = {}


def _import_target(path: str) -> Any | None:
    """The object at ``path`` (``"jax.nn.relu"`` or ``"module:attr.attr"``). Only libraries already
    imported are looked into, plus JAX's own modules (imported with jax2onnx anyway): no export
    imports a library just to look for its functions (a user who never imported flax cannot be
    calling ``flax.linen.avg_pool``)."""
    module_name, _, attr_path = path.partition(":")
    if attr_path:
        candidates = [(module_name, attr_path.split("."))]
    else:
        parts = path.split(".")
        candidates = [(".".join(parts[:i]), parts[i:]) for i in range(len(parts) - 1, 0, -1)]
    for module_name, attrs in candidates:
        module = sys.modules.get(module_name)
        if module is None and module_name.partition(".")[0] == "jax":
            try:
                module = importlib.import_module(module_name)
            except ImportError:
                module = None
        if module is None:
            continue
        obj: Any = module
        for attr in attrs:
            obj = getattr(obj, attr, None)
            if obj is None:
                break
        if obj is not None:
            return obj
    return None


def _unwrap(obj: Any) -> tuple[Any, bool]:
    """(the Python function under ``obj``, whether a ``jax.jit`` wraps it). Walks ``custom_jvp``/
    ``custom_vjp`` (``.fun``), ``jax.jit`` (``__wrapped__``) and ``functools.wraps`` chains."""
    jitted = False
    for _ in range(16):
        if hasattr(obj, "lower") and hasattr(obj, "trace") and hasattr(obj, "__wrapped__"):
            jitted = True  # a jax.jit-wrapped function (PjitFunction)
        inner = getattr(obj, "fun", None) if not inspect.isfunction(obj) else None
        if inner is None:
            inner = getattr(obj, "__wrapped__", None) if not inspect.isfunction(obj) else None
        if inner is None:
            break
        obj = inner
    if inspect.isfunction(obj):
        obj = inspect.unwrap(obj)
    return obj, jitted


def resolve(path: str) -> _Resolved | None:
    """The library function registered at ``path``, or None (its library is not imported, or it
    is not a Python function this JAX version has)."""
    with _CACHE_LOCK:
        hit = _RESOLVED.get(path)
    if hit is not None:
        return hit
    obj = _import_target(path)
    if obj is None:
        return None
    fn, jitted = _unwrap(obj)
    code = getattr(fn, "__code__", None)
    if code is None:
        return None
    lines = [line for _, _, line in code.co_lines() if line is not None]
    resolved = _Resolved(path, obj, (code.co_filename, code.co_firstlineno, code.co_name), jitted,
                         max(lines, default=code.co_firstlineno), getattr(code, "co_qualname", code.co_name))
    with _CACHE_LOCK:
        _RESOLVED[path] = resolved
    return resolved


def jit_key(eqn: Any) -> CodeKey | None:
    """The code key of a jit equation's function (from ``func_src_info``: ``"name at file:line"``)."""
    info = jit_src_info(eqn)
    if not info:
        return None
    name, sep, where = info.partition(" at ")
    file, colon, line = where.rpartition(":")
    if not sep or not colon or not line.isdigit():
        return None
    return (file, int(line), name)


@dataclasses.dataclass
class LibrarySite:
    """What ``recognize(site)`` reads the static parameters from.

    ``body``: the region as a ClosedJaxpr (a jit's body; for a plain function, its equations with
    the region's operands as inputs). ``operands``: the call's operands, literal or not, in order
    (a jit's operands in argument order; a plain function's region inputs in order of first use).
    ``avals_in``/``avals_out``: their avals and the results'. ``jitted``: which of the two it is.
    """

    path: str
    body: Any
    operands: list[Any]
    avals_in: list[Any]
    avals_out: list[Any]
    jitted: bool

    def literal(self, i: int) -> Any:
        """The Python value of operand ``i`` when it is a literal (a constant the caller passed,
        e.g. ``elu``'s ``alpha``), else None."""
        v = self.operands[i]
        return v.val if is_literal(v) else None

    def eqns(self, *names: str) -> list[Any]:
        """The body's equations (nested bodies included, in order) whose primitive is one of
        ``names`` (all of them without names)."""
        out: list[Any] = []

        def walk(jaxpr: Any) -> None:
            for e in jaxpr.eqns:
                if not names or e.primitive.name in names:
                    out.append(e)
                for sub in sub_jaxprs(e):
                    walk(sub.jaxpr)

        walk(self.body.jaxpr if hasattr(self.body, "jaxpr") else self.body)
        return out


def parse_recognized(result: Any, n_operands: int) -> tuple[dict[str, Any], tuple[int, ...]] | None:
    """``recognize``'s answer as (params, argument order): a dict, or ``(dict, order)`` where
    ``order`` lists the operand indices in the function's argument order."""
    if result is None:
        return None
    if isinstance(result, tuple):
        params, order = result
        order = tuple(int(i) for i in order)
    else:
        params, order = result, tuple(range(n_operands))
    if not isinstance(params, Mapping):
        raise TypeError(f"recognize must return a dict of parameters (or None), got {type(params).__name__}")
    return dict(params), order


def default_call(original: Callable[..., Any], arrays: Sequence[Any], params: Mapping[str, Any]) -> Any:
    return original(*arrays, **params)


def _spec(aval: Any) -> Any:
    return jax.ShapeDtypeStruct(aval.shape, aval.dtype, weak_type=bool(getattr(aval, "weak_type", False)))


def retrace(resolved: _Resolved, lowering: Lowering, avals: Sequence[Any], params: Mapping[str, Any],
            vmaps: int = 0) -> Any | None:
    """The ClosedJaxpr of the original function called on ``avals`` with ``params``, under
    ``vmaps`` nested ``jax.vmap`` over the leading axes (None when that call fails: the guess does
    not fit the function)."""
    call = lowering.library_call or default_call

    def fn(*xs: Any) -> Any:
        return call(resolved.original, xs, params)

    for _ in range(vmaps):
        fn = jax.vmap(fn)
    try:
        return jax.make_jaxpr(fn)(*[_spec(a) for a in avals])
    except Exception:  # noqa: BLE001 - any failure means "not this call": the region is lowered as is
        return None


def find_jit(closed: Any, key: CodeKey) -> Any | None:
    """The first jit equation (nested bodies included) whose function is ``key``."""
    jaxpr = closed.jaxpr if hasattr(closed, "jaxpr") else closed
    for e in jaxpr.eqns:
        if e.primitive.name in JIT_PRIMITIVES and jit_key(e) == key:
            return e
        for sub in sub_jaxprs(e):
            found = find_jit(sub, key)
            if found is not None:
                return found
    return None


#: numpy scalars in printed params (``axes=(np.int64(1),)``, as a batching rule writes them) read
#: as the Python numbers they equal (``axes=(1,)``, as a fresh trace writes them)
_NUMPY_SCALAR = re.compile(r"np\.(?:u?int|float|bool_?)\d*\(([^()]*)\)")


def same_text(a: Any, b: Any) -> bool:
    """Two jaxprs print the same, numpy scalars in params read as the numbers they are."""
    sa, sb = str(a), str(b)
    return sa == sb or _NUMPY_SCALAR.sub(r"\1", sa) == _NUMPY_SCALAR.sub(r"\1", sb)


def same_jit_call(retraced: Any, eqn: Any) -> bool:
    """``retraced`` (the jit equation of the verifying trace) computes what ``eqn`` computes: the
    same body and the same literal operands at the same places."""
    if len(retraced.invars) != len(eqn.invars) or len(retraced.outvars) != len(eqn.outvars):
        return False
    for a, b in zip(retraced.invars, eqn.invars):
        if is_literal(a) != is_literal(b):
            return False
        if is_literal(a) and (str(a) != str(b) or str(a.aval) != str(b.aval)):
            return False
    return same_text(call_body(retraced), call_body(eqn))


class LibraryMemo:
    """What recognizing and verifying a library call decided, kept for the trace's lifetime: an
    export of the same trace at another opset or target (``ExportProgram.with_options``) reads the
    decisions instead of re-running them (re-tracing the library function and comparing printed
    jaxprs was a quarter of lowering a testcase at three opsets). Nothing here depends on the opset:
    a decision is keyed on the equations and lowering it was made for, which are kept alive here, so
    an id is never that of a newer object."""

    def __init__(self) -> None:
        self._entries: dict[Any, tuple[tuple[Any, ...], Any]] = {}

    def remember(self, key: Any, owners: tuple[Any, ...], compute: Callable[[], Any]) -> Any:
        """``compute()`` once per ``key`` and the very objects ``owners`` (compared by identity)."""
        full = (key, tuple(id(o) for o in owners))
        entry = self._entries.get(full)
        if entry is None or any(a is not b for a, b in zip(entry[0], owners)):
            entry = (owners, compute())
            self._entries[full] = entry
        return entry[1]


class LibraryTable:
    """The library lowerings of one dispatch table, resolved: jitted ones by code key, plain ones
    by (file, name) for matching traceback frames."""

    def __init__(self, lowerings: Mapping[str, Lowering], memo: LibraryMemo | None = None):
        self.by_key: dict[CodeKey, tuple[_Resolved, Lowering]] = {}
        #: (file, function name) -> [(resolved, lowering)] of the plain (non-jitted) functions
        self.by_frame: dict[tuple[str, str], list[tuple[_Resolved, Lowering]]] = {}
        for name, lowering in lowerings.items():
            if not name.startswith(LIBRARY_PREFIX) or lowering.recognize is None:
                continue
            resolved = resolve(name[len(LIBRARY_PREFIX):])
            if resolved is None:
                continue
            if resolved.jitted:
                self.by_key[resolved.key] = (resolved, lowering)
            else:
                file, _, fname = resolved.key
                for frame_name in {fname, resolved.qualname}:
                    self.by_frame.setdefault((file, frame_name), []).append((resolved, lowering))
        #: the files of ``by_frame``: a frame elsewhere matches nothing (checked on code objects)
        self._frame_files = {file for file, _ in self.by_frame}
        #: the decisions of the trace this table lowers (shared by its exports at other opsets)
        self.memo = memo if memo is not None else LibraryMemo()

    def retrace_cached(self, resolved: _Resolved, lowering: Lowering, avals: Sequence[Any],
                       params: Mapping[str, Any], vmaps: int = 0) -> Any | None:
        shapes = [(str(a.shape), str(a.dtype), getattr(a, "weak_type", False)) for a in avals]
        cache_key = f"{resolved.path}|{params!r}|{shapes}|{vmaps}"
        return self.memo.remember(("retrace", cache_key), (lowering,),
                                  lambda: retrace(resolved, lowering, avals, params, vmaps))

    # -- plain functions: regions of consecutive equations -----------------------------------------
    def _may_match(self, code: Any) -> bool:
        """Whether a frame of ``code`` (one in a file of ``by_frame``) may be a key of ``by_frame``:
        its function name is the code's qualified name or plain name, depending on JAX's version,
        so both are tried."""
        return ((code.co_filename, code.co_name) in self.by_frame
                or (code.co_filename, getattr(code, "co_qualname", code.co_name)) in self.by_frame)

    def _frames(self, eqn: Any) -> list[tuple[str, str, int, int]]:
        """``eqn``'s traceback frames (innermost first), or ``[]`` when no frame can match: read
        from the code objects first, as most equations have no registered function on the stack;
        building the frames resolves a line per frame and was most of the lowering of a large
        graph. The frames are remembered with the trace's decisions: the exports at other
        opsets and the region scan ask again for the same equation."""
        codes = traceback_codes(eqn)
        if codes is not None:
            files = self._frame_files
            if files.isdisjoint([code.co_filename for code in codes]):
                return []
            if not any(self._may_match(code) for code in codes if code.co_filename in files):
                return []
        return self.memo.remember("traceback_frames", (eqn,), lambda: traceback_frames(eqn))

    def frame_call(self, eqn: Any, excluded: frozenset[Any]) -> tuple[Any, _Resolved, Lowering] | None:
        """The outermost call of a registered plain function in ``eqn``'s traceback that is not in
        ``excluded``: (call identity, resolved, lowering). The identity is the frames above the
        function's own (the call site, its callers) plus the function: equal for every equation
        the same call emits."""
        if not self.by_frame:
            return None
        frames = self._frames(eqn)  # innermost first
        for i in range(len(frames) - 1, -1, -1):
            file, fname, line, _ = frames[i]
            for resolved, lowering in self.by_frame.get((file, fname), ()):
                if not resolved.key[1] <= line <= resolved.last_line:
                    continue
                identity = (tuple(frames[i + 1:]), file, resolved.key[2])
                if identity not in excluded:
                    return identity, resolved, lowering
        return None


# ---------------------------------------------------------------------------------------------
# Lowering a recognized call (the interpreter's side)


def _guarded(avals: Sequence[Any]) -> bool:
    """Fused ops are real-valued and move no PRNG keys: such regions keep their equations."""
    for aval in avals:
        dtype = getattr(aval, "dtype", None)
        if dtype is None or is_key_dtype(dtype) or np.dtype(dtype).kind == "c":
            return True
    return False


def _recognize(lowering: Lowering, site: LibrarySite) -> Any:
    """The recognizer's answer; one that fails on a region it did not expect (the backward pass of
    a ``grad``, a jit of the same function with other operands) declines: the equations are then
    lowered one by one, which is always right."""
    try:
        return lowering.recognize(site)  # type: ignore[misc]
    except Exception:  # noqa: BLE001
        return None


def _run(interp: Any, lowering: Lowering, scope: Any, eqn: Any, call: MarkedCall, arrays: Sequence[Any],
         ins: Sequence[Any]) -> list[Any] | None:
    ctx = LoweringContext(interp, scope, eqn, marked=call, avals_in=[a.aval for a in arrays],
                          avals_out=[v.aval for v in eqn.outvars])
    try:
        return interp._call(lowering, ctx, list(ins), allow_decline=True)
    except OpUnavailableError:
        return None  # the fused op is newer than the export's opset: the equations decompose it


#: How many nested ``jax.vmap`` an elementwise function's call is tried under.
_MAX_VMAPS = 2


def lower_jit_call(interp: Any, table: LibraryTable, scope: Any, eqn: Any, ins: Sequence[Any]) -> list[Any] | None:
    """The pack's lowering of a jit equation that is a registered library function's call, or None
    (not one, not recognized, not verified, or declined: the body is lowered instead)."""
    key = jit_key(eqn)
    entry = table.by_key.get(key) if key is not None else None
    if entry is None:
        return None
    resolved, lowering = entry
    verified = table.memo.remember(("jit", key), (lowering, eqn), lambda: _verified_jit_call(table, resolved, lowering, eqn))
    if verified is None:
        return None
    picked, call = verified
    return _run(interp, lowering, scope, eqn, call, [eqn.invars[i] for i in picked], [ins[i] for i in picked])


def _verified_jit_call(table: LibraryTable, resolved: _Resolved, lowering: Lowering, eqn: Any
                       ) -> tuple[list[int], MarkedCall] | None:
    """The operands the lowering takes and its marked call, when the recognizer names the call and
    re-tracing the library function with its parameters gives ``eqn``'s body; else None."""
    if _guarded([v.aval for v in (*eqn.invars, *eqn.outvars)]):
        return None
    body = call_body(eqn)
    site = LibrarySite(resolved.path, body, list(eqn.invars), [v.aval for v in eqn.invars],
                       [v.aval for v in eqn.outvars], jitted=True)
    parsed = parse_recognized(_recognize(lowering, site), len(eqn.invars))
    if parsed is None:
        return None
    params, order = parsed
    picked = [i for i in order if not is_literal(eqn.invars[i])]
    arrays = [eqn.invars[i] for i in picked]
    # An elementwise function's call inside jax.vmap: JAX batches its body into other equations
    # than a fresh trace at the batched shape writes, so it is also tried as the vmapped function.
    rank = min((len(a.aval.shape) for a in arrays), default=0)
    for vmaps in range(min(rank, _MAX_VMAPS) + 1 if lowering.elementwise else 1):
        retraced = table.retrace_cached(resolved, lowering, [a.aval for a in arrays], params, vmaps)
        found = find_jit(retraced, resolved.key) if retraced is not None else None
        if found is not None and same_jit_call(found, eqn):
            break
    else:
        return None
    return picked, MarkedCall(resolved.path, params, tuple(tuple(a.aval.shape) for a in arrays), body)


@dataclasses.dataclass
class _Primitive:
    name: str


@dataclasses.dataclass
class RegionEqn:
    """Stands for a plain library function's region where a lowering expects an equation (its
    context's ``eqn``, the nodes' origin): operands in argument order, the region's results."""

    primitive: _Primitive
    invars: list[Any]
    outvars: list[Any]
    source_info: Any
    params: dict[str, Any] = dataclasses.field(default_factory=dict)


def region_inputs(eqns: Sequence[Any]) -> list[Any]:
    """The variables a run of equations reads but does not define, in order of first use."""
    defined: set[Any] = set()
    seen: set[Any] = set()
    out: list[Any] = []
    for e in eqns:
        for v in e.invars:
            if is_literal(v) or v in defined or v in seen:
                continue
            seen.add(v)
            out.append(v)
        defined.update(e.outvars)
    return out


def lower_region(interp: Any, table: LibraryTable, scope: Any, found: tuple[Any, _Resolved, Lowering],
                 eqns: Sequence[Any], live_after: set[Any], read: Callable[[Any], Any]
                 ) -> tuple[RegionEqn, list[Any]] | None:
    """Lower the run ``eqns`` (one call of a plain library function) with the pack's lowering:
    (the region's stand-in equation, its results), or None to lower the equations one by one.
    ``live_after``: the variables read after the run (its results are those it defines)."""
    _identity, resolved, lowering = found
    outputs = [v for e in eqns for v in e.outvars if v in live_after]
    verified = table.memo.remember(("region", resolved.path, len(eqns)), (lowering, *eqns, *outputs),
                                   lambda: _verified_region(table, resolved, lowering, eqns, outputs))
    if verified is None:
        return None
    arrays, results, call = verified
    stand_in = RegionEqn(_Primitive(lowering.name), arrays, results, getattr(eqns[0], "source_info", None))
    outs = _run(interp, lowering, scope, stand_in, call, arrays, [read(a) for a in arrays])
    return None if outs is None else (stand_in, outs)


def _verified_region(table: LibraryTable, resolved: _Resolved, lowering: Lowering, eqns: Sequence[Any],
                     outputs: list[Any]) -> tuple[list[Any], list[Any], MarkedCall] | None:
    """The region's operands in the function's argument order, its results and the marked call,
    when the recognizer names the call and re-tracing the function gives exactly ``eqns`` with
    ``outputs`` (its variables read after it); else None."""
    inputs = region_inputs(eqns)
    if not outputs or _guarded([v.aval for v in (*inputs, *outputs)]):
        return None
    body = ClosedJaxpr(region_jaxpr(inputs, outputs, list(eqns)), ())
    site = LibrarySite(resolved.path, body, inputs, [v.aval for v in inputs], [v.aval for v in outputs], jitted=False)
    parsed = parse_recognized(_recognize(lowering, site), len(inputs))
    if parsed is None:
        return None
    params, order = parsed
    if sorted(order) != list(range(len(inputs))):
        return None
    arrays = [inputs[i] for i in order]
    retraced = table.retrace_cached(resolved, lowering, [a.aval for a in arrays], params)
    if retraced is None or retraced.consts or len(retraced.jaxpr.eqns) != len(eqns):
        return None
    # The function's results, as the region's variables: each is the same output of the same
    # equation in both (if the texts match below, the equations are the same ones).
    position = {v: (k, m) for k, e in enumerate(retraced.jaxpr.eqns) for m, v in enumerate(e.outvars)}
    results = []
    for v in retraced.jaxpr.outvars:
        if is_literal(v) or v not in position:
            return None
        k, m = position[v]
        results.append(eqns[k].outvars[m])
    if set(results) != set(outputs) or len(set(results)) != len(results):
        return None
    if not same_text(region_jaxpr(arrays, results, list(eqns)), retraced.jaxpr):
        return None
    return arrays, results, MarkedCall(resolved.path, params, tuple(tuple(a.aval.shape) for a in arrays), body)


__all__ = ["LibrarySite", "LibraryTable", "RegionEqn", "lower_jit_call", "lower_region", "resolve"]
