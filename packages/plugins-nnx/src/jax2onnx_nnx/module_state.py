"""Tracing an NNX module whose call updates its own state (training-mode BatchNorm, Dropout RNGs).

An NNX module refuses to have its Variables set from inside a trace it was not created in, so a
model in training mode (the seed's quickstart, exported as written) would fail to trace. The
adapter splits the module into its graph definition and state and rebuilds it *inside* the trace:
updates then land on the rebuilt copy (and are dropped with it), the user's model is untouched, and
the exported graph computes what the call returns.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any


def adapt_nnx_module(fn: Any) -> Callable[..., Any] | None:
    try:
        from flax import nnx
    except ImportError:  # pragma: no cover - flax is a dependency of this pack
        return None
    if not isinstance(fn, nnx.Module):
        return None
    graphdef, state = nnx.split(fn)

    import jax

    @functools.wraps(type(fn).__call__)
    def call(*args: Any, **kwargs: Any) -> Any:
        # Rebuilding the state's leaves makes new Variables owned by the current trace (merge
        # alone may reuse the original Variable objects, which belong to the outer context).
        return nnx.merge(graphdef, jax.tree_util.tree_map(lambda leaf: leaf, state))(*args, **kwargs)

    call.__signature__ = inspect.signature(fn)  # input names and arity checks follow the module's call
    return call


callable_adapters = [adapt_nnx_module]
