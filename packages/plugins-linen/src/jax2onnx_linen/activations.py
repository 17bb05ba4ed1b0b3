"""Activations as Linen models call them (``nn.relu``, ``nn.gelu``, ...) and ``nn.Dropout``.

``flax.linen`` re-exports ``jax.nn``'s functions under the same names: ``nn.gelu`` is the very
object ``jax.nn.gelu``. The jnp pack's lowerings of them are keyed on the function's code, found in
the trace (``Lowerings.register_library``), so a call through ``nn.gelu`` gets the same fused op
(``Gelu``, ``Relu``, ...) with nothing here and nothing of flax replaced; a name flax defines
itself is its own function, lowered from its equations.

``nn.Dropout`` needs nothing either: deterministic (``deterministic=True`` or ``rate=0``) it
returns its input, so it leaves no node. Training-mode dropout draws random bits from a ``dropout``
rng and is lowered through the lax pack's random primitives, where supported.
"""
