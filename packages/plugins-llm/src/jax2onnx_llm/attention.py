"""``attend``: the step's attention over the cache, the one call a decoder makes for it.

Outside an export it computes the standard attention (:func:`.spec._attend_reference`); inside one
it is the marked region :mod:`.fused` lowers to the export target's fused op. This module sits above
both (the region's body is the reference), so neither needs the other's module.
"""

from __future__ import annotations

import math
from typing import Any

from jax2onnx.plugin import exporting

from .fused import attend_region
from .spec import KVCache, _attend_reference, apply_rotary


def attend(
    cache: KVCache,
    layer: int,
    q: Any,
    k: Any,
    v: Any,
    *,
    scale: float | None = None,
    rotary: tuple[Any, Any] | None = None,
) -> Any:
    """Causal grouped-query attention of this step's tokens over the cache, writing the cache.

    Args:
        cache: the step's :class:`KVCache`.
        layer: which layer's keys/values to write.
        q: ``(batch, sequence, num_heads, head_size)`` queries.
        k, v: ``(batch, sequence, kv_heads, head_size)`` this step's keys and values.
        scale: the scores' scale (``1/sqrt(head_size)`` by default).
        rotary: ``(cos, sin)``, each ``(batch, sequence, head_size // 2)`` for the new tokens'
            positions: rotate ``q`` and ``k`` (the half-split "rotate_half" convention of Llama,
            Mistral and Gemma) before caching ``k``. Tables from :func:`rotary_tables` also carry
            their positions, and the export then rotates with a fused op (inside
            ``GroupQueryAttention``, or ``RotaryEmbedding``).

    Returns:
        ``(batch, sequence, num_heads, head_size)``.
    """
    head_size = q.shape[-1]
    scale = 1.0 / math.sqrt(head_size) if scale is None else scale
    # Inside an export the attention is a marked region whose lowering emits the target's fused op
    # (decided at lowering time from the export's options); its mask needs the cache's length from
    # the mask's shape, which a jitted loop with an explicit length (reference.py) does not give.
    if exporting() and cache.length is None:
        return attend_region(cache, layer, q, k, v, scale=scale, rotary=rotary)
    if rotary is not None:
        cos, sin = rotary
        q, k = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
    return _attend_reference(cache, layer, q, k, v, scale)
