"""jax.random in the graph, drawing exactly JAX's numbers: the PRNG primitives (``random_seed``,
``random_wrap``/``random_unwrap``, ``random_bits``, ``random_split``, ``random_fold_in``,
``random_clone``, ``random_gamma``) and the ``threefry2x32`` hash as uint32 arithmetic; the ``rbg``
impls' ``rng_bit_generator`` as XLA's CPU Philox stream (``random_philox.py``).

A typed key array is its uint32 key data (``key<fry>[3]`` is ``uint32[3, 2]``, see core's
``builder.aval_type``). The key-level primitives are lowered the way JAX lowers them: JAX's own PRNG
implementation (``seed``/``split``/``fold_in``/``random_bits`` of the key's impl, vmapped over the
key array's axes) is traced on the key data and the jaxpr inlined, so the counter layout follows
``jax_threefry_partitionable`` as it is set when ``to_onnx`` runs, exactly as a ``jax.jit`` lowered
at that moment would. What remains are ``threefry2x32`` (20 rounds of Add/rotate/Xor on uint32,
which wraps mod 2**32 in onnxruntime like in XLA), ``iota_2x32_shape`` (the 64-bit counters as two
uint32 words) and ordinary lax primitives.

A key can be a graph input: declare it as ``jax.ShapeDtypeStruct((2,), jnp.uint32)`` (raw key data,
``jax.random.wrap_key_data`` or the legacy uint32 API inside the function) or as a typed key spec
(``jax.ShapeDtypeStruct((), jax.random.key(0).dtype)``) and feed ``jax.random.key_data(key)``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax2onnx import compat
from jax2onnx.dtypes import U32
from jax2onnx.plugin import Lowerings

from . import random_philox as philox

lowerings = Lowerings()

# ---------------------------------------------------------------------------------------------
# Key-level primitives: JAX's PRNG implementation traced on the key data.


def _key_data_spec(key_aval: Any) -> jax.ShapeDtypeStruct:
    return jax.ShapeDtypeStruct((*key_aval.shape, *compat.key_data_shape(key_aval.dtype)), np.dtype(np.uint32))


def _over_keys(ndim: int, fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` on one key, mapped over ``ndim`` leading key axes (JAX's ``iterated_vmap_unary``)."""
    for _ in range(ndim):
        fn = jax.vmap(fn)
    return fn


def _spec(aval: Any) -> jax.ShapeDtypeStruct:
    return jax.ShapeDtypeStruct(aval.shape, aval.dtype)


@lowerings.register("random_wrap", "random_unwrap", "random_clone", keys=True)
def lower_key_identity(ctx, x):
    """A typed key and its uint32 key data are the same tensor here."""
    return x


@lowerings.register("random_seed", keys=True)
def lower_random_seed(ctx, seeds):
    impl = ctx.params["impl"]
    aval = ctx.avals_in[0]
    return ctx.lower_function(_over_keys(len(aval.shape), impl.seed), [seeds], specs=[_spec(aval)])


@lowerings.register("random_split", keys=True)
def lower_random_split(ctx, keys):
    aval = ctx.avals_in[0]
    impl, shape = compat.key_impl(aval.dtype), tuple(ctx.params["shape"])
    split = _over_keys(len(aval.shape), lambda k: impl.split(k, shape))
    return ctx.lower_function(split, [keys], specs=[_key_data_spec(aval)])


@lowerings.register("random_fold_in", keys=True)
def lower_random_fold_in(ctx, keys, msgs):
    """Keys and messages broadcast against each other; each key folds in its message."""
    key_aval, msg_aval = ctx.avals_in
    impl = compat.key_impl(key_aval.dtype)
    shape = tuple(ctx.avals_out[0].shape)
    data_shape = compat.key_data_shape(key_aval.dtype)

    def fold_in(data, msg):
        data = jnp.broadcast_to(data, (*shape, *data_shape))
        msg = jnp.broadcast_to(msg, shape)
        return _over_keys(len(shape), impl.fold_in)(data, msg)

    return ctx.lower_function(fold_in, [keys, msgs], specs=[_key_data_spec(key_aval), _spec(msg_aval)])


