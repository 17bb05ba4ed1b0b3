"""Activations as Linen models call them (``nn.relu``, ``nn.gelu``, ...) and ``nn.Dropout``.

``flax.linen`` re-exports ``jax.nn``'s functions under the same names. The jnp pack patches
``jax.nn.<name>``, but a call through ``nn.gelu`` reaches the function object flax imported, not
the patched attribute. While exporting, each re-export that is jax.nn's very function forwards to
``jax.nn.<name>`` looked up at call time, so the jnp pack's lowering (``Gelu``, ``Relu``, ...)
applies; a name flax defines itself is left alone.

``nn.Dropout`` needs nothing: deterministic (``deterministic=True`` or ``rate=0``) it returns its
input, so it leaves no node. Training-mode dropout draws random bits from a ``dropout`` rng and is
lowered through the lax pack's random primitives, where supported.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import jax
from flax import linen as nn
from jax2onnx.plugin import Patch

#: jax.nn functions flax.linen re-exports (checked again below: only the very same objects).
_NAMES = ("celu", "elu", "gelu", "glu", "hard_sigmoid", "hard_silu", "hard_swish", "hard_tanh", "leaky_relu",
          "log_sigmoid", "log_softmax", "logsumexp", "one_hot", "relu", "relu6", "selu", "sigmoid", "silu",
          "soft_sign", "softmax", "softplus", "standardize", "swish", "tanh")


def _is_reexport(name: str) -> bool:
    ours, theirs = getattr(nn, name, None), getattr(jax.nn, name, None)
    # During another thread's export jax.nn.<name> is core's dispatcher, which wraps the original.
    return ours is not None and (ours is theirs or getattr(theirs, "__wrapped__", None) is ours)


def _forward(name: str) -> Callable[[Any], Any]:
    def make(original: Any) -> Any:
        @functools.wraps(original)
        def forwarded(*args: Any, **kwargs: Any) -> Any:
            return getattr(jax.nn, name)(*args, **kwargs)

        return forwarded

    return make


patches = [Patch("flax.linen", name, _forward(name)) for name in _NAMES if _is_reexport(name)]
