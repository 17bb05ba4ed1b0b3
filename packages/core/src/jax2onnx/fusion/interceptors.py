"""Interceptors for :class:`jax2onnx.plugin.ModulePatch` (``interceptor=``): how an export reaches
the modules of a library that builds them during the call, so that no instance exists to override
beforehand."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any


@contextlib.contextmanager
def linen_calls(lookup: Callable[..., Any]) -> Iterator[None]:
    """Route Flax Linen method calls in this thread through ``lookup`` (the ModulePatch machinery's
    ``lookup(module, method_name, function)``, None: run the method as it is). Linen (and Hugging
    Face's Flax models, which are Linen) build their submodules during ``apply``;
    ``flax.linen.intercept_methods`` is Linen's own per-thread way to reach them, so flax's and
    transformers' classes stay as they are."""
    from flax import linen as nn  # only the packs serving Linen models ask for this

    def interceptor(next_fun: Callable[..., Any], args: Any, kwargs: Any, context: Any) -> Any:
        # the class-level function being run (context.orig_method is it bound by a partial)
        function = getattr(context.orig_method, "func", None)
        replacement = lookup(context.module, context.method_name, function)
        if replacement is None:
            return next_fun(*args, **kwargs)
        return replacement(*args, **kwargs)

    with nn.intercept_methods(interceptor):
        yield


__all__ = ["linen_calls"]
