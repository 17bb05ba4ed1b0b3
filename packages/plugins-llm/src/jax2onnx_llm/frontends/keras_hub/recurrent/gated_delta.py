"""Qwen 3.5's Gated DeltaNet (``linear_attention``) layer as one step over any number of new tokens,
carrying its two states between steps: the causal convolution's last ``kernel - 1`` inputs
``(batch, conv_dim, kernel - 1)`` and the delta rule's memory ``(batch, value_heads, key_dim, value_dim)``
(the shapes and meaning of KerasHub's ``conv_cache`` / ``recurrent_cache``, and of onnxruntime-genai's
``past.%d.conv`` / ``past.%d.recurrent``).

KerasHub's layer cannot be traced for this step as it is: it picks its algorithm by ``seq_len > 1``
(a Python test a symbolic sequence length cannot answer), its chunked prefill loops over
``seq_len // 64`` chunks, and its recurrence ignores a padding mask. So the math is written here once,
as KerasHub's per-token recurrence (``_recurrent_gated_delta_rule``) under ``lax.scan`` over the new
tokens, with the layer's own projections, gated RMS norm and output projection called as they are.
``tests/test_keras_hub_recurrent.py`` checks it against the library's layer, prefill (its chunked
form) and decode (its recurrent form), on random inputs.

Left padding: a token marked ``pad`` leaves both states as they were (its convolution input is zero,
which is what the zero state before a row's first token holds; its decay is 1 and its write gate 0),
so a left-padded row ends its prefill in the state its prompt alone gives.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp


def conv_with_state(inputs: Any, state: Any, weight: Any) -> tuple[Any, Any]:
    """Depthwise causal convolution continuing from ``state``: ``inputs`` ``(batch, channels, sequence)``,
    ``state`` ``(batch, channels, kernel - 1)`` (the inputs before these), ``weight`` ``(channels, kernel)``.
    Returns the outputs ``(batch, channels, sequence)`` (before the activation) and the new state."""
    kernel = weight.shape[1]
    seq = inputs.shape[2]
    window = jnp.concatenate([state.astype(inputs.dtype), inputs], axis=2)  # (b, c, kernel - 1 + seq)
    out = sum(window[:, :, k : k + seq] * weight[None, :, k : k + 1].astype(inputs.dtype) for k in range(kernel))
    return out, window[:, :, seq:]


def delta_rule(query: Any, key: Any, value: Any, decay: Any, beta: Any, state: Any) -> tuple[Any, Any]:
    """The gated delta rule, token by token (KerasHub's ``_recurrent_gated_delta_rule`` after its
    normalization): ``query``/``key`` ``(batch, sequence, heads, key_dim)`` (normalized, query scaled),
    ``value`` ``(batch, sequence, heads, value_dim)``, ``decay`` (log space) and ``beta``
    ``(batch, sequence, heads)``, ``state`` ``(batch, heads, key_dim, value_dim)``; all float32.
    Returns the outputs ``(batch, sequence, heads, value_dim)`` and the new state."""

    def one_token(memory: Any, token: tuple[Any, ...]) -> tuple[Any, Any]:
        q, k, v, g, b = token  # (batch, heads, ...)
        memory = memory * jnp.exp(g)[..., None, None]
        recalled = jnp.sum(memory * k[..., None], axis=-2)  # (batch, heads, value_dim)
        delta = (v - recalled) * b[..., None]
        memory = memory + k[..., None] * delta[..., None, :]
        return memory, jnp.sum(memory * q[..., None], axis=-2)

    time_major = [jnp.moveaxis(t, 1, 0) for t in (query, key, value, decay, beta)]
    state, out = jax.lax.scan(one_token, state, time_major)
    return jnp.moveaxis(out, 0, 1), state


def _l2norm(x: Any, eps: float = 1e-6) -> Any:
    return x * jax.lax.rsqrt(jnp.sum(x * x, axis=-1, keepdims=True) + eps)


def gated_delta_net(layer: Any, hidden: Any, conv_state: Any, recurrent_state: Any,
                    pad: Any = None) -> tuple[Any, Any, Any]:
    """KerasHub's ``Qwen3_5GatedDeltaNet`` (``layer``) on ``hidden`` ``(batch, sequence, hidden)``
    from the given states; ``pad`` ``(batch, sequence)`` bool marks tokens that change no state.
    Returns ``(output, conv_state, recurrent_state)``."""
    batch, seq = hidden.shape[0], hidden.shape[1]
    heads_k, heads_v, dim_k, dim_v = layer.num_k_heads, layer.num_v_heads, layer.head_k_dim, layer.head_v_dim
    mixed = layer.in_proj_qkv(hidden)
    if pad is not None:  # a padding token's convolution input is the zero a row's state starts from
        mixed = jnp.where(pad[..., None], jnp.zeros((), mixed.dtype), mixed)
    z = jnp.reshape(layer.in_proj_z(hidden), (batch, seq, heads_v, dim_v))
    b, a = layer.in_proj_b(hidden), layer.in_proj_a(hidden)
    conv, conv_state = conv_with_state(jnp.swapaxes(mixed, 1, 2), conv_state, jnp.asarray(layer.conv1d_weight))
    mixed = jnp.swapaxes(jax.nn.silu(conv), 1, 2)
    key_dim = layer.key_dim
    query = jnp.reshape(mixed[..., :key_dim], (batch, seq, heads_k, dim_k))
    key = jnp.reshape(mixed[..., key_dim : 2 * key_dim], (batch, seq, heads_k, dim_k))
    value = jnp.reshape(mixed[..., 2 * key_dim :], (batch, seq, heads_v, dim_v))
    beta = jax.nn.sigmoid(b.astype(jnp.float32))
    decay = -jnp.exp(jnp.asarray(layer.A_log, jnp.float32)) * jax.nn.softplus(
        a.astype(jnp.float32) + jnp.asarray(layer.dt_bias, jnp.float32))
    if pad is not None:  # no decay, no write: the state passes a padding token unchanged
        decay = jnp.where(pad[..., None], 0.0, decay)
        beta = jnp.where(pad[..., None], 0.0, beta)
    if heads_v // heads_k > 1:
        query = jnp.repeat(query, heads_v // heads_k, axis=2)
        key = jnp.repeat(key, heads_v // heads_k, axis=2)
    query = _l2norm(query.astype(jnp.float32)) * (1.0 / dim_k**0.5)
    key = _l2norm(key.astype(jnp.float32))
    out, recurrent_state = delta_rule(query, key, value.astype(jnp.float32), decay, beta,
                                      recurrent_state.astype(jnp.float32))
    out = jnp.reshape(out.astype(hidden.dtype), (-1, dim_v))
    out = layer.norm(out) * jax.nn.silu(jnp.reshape(z, (-1, dim_v)))
    out = layer.out_proj(jnp.reshape(out, (batch, seq, heads_v * dim_v)))
    return out, conv_state, recurrent_state
