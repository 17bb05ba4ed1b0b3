"""Shared pieces of the jnp pack: patch builders, marked regions, small ONNX helpers.

Every function of this pack follows one pattern:

* a *replacement* for ``jax.numpy.<f>`` / ``jax.nn.<f>`` (active only while an export traces) looks
  at the arguments; when they are in a form the lowering handles it calls
  :func:`mark` (a :func:`jax2onnx.plugin.marked_call`, i.e. a named ``jax.jit`` of the original
  function), otherwise it calls the original directly;
* a *lowering* registered for the mark emits the single ONNX op, or returns ``None`` to decline,
  in which case core lowers the jitted body (the lax decomposition). Core only offers the mark
  when the call is the one recorded (same operand shapes, same body), so under ``vmap`` and in
  ``grad``'s backward pass the body is lowered instead.
"""

from __future__ import annotations

import contextvars
import functools
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np
from jax2onnx.plugin import Patch, marked_call

MARK_PREFIX = "jax2onnx_jnp."

#: Where ``flax.nnx`` re-exports ``jax.nn`` / ``jax.numpy`` functions under the same name.
FLAX_REEXPORTS = ("flax.nnx",)


_IN_REGION: contextvars.ContextVar[bool] = contextvars.ContextVar("jax2onnx_jnp_in_region", default=False)


def mark(name: str, region: Callable[..., Any], *arrays: Any, **params: Any) -> Any:
    """Run ``region(*arrays, **params)`` as the marked region ``jax2onnx_jnp.<name>``.

    Inside another region of this pack (``jax.nn.standardize`` calling ``jnp.mean``, attention
    calling ``jnp.einsum``) the call is not marked again: the outer lowering replaces the whole
    body, and where it declines (vmap, grad) the inner marks would decline as well.
    """
    if _IN_REGION.get():
        return region(*arrays, **params)
    return marked_call(MARK_PREFIX + name, functools.partial(_in_region, region), *arrays, **params)


def _in_region(region: Callable[..., Any], *arrays: Any, **params: Any) -> Any:
    token = _IN_REGION.set(True)
    try:
        return region(*arrays, **params)
    finally:
        _IN_REGION.reset(token)


def mark_name(name: str) -> str:
    return MARK_PREFIX + name


class _LoadedModulePatch(Patch):
    """A patch of a module attribute applied only when that module is already imported.

    Used for flax re-exports: a user who never imported flax cannot be calling ``flax.nnx.gelu``,
    so an export should not import flax just to patch it.
    """

    def resolve(self) -> Any | None:
        mod = sys.modules.get(self.target) if isinstance(self.target, str) else self.target
        return mod if mod is not None and hasattr(mod, self.attribute) else None


def patches_for(
    module: str,
    names: Iterable[str],
    make: Callable[[str, Callable[..., Any]], Callable[..., Any]],
    *,
    reexports: Sequence[str] = FLAX_REEXPORTS,
) -> list[Patch]:
    """Patches replacing ``module.<name>`` by ``make(name, original)`` for each name.

    The same-named attribute of each re-exporting module (``flax.nnx``) is patched too, but only
    while it is the very object ``module.<name>`` held when this pack was imported (a module that
    defines its own function of that name keeps it).
    """
    out: list[Patch] = []
    mod = _import(module)
    for name in names:
        out.append(Patch(module, name, functools.partial(make, name)))
        original = getattr(mod, name, None) if mod is not None else None
        if original is None:
            continue
        for re in reexports:
            out.append(_LoadedModulePatch(re, name, functools.partial(_same_object_only, original, make, name)))
    return out


def _same_object_only(expected: Any, make: Callable[..., Any], name: str, found: Any) -> Any:
    return make(name, found) if found is expected else found


def _import(module: str) -> Any | None:
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        return None


# ---------------------------------------------------------------------------------------------
# Argument checks used by replacements (trace time)


def is_static_int(x: Any) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_))


def is_static_number(x: Any) -> bool:
    return isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, (bool, np.bool_))


def normalize_axes(axis: Any, ndim: int) -> tuple[int, ...] | None:
    """``axis`` (None = all, int, or sequence) as sorted non-negative ints; None if not static."""
    if axis is None:
        return tuple(range(ndim))
    items = (axis,) if is_static_int(axis) else tuple(axis) if isinstance(axis, (tuple, list)) else None
    if items is None or not all(is_static_int(a) for a in items):
        return None
    out = []
    for a in items:
        a = int(a)
        if not -ndim <= a < max(ndim, 1):
            return None
        out.append(a % ndim if ndim else 0)
    if len(set(out)) != len(out):
        return None
    return tuple(sorted(out))


def no_extra_kwargs(kwargs: dict[str, Any], **allowed_defaults: Any) -> bool:
    """True when every keyword in ``kwargs`` is one of ``allowed_defaults`` with that default."""
    for k, v in kwargs.items():
        if k not in allowed_defaults:
            return False
        want = allowed_defaults[k]
        if v is not want and v != want:
            return False
    return True


# ---------------------------------------------------------------------------------------------
# Dtype tests (export time; constants, casts and dims come from the context: ctx.i64, ctx.cast,
# ctx.dim_scalar)


def along_axis(ctx: Any, x: Any, axis: int | None) -> tuple[Any, Any, int]:
    """``(x, n, axis)`` for an op along ``axis`` of the operand ``x`` (shape ``ctx.avals_in[0]``):
    numpy's ``axis=None`` means the flattened array (``x`` reshaped to 1-D, axis 0); ``n`` is the
    length along the axis as a 1-element int64 tensor (TopK's k, a bound for indices), computed in
    the graph when the shape is symbolic."""
    shape = list(ctx.avals_in[0].shape)
    if axis is not None:
        return x, ctx.dim(shape[axis]), axis
    x = ctx.op.Reshape(x, ctx.i64([-1]))
    size = ctx.op.Size(x) if not ctx.is_static(shape) else ctx.i64(int(np.prod(shape)))
    return x, ctx.op.Reshape(size, ctx.i64([1])), 0
