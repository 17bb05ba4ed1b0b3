"""The one place that touches JAX internals.

Everything here is version-sensitive (JAX 0.6 … 0.10+). Other modules import from here, never from
``jax._src`` or ``jax.extend`` directly, so a JAX upgrade is fixed in one file.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any

import jax
import jax.extend.core as jex_core
import numpy as np
from jax import export as jax_export
from jax._src import config as jax_config

from .errors import InputSpecError, is_library_file

ClosedJaxpr = jex_core.ClosedJaxpr
Jaxpr = jex_core.Jaxpr
JaxprEqn = jex_core.JaxprEqn
Literal = jex_core.Literal

#: Primitives whose body is inlined by the interpreter. JAX renamed ``pjit`` to ``jit`` (0.7); both
#: spellings are listed so either JAX version works.
JIT_PRIMITIVES = frozenset({"pjit", "jit"})
INLINE_CALL_PRIMITIVES = frozenset(
    {"closed_call", "core_call", "remat", "remat2", "checkpoint", "custom_lin", "name"}
)
CUSTOM_JVP_PRIMITIVES = frozenset({"custom_jvp_call", "custom_jvp_call_jaxpr"})
CUSTOM_VJP_PRIMITIVES = frozenset({"custom_vjp_call", "custom_vjp_call_jaxpr"})


def primitives_by_module(prefixes: tuple[str, ...] = ("jax.",)) -> dict[str, set[str]]:
    """For every loaded module under ``prefixes`` (JAX's by default), the names of the primitives it
    defines at top level (``jax._src.lax.lax`` → ``{"sin", "cos", ...}``); used only to suggest a
    pack in error messages."""
    import sys

    found: dict[str, set[str]] = {}
    for mod_name, mod in list(sys.modules.items()):
        if not mod_name.startswith(prefixes) or mod is None:
            continue
        names = {v.name for v in list(vars(mod).values()) if isinstance(v, jex_core.Primitive)}
        if names:
            found[mod_name] = names
    return found


def is_dropvar(v: Any) -> bool:
    return type(v).__name__ == "DropVar"


def is_literal(v: Any) -> bool:
    return isinstance(v, Literal)


def call_body(eqn: JaxprEqn) -> ClosedJaxpr:
    """The ClosedJaxpr an inlinable call equation evaluates, whatever JAX version named its param."""
    params = eqn.params
    for key in ("jaxpr", "call_jaxpr", "fun_jaxpr"):
        if key in params:
            body = params[key]
            if isinstance(body, Jaxpr):
                return ClosedJaxpr(body, ())
            return body
    raise KeyError(f"no body param in {eqn.primitive.name}: {sorted(params)}")


def sub_jaxprs(eqn: JaxprEqn) -> list[ClosedJaxpr]:
    out = []
    for v in eqn.params.values():
        for item in v if isinstance(v, (tuple, list)) else (v,):
            if isinstance(item, ClosedJaxpr):
                out.append(item)
            elif isinstance(item, Jaxpr):
                out.append(ClosedJaxpr(item, ()))
    return out



def is_tracer(x: Any) -> bool:
    """``x`` is being traced (abstract), not a concrete array: a patch replacement uses this to
    keep a check whose outcome is known at trace time (equinox's ``error_if`` on a constant)."""
    return isinstance(x, jax.core.Tracer)


def vmap_parts(x: Any) -> tuple[Any, Any, int | None] | None:
    """``(trace, value, batch axis)`` when ``x`` is a per-example value inside a ``jax.vmap`` (a
    batch tracer; the axis is None for a value the vmap does not map), else None. With
    :func:`outside_vmap` and :func:`vmapped` a patch computes a whole batch at once and hands the
    result back to the vmap."""
    from jax._src.interpreters import batching

    if isinstance(x, batching.BatchTracer):
        return x._trace, x.val, x.batch_dim if isinstance(x.batch_dim, int) else None
    return None


def vmap_size(trace: Any) -> Any:
    """The batch size of a ``jax.vmap`` trace (from :func:`vmap_parts`)."""
    return trace.axis_data.size


def vmap_parent(trace: Any) -> Any:
    """The trace a ``jax.vmap`` trace runs inside (values outside the vmap belong to it)."""
    return trace.parent_trace


def tracer_trace(x: Any) -> Any | None:
    """The trace a tracer belongs to (None for a concrete value)."""
    return getattr(x, "_trace", None) if isinstance(x, jax.core.Tracer) else None


def outside_vmap(trace: Any) -> contextlib.AbstractContextManager[Any]:
    """Evaluate in the trace around the ``jax.vmap`` trace ``trace`` (on batched values)."""
    from jax._src import core

    return core.set_current_trace(trace.parent_trace)


def vmapped(trace: Any, value: Any, batch_axis: int = 0) -> Any:
    """A batched ``value`` computed outside the vmap, as the per-example value of ``trace``."""
    from jax._src.interpreters import batching

    return batching.BatchTracer(trace, value, batch_axis)


def jit_src_info(eqn: JaxprEqn) -> str | None:
    """``"name at file:line"`` of the function a jit equation traced (its body's debug info), or
    None. JAX >= 0.6 keeps it on the body jaxpr's ``debug_info``."""
    try:
        body = call_body(eqn)
    except KeyError:
        return None
    info = getattr(getattr(body, "jaxpr", body), "debug_info", None)
    return getattr(info, "func_src_info", None)


def traceback_frames(eqn: Any) -> list[tuple[str, str, int, int]]:
    """``(file, function, line, instruction)`` of each Python frame that was running when ``eqn``
    was traced, innermost first (JAX keeps the whole traceback on the equation's source info; the
    function is its ``__qualname__`` on JAX >= 0.7, its ``__name__`` before). The instruction
    offset tells apart two calls on one line (``k, v = f(k), f(v)``); -1 where JAX has none."""
    info = getattr(eqn, "source_info", None)
    tb = getattr(info, "traceback", None)
    if tb is None:
        return []
    frames = tb.frames
    raw = tb.raw_frames() if hasattr(tb, "raw_frames") else None
    lastis = list(raw[1]) if isinstance(raw, tuple) and len(raw) == 2 and len(raw[1]) == len(frames) else [-1] * len(frames)
    return [(f.file_name, f.function_name, f.line_num, int(i)) for f, i in zip(frames, lastis)]


def traceback_codes(eqn: Any) -> list[Any] | None:
    """The code object of each frame of ``eqn``'s traceback, innermost first, without building the
    frames (:func:`traceback_frames` resolves a line per frame: most of its cost); ``[]`` with no
    traceback, None where JAX's traceback has no ``raw_frames``. A frame's file is its code's
    ``co_filename`` and its function its ``co_qualname`` or ``co_name`` (by JAX version)."""
    info = getattr(eqn, "source_info", None)
    tb = getattr(info, "traceback", None)
    if tb is None:
        return []
    raw = tb.raw_frames() if hasattr(tb, "raw_frames") else None
    return list(raw[0]) if isinstance(raw, tuple) and len(raw) == 2 else None


def region_jaxpr(invars: list[Any], outvars: list[Any], eqns: list[JaxprEqn]) -> Jaxpr:
    """A jaxpr made of some of another jaxpr's equations (to compare with a fresh trace by text)."""
    return Jaxpr([], invars, outvars, eqns)

# ---------------------------------------------------------------------------------------------
# Source locations: which line of the *user's* code produced an equation.


def user_location(eqn: JaxprEqn) -> str | None:
    """``file:line (function)`` of the first frame outside JAX/jax2onnx, or None."""
    from jax._src import source_info_util as siu

    info = getattr(eqn, "source_info", None)
    if info is None:
        return None
    frame = None
    try:
        frame = siu.user_frame(info.traceback)  # JAX >= 0.7
    except (TypeError, AttributeError):
        try:
            frame = siu.user_frame(info)  # JAX 0.6
        except Exception:  # noqa: BLE001 - best effort, location is only a hint
            frame = None
    # Skip frames from our own packages and the packs' too: the user wants *their* line.
    tb = getattr(info, "traceback", None)
    if tb is not None:
        for f in tb.frames:
            name = f.file_name
            if not is_library_file(name):
                return f"{name}:{f.line_num} ({f.function_name})"
    if frame is None:
        return None
    return f"{frame.file_name}:{frame.start_line} ({frame.function_name})"


# ---------------------------------------------------------------------------------------------
# Symbolic dimensions.


def is_symbolic_dim(d: Any) -> bool:
    return not isinstance(d, (int, np.integer))


def is_dim_expr(x: Any) -> bool:
    """``x`` is one of JAX's symbolic dimension expressions (any value may be asked)."""
    return hasattr(x, "_evaluate") and hasattr(x, "_get_vars")


def symbolic_dims(names: list[str]) -> dict[str, Any]:
    """Create JAX symbolic dims for ``names``, all in one scope so they combine freely."""
    if not names:
        return {}
    exprs = jax_export.symbolic_shape(", ".join(names))
    return dict(zip(names, exprs))


def parse_dim_expr(text: str, scope_dims: Mapping[str, Any]) -> Any:
    """Parse ``"2*B"`` in the scope of already-created symbols."""
    scope = next(iter(scope_dims.values())).scope if scope_dims else None
    (expr,) = jax_export.symbolic_shape(text, scope=scope) if scope else jax_export.symbolic_shape(text)
    return expr


def dim_from_text(text: str) -> Any:
    """A dim written as text (``"B"``, ``"2*B"``, ``"floordiv(B, 2)"``) as JAX parses it, in a scope
    of its own (evaluate it with :func:`evaluate_dim`): the same grammar ``to_onnx`` accepts."""
    (d,) = jax_export.symbolic_shape(text)
    return d


def dim_symbols(d: Any) -> set[str]:
    """Names of the symbols a dim expression uses."""
    if not is_symbolic_dim(d):
        return set()
    return {str(s) for s in _leaf_vars(d)}


def _leaf_vars(d: Any) -> Iterator[str]:
    get_vars = getattr(d, "_get_vars", None)
    if get_vars is not None:
        yield from get_vars()
        return
    # Fallback: parse names from the printed expression.
    import re

    yield from re.findall(r"[A-Za-z_][A-Za-z_0-9]*", str(d))


def evaluate_dim(d: Any, env: Mapping[str, Any]) -> Any:
    """Evaluate a dim expression with ``env`` binding each symbol to a value.

    The values may be any objects implementing ``+ - * // %`` (the graph builder passes wrappers
    that emit ONNX ops), which is how shape arithmetic on symbols becomes graph computation.
    """
    if not is_symbolic_dim(d):
        return int(d)
    return d._evaluate(dict(env))


# ---------------------------------------------------------------------------------------------
# float64


def x64_enabled(enabled: bool) -> contextlib.AbstractContextManager[Any]:
    """``jax_enable_x64`` set to ``enabled`` for the block, in the current thread only.

    JAX's scoped config (a thread-local override, restored on exit even on error) rather than
    ``jax.config.update``: a float64 export must not flip the process-wide flag under a float32
    export, or user code, running in another thread. JAX >= 0.7 exposes it as
    ``jax.enable_x64(value)``; JAX 0.6 as ``jax.experimental.enable_x64(value)``.
    """
    scoped = getattr(jax, "enable_x64", None)
    if scoped is None:
        from jax.experimental import enable_x64 as scoped
    return scoped(bool(enabled))


def trace_flags() -> tuple[bool, bool]:
    """The config values a trace of JAX's own implementations reads that an export does not fix
    through its options: ``jax_enable_x64`` as it is in this thread (scoped or global) and
    ``jax_threefry_partitionable`` (which counters ``jax.random`` hashes)."""
    return bool(jax.config.jax_enable_x64), bool(jax.config.jax_threefry_partitionable)


#: A value of a trace-context setting no user sets, marking the export's traces (see below).
_EXPORT_TRACE_MARK = r"(?!)jax2onnx-export-trace"


def export_trace_context() -> Any:
    """A context under which JAX's tracing caches keep the export's traces apart from the user's.

    JAX caches the jaxpr of a ``jit`` by function, avals and its "trace context" (config values
    that affect tracing). An export traces with the packs' patches active, so without this the
    jaxpr it leaves in the cache holds, e.g., an Equinox check the export dropped, and the user's
    own later call of the same jitted function reuses it (the check silently gone in JAX); and
    the export would reuse a jaxpr the user traced before, with no patch applied. The setting
    changed here, ``jax_hlo_source_file_canonicalization_regex``, is part of that trace context
    (from JAX 0.6.2 on) and is only read when a jaxpr is lowered to HLO, which an export never
    does; its value, a regex that matches nothing, would change no file name even then."""
    return jax_config.hlo_source_file_canonicalization_regex(_EXPORT_TRACE_MARK)


def make_jaxpr(fn: Any, args: list[Any]) -> tuple[ClosedJaxpr, Any]:
    """Trace ``fn(*args)``; returns the ClosedJaxpr and the output pytree structure."""
    closed, out_shape = jax.make_jaxpr(fn, return_shape=True)(*args)
    return closed, out_shape


# ---------------------------------------------------------------------------------------------
# PRNG keys. A typed key array (``jax.random.key``, dtype ``key<fry>``) is stored as its key data:
# uint32 with the key shape appended (``key<fry>[3]`` -> ``uint32[3, 2]``), which is how JAX itself
# lowers keys (``core.physical_aval``).


def is_key_dtype(dtype: Any) -> bool:
    """True for the dtype of a typed PRNG key array (``key<fry>``, ``key<rbg>``, ...)."""
    if dtype is None or isinstance(dtype, np.dtype):  # the common case, asked for every value
        return False
    try:
        return bool(jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key))
    except TypeError:
        return False


def key_impl(dtype: Any) -> Any:
    """The PRNG implementation behind a key dtype: an object with ``key_shape`` and the
    ``seed``/``split``/``fold_in``/``random_bits`` functions on uint32 key data."""
    return dtype._impl


def key_data_shape(dtype: Any) -> tuple[int, ...]:
    """The trailing shape of one key's uint32 data (``(2,)`` for threefry2x32)."""
    return tuple(int(d) for d in key_impl(dtype).key_shape)


def key_data(value: Any) -> np.ndarray:
    """A concrete typed key array's uint32 key data (a closed-over key becomes this constant)."""
    return np.asarray(jax.random.key_data(value))


def is_device_resident(value: Any) -> bool:
    """A concrete ``jax.Array`` whose host value would be a copy: sharded or replicated over several
    devices, or on an accelerator. (A single-device CPU array is read in place, no copy.)"""
    if not isinstance(value, jax.Array) or is_tracer(value) or is_key_dtype(value.dtype):
        return False
    try:
        devices = value.sharding.device_set
    except (AttributeError, RuntimeError):  # a deleted or donated array: let np.asarray say so
        return False
    return len(devices) > 1 or any(d.platform != "cpu" for d in devices)


def _shard_index(index: tuple[Any, ...], shape: tuple[int, ...]) -> tuple[tuple[int, int, int], ...]:
    """A shard's index (slices, not hashable before Python 3.12) as a hashable, normalized key."""
    return tuple(s.indices(n) if isinstance(s, slice) else (int(s), int(s) + 1, 1) for s, n in zip(index, shape))


def _single_device_to_host(array: Any) -> np.ndarray:
    """One device's buffer on the host. JAX's own converter, which does not keep the host copy on the
    array (``np.asarray`` does, for the array's lifetime: a model's worth of memory after an export)."""
    convert = getattr(array, "_single_device_array_to_np_array_did_copy", None)
    if convert is not None:
        return convert()[0]
    return np.asarray(jax.device_get(array))


def host_copy(value: Any) -> np.ndarray:
    """A concrete ``jax.Array``'s value as a new numpy array, gathered from this process's shards:
    each distinct shard is copied once (a replicated array: one copy, not one per device), one at a
    time, and nothing stays cached on the array."""
    shape = tuple(int(d) for d in value.shape)
    out = np.empty(shape, value.dtype)
    seen: set[tuple[tuple[int, int, int], ...]] = set()
    covered = 0
    for shard in value.addressable_shards:
        key = _shard_index(shard.index, shape)
        if key in seen:
            continue
        seen.add(key)
        part = _single_device_to_host(shard.data)
        out[shard.index] = part
        covered += int(np.size(part))
    if covered != out.size:
        raise InputSpecError(
            f"a {value.dtype}{list(shape)} array is sharded over devices of other processes too ({covered} of its "
            f"{out.size} elements are on this process's devices); export from a process that holds the whole value "
            "(jax.experimental.multihost_utils.process_allgather it first)"
        )
    return out


def gamma_impl(key: Any, a: Any, *, log_space: bool) -> Any:
    """What ``random_gamma`` computes, as JAX lowers it (a vmapped rejection-sampling while loop
    over typed keys); traced by a lowering, so the graph draws exactly JAX's gamma samples."""
    try:
        from jax._src.random.core import _gamma_impl  # JAX >= 0.8 (random became a package)
    except ImportError:  # pragma: no cover - older JAX
        from jax._src.random import _gamma_impl  # type: ignore[no-redef,attr-defined]
    return _gamma_impl(key, a, log_space=log_space, use_vmap=True)


def lax_primitive(name: str) -> Any:
    """The ``jax.lax`` primitive called ``name`` (``lt_to``, ``eq_to``): testcases bind primitives
    that JAX emits internally but exposes no public wrapper for."""
    from jax._src.lax import lax as lax_internal

    prim = getattr(lax_internal, f"{name}_p", None)
    if prim is None:
        raise LookupError(f"this JAX ({jax.__version__}) has no lax primitive {name!r}")
    return prim


def special_decomposition(name: str) -> Any:
    """The function JAX lowers the lax special-function primitive ``name`` with (``igamma``,
    ``igammac``, ``igamma_grad_a``, ``regularized_incomplete_beta``: while-loop series and continued
    fractions; ``bessel_i0e``: Chebyshev series), so a lowering that traces it reproduces JAX's
    numerics. Raises LookupError when this JAX has no such decomposition."""
    from jax._src.lax import special as sp

    if name == "bessel_i0e" and hasattr(sp, "bessel_i0e_impl"):
        return sp.bessel_i0e_impl
    impl = getattr(sp, f"{name}_impl", None)
    up = getattr(sp, "_up_and_broadcast", None)
    if impl is None or up is None:
        raise LookupError(f"this JAX ({jax.__version__}) has no Python decomposition of {name!r}")
    return up(impl)


def linalg_decomposition(name: str) -> Any:
    """The generic (non-LAPACK) function JAX lowers the lax.linalg primitive ``name`` with:
    ``cholesky_update`` (Givens rotations), ``symmetric_product`` (a batched matmul), ``ormqr``
    (reflectors applied to ``c``). Called as ``fn(*operands, **params)``; LookupError if absent."""
    from jax._src.lax import linalg as la

    fn = {
        "cholesky_update": getattr(la, "_cholesky_update_jax_fn", None),
        "symmetric_product": getattr(la, "_symmetric_product_jax_fn", None),
        "ormqr": getattr(la, "_ormqr_lowering", None),
    }.get(name)
    if fn is None:
        raise LookupError(f"this JAX ({jax.__version__}) has no generic decomposition of {name!r}")
    return fn


def lax_primitive_names() -> dict[str, str]:
    """Every primitive JAX defines in its lax modules (``jax.lax``, ``lax.linalg``, control flow,
    special functions, collectives), as ``name -> defining module``: the inventory a coverage test
    holds the packs' lowerings against."""
    import importlib
    import pkgutil

    import jax._src.lax as lax_pkg

    out: dict[str, str] = {}
    for info in pkgutil.walk_packages(lax_pkg.__path__, "jax._src.lax."):
        try:
            mod = importlib.import_module(info.name)
        except Exception:  # noqa: BLE001 - a module needing an absent backend defines nothing for us
            continue
        for value in vars(mod).values():
            if isinstance(value, jex_core.Primitive):
                out.setdefault(value.name, info.name)
    return out
