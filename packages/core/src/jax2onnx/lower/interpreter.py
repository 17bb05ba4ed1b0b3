"""One linear walk over a ClosedJaxpr, dispatching each equation to its lowering."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import onnx_ir as ir

from ..compat import (
    CUSTOM_JVP_PRIMITIVES,
    CUSTOM_VJP_PRIMITIVES,
    INLINE_CALL_PRIMITIVES,
    JIT_PRIMITIVES,
    call_body,
    host_copy,
    is_device_resident,
    is_dropvar,
    is_key_dtype,
    is_literal,
    key_data,
    key_data_shape,
    make_jaxpr,
    sub_jaxprs,
    trace_flags,
    user_location,
)
from ..dtypes import carrier
from ..errors import Jax2OnnxError, LoweringError, UnsupportedPrimitiveError
from ..ir.builder import OpUnavailableError, Scope, set_aval, value_dtype
from ..plugin import Kernels, Lowering, body_matches, parse_mark, shapes_match
from ..targets.base import default_target
from . import library
from .context import LoweringContext
from .origin import record_origin


class Interpreter:
    """Lowers jaxprs into scopes using a dispatch table ``name -> Lowering``."""

    def __init__(
        self,
        lowerings: Mapping[str, Lowering],
        installed_packs: list[str],
        pack_hint: Callable[[str], str | None] = lambda primitive: None,
        options: Any = None,
        library_memo: library.LibraryMemo | None = None,
    ):
        self.lowerings = lowerings
        self.installed_packs = installed_packs
        #: which pack a lowering of an unsupported primitive belongs in (the registry's ``pack_hint``)
        self.pack_hint = pack_hint
        #: the export's checked ``ExportOptions`` (None outside an export): ``ctx.options``
        self.options = options
        #: the export's target (``options.target``; outside an export the default target)
        self.target = getattr(options, "target", None) or default_target()
        #: its kernel table (``Target.runtime()``): the ``dtypes="<Op>"`` facets and
        #: ``ctx.kernel_dtypes`` ask it
        self.runtime = self.target.runtime()
        self._library: library.LibraryTable | None = None
        #: the library-call decisions of the trace being lowered (``Traced.library_memo``)
        self._library_memo = library_memo

    def trace_function(self, eqn: Any, fn: Callable[..., Any], specs: Sequence[Any]) -> Any:
        """``fn`` traced on ``specs`` (a ClosedJaxpr) for lowering ``eqn`` as a JAX function. An
        export of the same trace at another opset or target lowers the same equation again and
        traces the same function: the jaxpr is remembered with the trace's library decisions
        (re-tracing ``eig``'s or a sampler's JAX implementation was a third of exporting such a
        testcase at three opsets). Only a plain Python function is remembered, keyed on its code,
        the specs and the flags tracing reads (``compat.trace_flags``), with the equation and every value its closure and defaults hold
        compared by identity (a lowering closing over its context or the opset traces anew)."""
        code = getattr(fn, "__code__", None)
        if self._library_memo is None or eqn is None or code is None:
            return make_jaxpr(fn, list(specs))[0]
        try:
            held = tuple(c.cell_contents for c in fn.__closure__ or ())
        except ValueError:  # a closure cell not filled yet: nothing stable to key on
            return make_jaxpr(fn, list(specs))[0]
        held += tuple(fn.__defaults__ or ()) + tuple((fn.__kwdefaults__ or {}).items())
        key = ("trace_function", code, tuple((tuple(s.shape), str(s.dtype)) for s in specs), trace_flags())
        return self._library_memo.remember(key, (eqn, *held), lambda: make_jaxpr(fn, list(specs))[0])

    @property
    def library(self) -> library.LibraryTable:
        """The packs' library-function lowerings, resolved on first use (:mod:`.library`)."""
        if self._library is None:
            self._library = library.LibraryTable(self.lowerings, self._library_memo)
        return self._library

    def lower_jaxpr(self, scope: Scope, closed: Any, inputs: Sequence[ir.Value]) -> list[ir.Value]:
        jaxpr = closed.jaxpr if hasattr(closed, "jaxpr") else closed
        consts = closed.consts if hasattr(closed, "consts") else ()
        env: dict[Any, ir.Value] = {}
        for var, c in zip(jaxpr.constvars, consts):
            if is_device_resident(c) and np.dtype(c.dtype) == _np_dtype(var.aval) and np.dtype(c.dtype).kind != "c":
                env[var] = scope.device_const(c)  # gathered when written, not held whole now
            else:
                env[var] = scope.const(_to_numpy(c, var.aval))
        if len(jaxpr.invars) != len(inputs):
            raise LoweringError(f"jaxpr expects {len(jaxpr.invars)} inputs, got {len(inputs)}")
        for var, v in zip(jaxpr.invars, inputs):
            env[var] = v

        def read(a: Any) -> ir.Value:
            if is_literal(a):
                return scope.const(_to_numpy(a.val, a.aval))
            return env[a]

        eqns = list(jaxpr.eqns)
        regions = bool(self.library.by_frame)
        last_use = _last_uses(jaxpr) if regions else {}
        excluded: set[Any] = set()  # calls of plain library functions whose lowering declined
        i = 0
        while i < len(eqns):
            found = self.library.frame_call(eqns[i], frozenset(excluded)) if regions else None
            if found is not None:
                end = i + 1
                while end < len(eqns) and _same_call(self.library.frame_call(eqns[end], frozenset(excluded)), found):
                    end += 1
                live = {v for e in eqns[i:end] for v in e.outvars if last_use.get(v, -1) >= end}
                first_new = len(scope.nodes)
                lowered = self._lower_region(scope, found, eqns[i:end], live, read)
                if lowered is None:
                    excluded.add(found[0])  # its equations (and calls nested in it) go one by one
                    continue
                stand_in, outs = lowered
                record_origin(scope.nodes[first_new:], stand_in, self.lowerings[stand_in.primitive.name].pack)
                for var, val in zip(stand_in.outvars, self._finish_outputs(scope, stand_in, outs)):
                    env[var] = val
                i = end
                continue
            eqn = eqns[i]
            ins = [read(a) for a in eqn.invars]
            outs = self.lower_eqn(scope, eqn, ins)
            for var, val in zip(eqn.outvars, outs):
                if is_dropvar(var):
                    continue
                env[var] = val
            i += 1
        return [read(a) for a in jaxpr.outvars]

    def _lower_region(self, scope: Scope, found: Any, eqns: list[Any], live: set[Any],
                      read: Callable[[Any], ir.Value]) -> Any:
        try:
            return library.lower_region(self, self.library, scope, found, eqns, live, read)
        except Jax2OnnxError:
            raise
        except Exception as exc:
            where = user_location(eqns[0])
            raise LoweringError(
                f"Lowering library call '{found[1].path}'{' at ' + where if where else ''} failed: "
                f"{type(exc).__name__}: {exc}"
            ) from exc

    # ------------------------------------------------------------------------------------------
    def lower_eqn(self, scope: Scope, eqn: Any, ins: list[ir.Value]) -> list[ir.Value]:
        name = eqn.primitive.name
        first_new = len(scope.nodes)
        try:
            if name in JIT_PRIMITIVES:
                outs = self._lower_jit(scope, eqn, ins)
            elif name in INLINE_CALL_PRIMITIVES or name in CUSTOM_JVP_PRIMITIVES or name in CUSTOM_VJP_PRIMITIVES:
                outs = self._inline(scope, eqn, ins)
            else:
                lowering = self.lowerings.get(name)
                if lowering is None:
                    raise UnsupportedPrimitiveError(name, user_location(eqn), self.pack_hint(name), self.installed_packs)
                outs = self._call_with_facets(lowering, scope, eqn, ins)
        except Jax2OnnxError:
            raise
        except Exception as exc:
            where = user_location(eqn)
            raise LoweringError(
                f"Lowering JAX primitive '{name}'{' at ' + where if where else ''} failed: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        lowering = self.lowerings.get(name)
        record_origin(scope.nodes[first_new:], eqn, lowering.pack if lowering is not None else "")
        return self._finish_outputs(scope, eqn, outs)

    def _lower_jit(self, scope: Scope, eqn: Any, ins: list[ir.Value]) -> list[ir.Value]:
        parsed = parse_mark(str(eqn.params.get("name", "")))
        if parsed is not None:
            mark, call = parsed
            lowering = self.lowerings.get(f"call:{mark}")
            in_shapes = [tuple(v.aval.shape) for v in eqn.invars]
            if (
                lowering is not None
                and not _has_complex(eqn)  # fused ONNX ops are real-valued; complex pairs need the body
                and not _has_keys(eqn)  # nor do they move PRNG keys
                and shapes_match(call.in_shapes, in_shapes)
                and body_matches(call, call_body(eqn))
            ):
                try:
                    outs = self._call(lowering, LoweringContext(self, scope, eqn, marked=call), ins, allow_decline=True)
                except OpUnavailableError:
                    outs = None  # the fused op is newer than the export's opset: the body decomposes it
                if outs is not None:
                    return outs
        outs = library.lower_jit_call(self, self.library, scope, eqn, ins) if self.library.by_key else None
        if outs is not None:
            return outs
        return self._inline(scope, eqn, ins)

    def _inline(self, scope: Scope, eqn: Any, ins: list[ir.Value]) -> list[ir.Value]:
        body = call_body(eqn)
        n = len(body.jaxpr.invars)
        # custom_vjp/custom_jvp may carry extra leading operands (e.g. residual counts); the body
        # consumes the trailing ones.
        return self.lower_jaxpr(scope, body, ins[len(ins) - n :])

    def _call_with_facets(self, lowering: Lowering, scope: Scope, eqn: Any, ins: list[ir.Value],
                          avals: tuple[list[Any], list[Any]] | None = None) -> list[ir.Value]:
        """Apply the lowering's facets: its complex variant for complex equations, typed PRNG keys
        moved word by word, and computing in a carrier dtype for operands its op has no kernel for
        (see :class:`Lowering`). ``avals`` overrides the equation's (ins, outs) avals."""
        avals_in, avals_out = avals or ([v.aval for v in eqn.invars], [v.aval for v in eqn.outvars])
        if not lowering.keys and _has_keys(eqn) and avals is None and not _has_bodies(eqn):
            return self._call_per_key_word(lowering, scope, eqn, ins)
        if lowering.complex is not None and _has_complex(eqn):
            return self._call(dataclasses.replace(lowering, fn=lowering.complex), LoweringContext(self, scope, eqn), ins)
        if lowering.dtypes is None:
            return self._call(lowering, LoweringContext(self, scope, eqn, avals_in=avals_in, avals_out=avals_out), ins)
        supported = lowering.dtypes
        if isinstance(supported, Kernels):
            supported = supported.resolve(self.runtime, scope.model.opset)
        widened: dict[np.dtype, np.dtype] = {}
        for aval in avals_in:
            dt = _np_dtype(aval)
            if dt is not None and dt.kind != "c" and dt not in supported and dt not in widened:
                widened[dt] = carrier(dt, supported)
        if not widened:
            return self._call(lowering, LoweringContext(self, scope, eqn, avals_in=avals_in, avals_out=avals_out), ins)
        ctx = LoweringContext(self, scope, eqn, avals_in=[_widen(a, widened) for a in avals_in],
                              avals_out=[_widen(a, widened) for a in avals_out])
        cast_ins = [ctx.cast(x, widened[_np_dtype(a)]) if _np_dtype(a) in widened else x for x, a in zip(ins, avals_in)]
        outs = self._call(lowering, ctx, cast_ins)
        return [ctx.cast(o, a.dtype) if _np_dtype(a) is not None else o for o, a in zip(outs, avals_out)]

    def _call_per_key_word(self, lowering: Lowering, scope: Scope, eqn: Any, ins: list[ir.Value]) -> list[ir.Value]:
        """An equation that moves typed keys around (slice, reshape, concatenate, select_n, gather,
        ...) treats each key as one element: it is lowered once per uint32 word of the key data, on
        that word's plane, and the planes are stacked back on the trailing axis."""
        key_dtype = next(v.aval.dtype for v in (*eqn.invars, *eqn.outvars) if _is_key(v.aval))
        data_shape = key_data_shape(key_dtype)
        if len(data_shape) != 1:
            raise LoweringError(f"keys whose data has shape {data_shape} (not a vector) cannot be moved by '{eqn.primitive.name}'")
        avals_in = [_key_word(v.aval) for v in eqn.invars]
        avals_out = [_key_word(v.aval) for v in eqn.outvars]
        planes = []
        for w in range(data_shape[0]):
            word = scope.const(np.asarray(w, dtype=np.int64))
            plane_ins = [scope.op.Gather(x, word, axis=-1) if _is_key(v.aval) else x for x, v in zip(ins, eqn.invars)]
            planes.append(self._call_with_facets(lowering, scope, eqn, plane_ins, (avals_in, avals_out)))
        last = scope.const(np.asarray([-1], dtype=np.int64))
        return [scope.op.Concat(*[scope.op.Unsqueeze(p[j], last) for p in planes], axis=-1) if _is_key(var.aval)
                else planes[0][j] for j, var in enumerate(eqn.outvars)]

    def _call(self, lowering: Lowering, ctx: LoweringContext, ins: list[ir.Value], allow_decline: bool = False) -> list[ir.Value] | None:
        result = lowering.fn(ctx, *ins)
        if result is None:
            if allow_decline:
                return None
            raise LoweringError(f"lowering of '{lowering.name}' from '{lowering.pack}' returned nothing")
        if isinstance(result, ir.Value):
            return [result]
        return list(result)

    def _finish_outputs(self, scope: Scope, eqn: Any, outs: list[ir.Value]) -> list[ir.Value]:
        if len(outs) != len(eqn.outvars):
            raise LoweringError(
                f"lowering of '{eqn.primitive.name}' returned {len(outs)} values for {len(eqn.outvars)} outputs"
            )
        fixed = []
        for var, v in zip(eqn.outvars, outs):
            aval = var.aval
            if not hasattr(aval, "dtype"):
                fixed.append(v)
                continue
            want = value_dtype(aval.dtype)
            if v.type is not None and v.type.dtype != want:
                where = user_location(eqn)
                raise LoweringError(
                    f"lowering of '{eqn.primitive.name}'{' at ' + where if where else ''} produced "
                    f"{v.type.dtype.name} where JAX has {aval.dtype} (a bug in that lowering)"
                )
            if v.producer() is not None:  # graph inputs and initializers keep their own type
                set_aval(v, aval)
            fixed.append(v)
        return fixed


def _last_uses(jaxpr: Any) -> dict[Any, int]:
    """For each variable, the index of the last equation reading it (the jaxpr's results count as
    read after the last equation)."""
    out: dict[Any, int] = {}
    for k, e in enumerate(jaxpr.eqns):
        for v in e.invars:
            if not is_literal(v):
                out[v] = k
    for v in jaxpr.outvars:
        if not is_literal(v):
            out[v] = len(jaxpr.eqns)
    return out


def _same_call(a: Any, b: Any) -> bool:
    return a is not None and a[0] == b[0]


def _np_dtype(aval: Any) -> np.dtype | None:
    """The numpy dtype of ``aval``; None for tokens and typed PRNG keys."""
    dtype = getattr(aval, "dtype", None)
    return None if dtype is None or is_key_dtype(dtype) else np.dtype(dtype)


def _widen(aval: Any, widened: Mapping[np.dtype, np.dtype]) -> Any:
    dt = _np_dtype(aval)
    return aval.update(dtype=widened[dt]) if dt in widened else aval


def _has_complex(eqn: Any) -> bool:
    return any((dt := _np_dtype(v.aval)) is not None and dt.kind == "c" for v in (*eqn.invars, *eqn.outvars))


def _is_key(aval: Any) -> bool:
    return is_key_dtype(getattr(aval, "dtype", None))


def _has_keys(eqn: Any) -> bool:
    return any(_is_key(v.aval) for v in (*eqn.invars, *eqn.outvars))


def _has_bodies(eqn: Any) -> bool:
    """Control flow (cond/while/scan) carries keys through its bodies as key data already."""
    return bool(sub_jaxprs(eqn))


def _key_word(aval: Any) -> Any:
    """One uint32 word plane of a key array's data (same shape as the key array)."""
    return aval.update(dtype=np.dtype(np.uint32)) if _is_key(aval) else aval


def _to_numpy(value: Any, aval: Any) -> np.ndarray:
    dtype = getattr(aval, "dtype", None)
    if is_key_dtype(dtype):  # a closed-over key: its uint32 key data
        return key_data(value)
    arr = host_copy(value) if is_device_resident(value) else np.asarray(value)
    if dtype is not None and arr.dtype != dtype:
        arr = arr.astype(dtype)
    if arr.dtype.kind == "c":  # complex constants as (real, imag) pairs, like every complex value
        arr = np.stack([arr.real, arr.imag], axis=-1)
    return arr
