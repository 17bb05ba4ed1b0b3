"""``rng_bit_generator`` (the ``rbg``/``unsafe_rbg`` PRNG impls' bits) as XLA's CPU computes it.

XLA's CPU backend expands ``RNG_DEFAULT`` to Philox-4x32 with 10 rounds (the same stream as an
explicit ``RNG_PHILOX``), and for JAX's ``uint32[4]`` state the layout is, as measured against
``jax.lax.rng_bit_generator`` on CPU (``tests/test_random_philox.py`` keeps checking it):

- the Philox key is ``state[0:2]``; block ``i`` hashes the 128-bit counter whose words are
  ``(state[2], state[3], state[0], state[1])``, plus ``i`` (a carry out of the low 64 bits reaches
  ``state[0]``'s word);
- each block gives four uint32 words, concatenated in block order and then row-major over the
  output shape; 8- and 16-bit outputs keep the low bits of one word each, 64-bit outputs join two
  consecutive words (low word first);
- the new state is the input state with its low 64-bit counter ``state[3]:state[2]`` advanced by
  the number of blocks (modulo 2**64; ``state[0:2]`` unchanged).

The hash's 32x32 -> 64-bit products are written with 16-bit halves in uint32 (every partial
product fits), so the graph needs no 64-bit integers even in float32 exports. ``RNG_THREE_FRY``
and other state sizes are declined with the reason.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from jax import lax

#: Philox-4x32 multipliers and Weyl key increments (Salmon et al., SC 2011).
_M0, _M1 = 0xD2511F53, 0xCD9E8D57
_W0, _W1 = 0x9E3779B9, 0xBB67AE85
_ROUNDS = 10
_U32 = jnp.uint32


def _mulhilo(m: int, x):
    """(high, low) 32-bit halves of ``m * x`` for a constant ``m`` and uint32 ``x``."""
    ah, al = _U32(m >> 16), _U32(m & 0xFFFF)
    xh, xl = x >> 16, x & 0xFFFF
    ll, lh, hl, hh = al * xl, al * xh, ah * xl, ah * xh  # each < 2**32
    cross = (ll >> 16) + (lh & 0xFFFF) + (hl & 0xFFFF)  # < 3 * 2**16
    low = (cross << 16) | (ll & 0xFFFF)
    high = hh + (lh >> 16) + (hl >> 16) + (cross >> 16)
    return high, low


def _add64(lo, hi, n):
    """``hi:lo + n`` on two uint32 words (``n`` uint32), and the carry out of ``hi`` (0 or 1)."""
    new_lo = lo + n
    carry = (new_lo < lo).astype(_U32)
    new_hi = hi + carry
    return new_lo, new_hi, carry & (new_hi == 0).astype(_U32)


def philox_words(state, n_words: int):
    """The first ``n_words`` uint32 words of XLA's Philox stream for a ``uint32[4]`` state, and the
    state after them."""
    blocks = (n_words + 3) // 4
    k0, k1, c_lo, c_hi = state[0], state[1], state[2], state[3]
    # The 128-bit counter (state[2], state[3], state[0], state[1]) + block index.
    w0, w1, carry = _add64(c_lo, c_hi, lax.iota(_U32, blocks))
    w2, w3, _ = _add64(jnp.broadcast_to(k0, (blocks,)), jnp.broadcast_to(k1, (blocks,)), carry)

    def round_(_, carry):
        ctr, (key0, key1) = carry
        hi0, lo0 = _mulhilo(_M0, ctr[0])
        hi1, lo1 = _mulhilo(_M1, ctr[2])
        return (hi1 ^ ctr[1] ^ key0, lo1, hi0 ^ ctr[3] ^ key1, lo0), (key0 + _U32(_W0), key1 + _U32(_W1))

    # The ten identical rounds as one loop (a Loop of one round's 40 nodes, not 400 unrolled).
    ctr, _ = lax.fori_loop(0, _ROUNDS, round_, ((w0, w1, w2, w3), (k0, k1)))
    words = jnp.stack(ctr, axis=1).reshape(-1)[:n_words]
    new_lo, new_hi, _ = _add64(c_lo, c_hi, _U32(blocks))  # the state keeps the low 64 bits
    return words, jnp.stack([k0, k1, new_lo, new_hi])


def rng_bit_generator(state, shape, dtype):
    """``(new_state, bits)`` as XLA's CPU ``rng_bit_generator(state, shape, dtype)`` with the
    default (Philox) algorithm."""
    dtype = np.dtype(dtype)
    size = int(np.prod(shape, dtype=np.int64))
    per = 2 if dtype.itemsize == 8 else 1
    words, new_state = philox_words(state, size * per)
    if per == 2:
        pairs = words.reshape(size, 2).astype(dtype)
        bits = pairs[:, 0] | (pairs[:, 1] << 32)
    elif dtype.itemsize < 4:
        bits = (words & _U32((1 << (8 * dtype.itemsize)) - 1)).astype(dtype)
    else:
        bits = words.astype(dtype)
    return new_state, bits.reshape(shape)


__all__ = ["philox_words", "rng_bit_generator"]
