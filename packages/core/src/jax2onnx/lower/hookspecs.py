"""The hooks a plugin pack implements (pluggy project name ``jax2onnx``).

A pack is an object registered under the entry-point group ``jax2onnx``, normally a
:class:`jax2onnx.plugin.PackModules` that implements every hook from the pack's modules::

    [project.entry-points.jax2onnx]
    mypack = "jax2onnx_mypack.plugin:plugin"

Any object or module whose functions are decorated with :data:`jax2onnx.hookimpl` works too. The
entry point is loaded when a conversion first needs lowerings, never at ``import jax2onnx``; keep
its top level light. A hook implementation whose name matches no hook below (a misspelling) is
reported with a warning when the packs load.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import pluggy

from ..plugin import Lowering, ModulePatch

PROJECT = "jax2onnx"
hookspec = pluggy.HookspecMarker(PROJECT)
# The implementations' marker is jax2onnx.plugin.hookimpl (the pack author's API).


@hookspec
def jax2onnx_lowerings() -> Iterable[Lowering]:
    """Return the lowerings this pack provides.

    Called once per process, the first time a conversion needs the dispatch table. Each
    :class:`~jax2onnx.plugin.Lowering` names a JAX primitive (``"sin"``) or a marked call
    (``"call:jax2onnx_mypack.layer_norm"``, see :func:`jax2onnx.plugin.marked_call`) and the function
    that emits ONNX for it. Two packs claiming one name at the same ``priority`` is an error that
    names both; a higher ``priority`` wins explicitly.
    """


@hookspec
def jax2onnx_patches() -> Iterable[ModulePatch]:
    """Return the overrides this pack applies while a function is traced.

    A :class:`~jax2onnx.plugin.ModulePatch` overrides a method of the module instances the exported
    callable reaches, for that export only (:mod:`jax2onnx.lower.scoped`); the library's class is
    never changed. Library *functions* are never replaced: register a lowering that finds them in the
    trace (:meth:`~jax2onnx.plugin.Lowerings.register_library`).
    """


@hookspec(firstresult=True)
def jax2onnx_adapt_callable(fn: Any) -> Callable[..., Any] | None:
    """Return a traceable version of ``fn`` (the object passed to ``to_onnx``), or ``None``.

    The first pack that answers wins. Frameworks whose modules hold mutable state use this (an NNX
    module in training mode updates its batch statistics and RNG counters while it runs; the
    adapted function lets those updates happen inside the trace, leaving the user's model as it was).
    """


@hookspec
def jax2onnx_components() -> Iterable[Any]:
    """Return the :class:`jax2onnx.testing.Component` s (with their testcases) this pack documents
    and tests. (Typed ``Any`` here: the testing package sits above the lowering machinery that
    reads this spec, and importing it would tie the two into a circle.)

    Core's pytest plugin turns every testcase into static/symbolic × float32/float64 tests that run
    the exported model in onnxruntime and compare with JAX; the coverage table is rendered from the
    same metadata.
    """


@hookspec
def jax2onnx_library_modules() -> Iterable[str]:
    """Return the top-level modules whose frames are library code: the pack's own package and the
    model libraries it serves (``"flax"``, ``"equinox"``, ``"keras"``).

    Error messages point at the user's line, the innermost frame outside JAX, jax2onnx and these;
    core names no library itself. The registry adds each entry point's own package anyway.
    """


@hookspec
def jax2onnx_demos() -> Iterable[Any]:
    """Return the :class:`jax2onnx.plugin.Demo` s (ready-made models) this pack offers to the
    command line: ``jax2onnx demo`` lists them, ``jax2onnx demo NAME`` runs one, and
    ``jax2onnx quickstart`` runs the one named ``quickstart``."""
