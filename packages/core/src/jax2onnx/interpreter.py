"""One linear walk over a ClosedJaxpr, dispatching each equation to its lowering."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import onnx_ir as ir

from . import compat
from .builder import Scope, set_aval, value_dtype
from .context import LoweringContext
from .dtypes import carrier
from .errors import Jax2OnnxError, LoweringError, UnsupportedPrimitiveError
from .plugin import Lowering, body_matches, parse_mark, shapes_match
from .registry import pack_hint


class Interpreter:
    """Lowers jaxprs into scopes using a dispatch table ``name -> Lowering``."""

    def __init__(self, lowerings: Mapping[str, Lowering], installed_packs: list[str]):
        self.lowerings = lowerings
        self.installed_packs = installed_packs

    def lower_jaxpr(self, scope: Scope, closed: Any, inputs: Sequence[ir.Value]) -> list[ir.Value]:
        jaxpr = closed.jaxpr if hasattr(closed, "jaxpr") else closed
        consts = closed.consts if hasattr(closed, "consts") else ()
        env: dict[Any, ir.Value] = {}
        for var, c in zip(jaxpr.constvars, consts):
            env[var] = scope.const(_to_numpy(c, var.aval))
        if len(jaxpr.invars) != len(inputs):
            raise LoweringError(f"jaxpr expects {len(jaxpr.invars)} inputs, got {len(inputs)}")
        for var, v in zip(jaxpr.invars, inputs):
            env[var] = v

        def read(a: Any) -> ir.Value:
            if compat.is_literal(a):
                return scope.const(_to_numpy(a.val, a.aval))
            return env[a]

        for eqn in jaxpr.eqns:
            ins = [read(a) for a in eqn.invars]
            outs = self.lower_eqn(scope, eqn, ins)
            for var, val in zip(eqn.outvars, outs):
                if compat.is_dropvar(var):
                    continue
                env[var] = val
        return [read(a) for a in jaxpr.outvars]

    # ------------------------------------------------------------------------------------------
    def lower_eqn(self, scope: Scope, eqn: Any, ins: list[ir.Value]) -> list[ir.Value]:
        name = eqn.primitive.name
        try:
            if name in compat.JIT_PRIMITIVES:
                outs = self._lower_jit(scope, eqn, ins)
            elif name in compat.INLINE_CALL_PRIMITIVES or name in compat.CUSTOM_JVP_PRIMITIVES or name in compat.CUSTOM_VJP_PRIMITIVES:
                outs = self._inline(scope, eqn, ins)
            else:
                lowering = self.lowerings.get(name)
                if lowering is None:
                    raise UnsupportedPrimitiveError(name, compat.user_location(eqn), pack_hint(name), self.installed_packs)
                outs = self._call_with_facets(lowering, scope, eqn, ins)
        except Jax2OnnxError:
            raise
        except Exception as exc:
            where = compat.user_location(eqn)
            raise LoweringError(
                f"Lowering JAX primitive '{name}'{' at ' + where if where else ''} failed: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
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
                and shapes_match(call.in_shapes, in_shapes)
                and body_matches(call, compat.call_body(eqn))
            ):
                outs = self._call(lowering, LoweringContext(self, scope, eqn, marked=call), ins, allow_decline=True)
                if outs is not None:
                    return outs
        return self._inline(scope, eqn, ins)

    def _inline(self, scope: Scope, eqn: Any, ins: list[ir.Value]) -> list[ir.Value]:
        body = compat.call_body(eqn)
        n = len(body.jaxpr.invars)
        # custom_vjp/custom_jvp may carry extra leading operands (e.g. residual counts); the body
        # consumes the trailing ones.
        return self.lower_jaxpr(scope, body, ins[len(ins) - n :])

    def _call_with_facets(self, lowering: Lowering, scope: Scope, eqn: Any, ins: list[ir.Value]) -> list[ir.Value]:
        """Apply the lowering's facets: its complex variant for complex equations, and computing in
        a carrier dtype for operands its op has no kernel for (see :class:`Lowering`)."""
        if lowering.complex is not None and _has_complex(eqn):
            return self._call(dataclasses.replace(lowering, fn=lowering.complex), LoweringContext(self, scope, eqn), ins)
        if lowering.dtypes is None:
            return self._call(lowering, LoweringContext(self, scope, eqn), ins)
        widened: dict[np.dtype, np.dtype] = {}
        for var in eqn.invars:
            dt = np.dtype(var.aval.dtype) if hasattr(var.aval, "dtype") else None
            if dt is not None and dt.kind != "c" and dt not in lowering.dtypes and dt not in widened:
                widened[dt] = carrier(dt, lowering.dtypes)
        if not widened:
            return self._call(lowering, LoweringContext(self, scope, eqn), ins)
        ctx = LoweringContext(self, scope, eqn, avals_in=[_widen(v.aval, widened) for v in eqn.invars],
                              avals_out=[_widen(v.aval, widened) for v in eqn.outvars])
        cast_ins = [ctx.cast(x, widened[np.dtype(v.aval.dtype)]) if np.dtype(v.aval.dtype) in widened else x
                    for x, v in zip(ins, eqn.invars)]
        outs = self._call(lowering, ctx, cast_ins)
        return [ctx.cast(o, var.aval.dtype) if hasattr(var.aval, "dtype") else o for o, var in zip(outs, eqn.outvars)]

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
                where = compat.user_location(eqn)
                raise LoweringError(
                    f"lowering of '{eqn.primitive.name}'{' at ' + where if where else ''} produced "
                    f"{v.type.dtype.name} where JAX has {np.dtype(aval.dtype).name} (a bug in that lowering)"
                )
            if v.producer() is not None:  # graph inputs and initializers keep their own type
                set_aval(v, aval)
            fixed.append(v)
        return fixed


def _widen(aval: Any, widened: Mapping[np.dtype, np.dtype]) -> Any:
    dt = np.dtype(aval.dtype) if hasattr(aval, "dtype") else None
    return aval.update(dtype=widened[dt]) if dt in widened else aval


def _has_complex(eqn: Any) -> bool:
    return any(np.dtype(getattr(v.aval, "dtype", np.float32)).kind == "c" for v in (*eqn.invars, *eqn.outvars))


def _to_numpy(value: Any, aval: Any) -> np.ndarray:
    dtype = getattr(aval, "dtype", None)
    arr = np.asarray(value)
    if dtype is not None and arr.dtype != dtype:
        arr = arr.astype(dtype)
    if arr.dtype.kind == "c":  # complex constants as (real, imag) pairs, like every complex value
        arr = np.stack([arr.real, arr.imag], axis=-1)
    return arr
