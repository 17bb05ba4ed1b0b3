"""Stands in for YOUR library: the JAX code whose calls this pack exports. Delete this module
when you make the pack your own, and point ``softclip.py``/``mish.py`` at your library instead.

It has the two things a pack usually exports:

* ``softclip``: a function built on its own JAX primitive (``mypack_softclip``), as libraries
  with custom kernels have. No installed pack knows the primitive, so this pack lowers it.
* ``mish``: a plain function of ``jax.numpy`` calls. It converts without any pack of its own
  (each primitive inside is lowered by jax2onnx-lax), but ONNX has it as one op, ``Mish``; the
  pack fuses the call into that op.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.extend.core import Primitive
from jax.interpreters import batching, mlir

softclip_p = Primitive("mypack_softclip")


def softclip(x, limit=3.0):
    """``limit * tanh(x / limit)``: smooth clipping of ``x`` into ``(-limit, limit)``."""
    return softclip_p.bind(x, limit=float(limit))


def _softclip_impl(x, *, limit):
    return limit * jnp.tanh(x / limit)


softclip_p.def_impl(_softclip_impl)
# Same shape and dtype as the input; symbolic dims ("B") pass through unchanged.
softclip_p.def_abstract_eval(lambda x, *, limit: x)
# So the primitive also runs under jax.jit (the testcases compare with jitted JAX).
mlir.register_lowering(softclip_p, mlir.lower_fun(_softclip_impl, multiple_results=False))
# Elementwise, so jax.vmap maps it as it is. (jax.grad would need a JVP rule: jax.interpreters.ad.)
batching.defvectorized(softclip_p)


def mish(x):
    """Mish activation, ``x * tanh(softplus(x))``."""
    return x * jnp.tanh(jax.nn.softplus(x))