@lowerings.register("random_bits", keys=True)
def lower_random_bits(ctx, keys):
    aval = ctx.avals_in[0]
    impl, p = compat.key_impl(aval.dtype), ctx.params
    bit_width, shape = int(p["bit_width"]), tuple(p["shape"])
    bits = _over_keys(len(aval.shape), lambda k: impl.random_bits(k, bit_width, shape))
    try:
        return ctx.lower_function(bits, [keys], specs=[_key_data_spec(aval)])
    except Exception as exc:
        if type(exc).__name__ != "InconclusiveDimensionOperation":
            raise
        raise NotImplementedError(
            f"drawing {bit_width}-bit random values of shape {shape} with jax_threefry_partitionable=False: that "
            f"stream pads its counters to an even count of 32-bit words, which needs the parity of a symbolic size "
            f"({str(exc).splitlines()[0]}); JAX's own jax.export stops here too. Export with the default "
            f"jax_threefry_partitionable=True, or give that axis a static size"
        ) from None


@lowerings.register("random_gamma", keys=True)
def lower_random_gamma(ctx, keys, a):
    """JAX's rejection sampler (a while loop per sample, vmapped), traced on typed keys."""
    key_aval, a_aval = ctx.avals_in
    log_space = bool(ctx.params["log_space"])
    return ctx.lower_function(lambda k, x: compat.gamma_impl(k, x, log_space=log_space), [keys, a],
                              specs=[_spec(key_aval), _spec(a_aval)])


@lowerings.register("rng_bit_generator", keys=True)
def lower_rng_bit_generator(ctx, state):
    """XLA's CPU stream (Philox-4x32-10 for RNG_DEFAULT and RNG_PHILOX, see ``random_philox.py``),
    traced as uint32 arithmetic and inlined: bit-exact with ``jax.jit`` on CPU."""
    algorithm = ctx.params.get("algorithm")
    name = getattr(algorithm, "name", str(algorithm))
    state_aval = ctx.avals_in[0]
    if name not in ("RNG_DEFAULT", "RNG_PHILOX"):
        raise NotImplementedError(
            f"rng_bit_generator with {name}: only XLA's CPU default (Philox, RNG_DEFAULT/RNG_PHILOX) is reproduced; "
            "use the default algorithm (as the 'rbg' key impls do) or threefry2x32 keys (jax.random.key(seed))"
        )
    if tuple(state_aval.shape) != (4,) or np.dtype(state_aval.dtype) != U32:
        raise NotImplementedError(
            f"rng_bit_generator with a {state_aval.dtype}{list(state_aval.shape)} state: XLA's Philox layout is "
            "reproduced for JAX's uint32[4] states (the 'rbg'/'unsafe_rbg' key data) only"
        )
    shape = tuple(ctx.params["shape"])
    if not all(isinstance(d, (int, np.integer)) for d in shape):
        raise NotImplementedError(f"rng_bit_generator with a symbolic shape {shape}: the stream length must be static")
    dtype = np.dtype(ctx.params["dtype"])
    return ctx.lower_function(lambda s: philox.rng_bit_generator(s, shape, dtype), [state],
                              specs=[jax.ShapeDtypeStruct((4,), U32)])


@lowerings.register("rng_uniform")
def lower_rng_uniform(ctx, *args):
    raise NotImplementedError(
        "rng_uniform is XLA's stateful generator: its numbers come from the device's hidden RNG state, so two calls "
        "of one jitted function return different numbers, which no ONNX graph (a function of its inputs) can match. "
        "Draw with jax.random (e.g. jax.random.uniform(key, shape)), which exports bit-exactly"
    )


# ---------------------------------------------------------------------------------------------
# threefry2x32 and its counters

#: Threefry-2x32's rotation schedule (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3",
#: SC 2011): two alternating groups of four rounds, 20 rounds in all.
_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
_GROUPS = 5
#: The key-schedule parity constant of Threefish.
_PARITY = 0x1BD11BDA


def _group_rotations() -> list[np.ndarray]:
    """Per round of a group, the rotation of each group as the multiplier ``2**r`` and the right
    shift ``32 - r`` (``uint32[5]`` each, the Scan's sequences; see :func:`_rotate_left`)."""
    rot = np.array([_ROTATIONS[g % 2] for g in range(_GROUPS)], np.uint32)
    return [(np.uint32(1) << rot[:, j]) for j in range(4)] + [np.uint32(32) - rot[:, j] for j in range(4)]


