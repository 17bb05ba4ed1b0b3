"""The hooks a plugin pack implements (pluggy project name ``jax2onnx``).

A pack is a module registered under the entry-point group ``jax2onnx``::

    [project.entry-points.jax2onnx]
    lax = "jax2onnx_lax.plugin"

whose functions decorated with :data:`jax2onnx.hookimpl` implement some of the hooks below. The
module is imported when a conversion first needs lowerings, never at ``import jax2onnx``; keep its
top level light and import heavy modules inside the hook bodies.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:  # pragma: no cover
    from .plugin import Lowering, Patch
    from .testing.testcase import Component

PROJECT = "jax2onnx"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def jax2onnx_lowerings() -> Iterable[Lowering]:
    """Return the lowerings this pack provides.

    Called once per process, the first time a conversion needs the dispatch table. Each
    :class:`~jax2onnx.plugin.Lowering` names a JAX primitive (``"sin"``) or a marked call
    (``"call:jax2onnx_nnx.layer_norm"``, see :func:`jax2onnx.plugin.marked_call`) and the function
    that emits ONNX for it. Two packs claiming one name at the same ``priority`` is an error that
    names both; a higher ``priority`` wins explicitly.
    """


@hookspec
def jax2onnx_patches() -> Iterable[Patch]:
    """Return the patches this pack applies while a function is traced.

    A :class:`~jax2onnx.plugin.Patch` replaces an attribute (``flax.nnx.LayerNorm.__call__``) for
    the duration of tracing only; core undoes it afterwards, also on error. A patch must stay
    transparent to ``jax.vmap``/``jax.grad``/``jax.jit``: mark a region with
    :func:`~jax2onnx.plugin.marked_call` (a named ``jax.jit``) rather than a new primitive.
    """


@hookspec
def jax2onnx_callable_adapters() -> Iterable[Callable[[Any], Callable[..., Any] | None]]:
    """Return adapters that prepare a user's callable for tracing.

    Each adapter gets the object passed to ``to_onnx`` and returns a function to trace instead, or
    ``None`` when the object is not its kind. The first adapter that answers wins. Frameworks whose
    modules hold mutable state use this (an NNX module in training mode updates its batch statistics
    and RNG counters while it runs; the adapter lets those updates happen inside the trace).
    """


@hookspec
def jax2onnx_components() -> Iterable[Component]:
    """Return the components (with their testcases) this pack documents and tests.

    Core's pytest plugin turns every testcase into static/symbolic × float32/float64 tests that run
    the exported model in onnxruntime and compare with JAX; the coverage table is rendered from the
    same metadata.
    """


@hookspec
def jax2onnx_provided_primitives() -> Iterable[str]:
    """Cheaply list primitive names the pack lowers, without importing its lowerings.

    Optional. Used only for error hints when a pack is present but failed to load.
    """