def _rotate_left(op, v, multiplier, shift):
    """``(v << r) | (v >> (32 - r))`` on uint32. The two parts share no bit, so ``|`` is ``+``, and
    ``v << r`` is ``v * 2**r`` (uint32 Mul wraps): onnxruntime's Add/Mul run several times faster than
    its BitwiseOr/BitShift kernels, which makes the whole hash about a third faster."""
    return op.Add(op.Mul(v, multiplier), op.BitShift(v, shift, direction="RIGHT"))


@lowerings.register("threefry2x32")
def lower_threefry2x32(ctx, k0, k1, x0, x1):
    """The Threefry-2x32 block cipher, 20 rounds, on uint32 words (operands broadcast).

    The five groups of four rounds are one ``Scan`` over the groups (the group's rotations and
    injection counter are its sequences, the key schedule rotates in its state): 30 nodes for the
    hash instead of 120 unrolled, which every jax.random draw pays, several times over in the
    samplers' rejection loops. onnxruntime runs it faster on large draws (10**6 bits: 94 -> 69 ms)
    and ~0.02 ms slower on small ones (the Scan's per-iteration cost); sessions start faster."""
    op = ctx.op
    word, key = ctx.avals_out[0], ctx.avals_in[0]
    out = tuple(word.shape)
    k_shapes, x_shapes = [tuple(a.shape) for a in ctx.avals_in[:2]], [tuple(a.shape) for a in ctx.avals_in[2:]]
    # The Scan's state keeps its shapes: the words start at the result's shape (counts smaller than
    # the keys are broadcast up front), the key schedule at the keys' (the result's if they differ).
    if x_shapes != [out, out]:
        full = ctx.shape_tensor(out)
        x0, x1 = (v if s == out else op.Expand(v, full) for v, s in zip((x0, x1), x_shapes, strict=True))
    if k_shapes[0] != k_shapes[1]:
        full = ctx.shape_tensor(out)
        k0, k1, key = op.Expand(k0, full), op.Expand(k1, full), word
    k2 = op.BitwiseXor(op.BitwiseXor(k0, k1), _PARITY)
    body = ctx.subgraph("threefry_groups")
    a, b = body.add_input("a", word), body.add_input("b", word)
    # The key schedule words injected after this group, and the one after the next (rotated by one each group).
    inject_a, inject_b, later = (body.add_input("schedule", key) for _ in range(3))
    multipliers = [body.add_input("rot_mul", dtype=np.uint32, shape=()) for _ in range(4)]
    shifts = [body.add_input("rot_shift", dtype=np.uint32, shape=()) for _ in range(4)]
    counter = body.add_input("group_counter", dtype=np.uint32, shape=())
    bop = body.op
    for multiplier, shift in zip(multipliers, shifts, strict=True):
        a = bop.Add(a, b)
        b = bop.BitwiseXor(_rotate_left(bop, b, multiplier, shift), a)
    # Key injection after every four rounds, with the injection counter on the second word.
    a = bop.Add(a, inject_a)
    b = bop.Add(bop.Add(b, inject_b), counter)
    graph = body.finish([a, b, inject_b, later, inject_a], [word, word, key, key, key])
    sequences = [ctx.const(c) for c in _group_rotations()] + [ctx.const(np.arange(1, _GROUPS + 1, dtype=np.uint32))]
    results = ctx.op.Scan(op.Add(x0, k0), op.Add(x1, k1), k1, k2, k0, *sequences, body=graph,
                          num_scan_inputs=len(sequences), _outputs=5)
    return results[0], results[1]


@lowerings.register("iota_2x32_shape")
def lower_iota_2x32_shape(ctx):
    """The row-major index over ``shape`` as a 64-bit count split into (high, low) uint32 words."""
    op = ctx.op
    dims = ctx.shape_tensor(tuple(ctx.params["shape"]))
    count = op.ReduceProd(dims, keepdims=0)
    index = op.Reshape(op.Range(ctx.i64(0), count, ctx.i64(1)), dims)
    high = op.Div(index, 2**32)
    low = op.BitwiseAnd(index, 2**32 - 1)
    return ctx.cast(high, U32), ctx.cast(low, U32)
