"""``jnp.roll`` → one Gather with constant indices where onnxruntime runs that faster than JAX's
own form (two Slices and a Concat per rolled axis, each a full copy of the array).

A roll is pure data movement, so every form here is bitwise exact; the only question is speed.
Measured in onnxruntime 1.32 (CPU, one thread; the cost of one roll in a chain of rolls, minus
the chain's run overhead):

=============================  ===========  ============  ================================
array, rolled axis             Slice+Concat  Gather        Pad(wrap) + Slice
=============================  ===========  ============  ================================
f64 (8, 32, 32), axis 0         3.6 µs       1.5 µs        3.7 µs (3.9 with both sides)
f64 (8, 32, 32), axis 1         3.7 µs       2.6 µs        3.9 µs
f64 (8, 32, 32), axis 2 (last)  4.4 µs       60 µs         7.4 µs (8.1 with both sides)
f32 (8, 32, 32), axis 1         2.6 µs       2.3 µs        2.7 µs
f32 (8, 32, 8), axis 1          1.4 µs       2.4 µs        1.5 µs
f64 (1024,)                     1.2 µs       8.1 µs        1.2 µs
=============================  ===========  ============  ================================

onnxruntime's Gather copies one block (the elements after the axis) per gathered index, at
about 7 ns per block however small; Slice+Concat costs about 1 µs of dispatch plus a copy rate
five times slower than Gather's per byte. A grid of 105 shapes (outer size 1/8/64 × axis size
8/32/128 × block after the axis 8..512 bytes, float64/float32/uint8, at most 1 MiB) fits

    Gather        ≈ 0.29 µs + 7.0 ns × blocks + 8.9 ns/KiB   (blocks: product of the sizes up to the axis)
    Slice+Concat  ≈ 1.03 µs + 42.5 ns/KiB

(median error 2 % and 5 %, at most 9 % and 29 %; it picks the faster form in all 105), and
:func:`_gather_is_faster` picks by that: Gather wins for small arrays (one node instead of
three) and where the block after the axis is over ~200 bytes; the last axis (blocks of one
element) keeps JAX's form unless the array is tiny. A ``Pad(mode="wrap")`` followed by a
Slice never beat the better of the two for a single roll (on the last axis of f64 8×32×32 it
costs 3.7 µs more than Slice+Concat). The rolls left in JAX's form are rewritten after export by
core's ``RollSplitPass``: the rolls of one array along one axis read the pieces of one Split (a
stencil's ±1: one Split into three pieces, one Concat per roll). On the heat bench step (four
rolls by ±1 along the last two axes and eight elementwise ops, 8×32×32; µs per step, float64 /
float32): JAX's form 37.1 / 27.3, Gather along axis 1 and Slice+Concat along the last 33.3 /
25.4, Gather and the shared Split 28.2 / 20.6, the shared Split on both axes 28.9 / 20.0.

Handled: static integer shifts of any sign and size (taken modulo the axis), several axes (and
an axis repeated: shifts add up), every dtype (onnxruntime's Gather, Slice and Concat kernels
copy bytes and take every tensor type). Symbolic sizes count as :data:`_SYMBOLIC_SIZE` in the
cost model. Along a symbolic axis the Gather's indices are computed on each run (Range, Mod:
about :data:`_RUNTIME_INDICES` more); JAX's body there is Shape, Mod, two Slices and a Concat.
Whole runs of one roll along a symbolic axis 0 (B = 8 / 256 / 64 at run time): f64 (B, 32, 32)
8.6 µs against 10.7 for the body, f32 (B, 256) 16.2 against 30.7, f32 (B, 16) 7.5 against 7.6.
Declined to JAX's own function, which exports as it always did: a shift that is a traced value
(``_roll_dynamic``), a symbolic rolled axis where Gather loses (or whose pieces' lengths are
symbolic), and calls where Gather wins on no axis (the body is then exactly the Slice+Concat form,
which ``RollSplitPass`` rewrites). ``axis=None`` rolls the flattened array (JAX reshapes around a
1-D ``_roll_static``): blocks of one element, so Gather wins on tiny arrays only.

Found in the trace with nothing patched (:mod:`._library`): ``jnp.roll`` calls the jitted
``jax._src.numpy.lax_numpy._roll_static``, its shifts and axes read back from the body's
concatenations.
"""

from __future__ import annotations

import math
import re

import numpy as np
from jax2onnx.plugin import Lowerings

from ._common import is_static_int
from ._library import literal_value

lowerings = Lowerings()

#: Fitted cost model (µs), see the module docstring.
_GATHER_BASE, _GATHER_PER_BLOCK, _GATHER_PER_KIB = 0.29, 0.0070, 0.0089
_CONCAT_BASE, _CONCAT_PER_KIB = 1.03, 0.0425
#: What a symbolic dimension counts as when choosing a form (a typical batch).
_SYMBOLIC_SIZE = 8
#: Computing the indices of a roll along a symbolic axis (Shape, Range, Sub, Mod on run), µs.
_RUNTIME_INDICES = 0.6


def _static_ints(value):
    """``value`` (an int or a sequence of ints) as a tuple of Python ints, or None when any part is
    not a static integer (a tracer, a float, a bool)."""
    if is_static_int(value):
        return (int(value),)
    if isinstance(value, np.ndarray) and value.ndim <= 1 and np.issubdtype(value.dtype, np.integer):
        return tuple(int(v) for v in value.reshape(-1))
    if isinstance(value, (tuple, list)) and all(is_static_int(v) for v in value):
        return tuple(int(v) for v in value)
    return None


def _plan(shift, axis, ndim):
    """``(axes, shifts)`` with each axis once (non-negative, in order of first use) and its total
    shift, or None when the arguments are not static or not valid (JAX then raises its own error)."""
    shifts, axes = _static_ints(shift), _static_ints(axis)
    if shifts is None or axes is None:
        return None
    try:
        pairs = np.broadcast_arrays(np.asarray(axes, np.int64), np.asarray(shifts, object))
    except ValueError:
        return None
    total: dict[int, int] = {}
    for ax, s in zip(*(p.reshape(-1) for p in pairs), strict=True):
        if not -ndim <= int(ax) < ndim:
            return None
        ax = int(ax) % ndim
        total[ax] = total.get(ax, 0) + int(s)
    return tuple(total), tuple(total.values())


def recognize_roll(site):
    """``_roll_static(a, shift, axis)``: one Slice/Slice/Concatenate per rolled axis, in order; the
    first piece's length along the axis is the shift modulo the axis size (JAX's concatenation of
    ``a[n - s:]`` and ``a[:n - s]``)."""
    if len(site.operands) != 1 or literal_value(site, 0) is not None or not site.avals_in[0].shape:
        return None
    shape = site.avals_in[0].shape
    axes, shifts = [], []
    for e in site.eqns("concatenate"):
        axis = int(e.params["dimension"])
        if len(e.invars) != 2:
            return None
        n, first, second = shape[axis], e.invars[0].aval.shape[axis], e.invars[1].aval.shape[axis]
        if is_static_int(n) and is_static_int(first) and n:
            shift = int(first) % int(n)
        else:
            shift = _symbolic_shift(second)
            if shift is None:
                return None
        axes.append(axis)
        shifts.append(shift)
    if not axes:
        return None
    return {"shift": tuple(shifts), "axis": tuple(axes)}


#: The length of the second piece along a symbolic axis ``N``: ``(-shift) mod N`` as JAX prints it.
_SYMBOLIC_SECOND = re.compile(r"^mod\((-?) ?(\d+), [A-Za-z_]\w*\)$")


def _symbolic_shift(second):
    """The shift of a roll along a symbolic axis, from its second piece's length ``mod(-shift, N)``
    (the verifying re-trace checks the reading), or None."""
    found = _SYMBOLIC_SECOND.match(str(second))
    if found is None:
        return None
    value = int(found.group(2))
    return value if found.group(1) else -value


def call_roll(original, arrays, params):
    return original(arrays[0], params["shift"], params["axis"])


def _size(d) -> int:
    return int(d) if is_static_int(d) else _SYMBOLIC_SIZE


def _gather_is_faster(shape, axis, itemsize) -> bool:
    """Whether one Gather along ``axis`` beats Slice+Slice+Concat in onnxruntime (the fit above);
    on a symbolic axis the indices are computed on every run (:data:`_RUNTIME_INDICES`)."""
    sizes = [_size(d) for d in shape]
    blocks = math.prod(sizes[: axis + 1])
    kib = math.prod(sizes) * itemsize / 1024
    gather = _GATHER_BASE + _GATHER_PER_BLOCK * blocks + _GATHER_PER_KIB * kib
    if not is_static_int(shape[axis]):
        gather += _RUNTIME_INDICES
    concat = _CONCAT_BASE + _CONCAT_PER_KIB * kib
    return gather < concat


def _indices(ctx, n, shift):
    """``(i - shift) mod n`` for ``i`` in ``[0, n)``: constants, or computed when ``n`` is symbolic."""
    if is_static_int(n):
        return ctx.i64(((np.arange(int(n)) - shift) % int(n)).tolist())
    size = ctx.dim_scalar(n)
    # Range(-shift, n - shift) then Mod with the divisor's sign (fmod=0): never negative for n > 0
    return ctx.op.Mod(ctx.op.Range(ctx.i64(-shift), ctx.op.Sub(size, ctx.i64(shift)), ctx.i64(1)), size)


@lowerings.register_library("jax._src.numpy.lax_numpy:_roll_static", recognize=recognize_roll, call=call_roll)
def lower_roll(ctx, x):
    shape = tuple(ctx.avals_in[0].shape)
    plan = _plan(ctx.marked.params["shift"], ctx.marked.params["axis"], len(shape))
    if plan is None:
        return None
    itemsize = np.dtype(ctx.avals_in[0].dtype).itemsize
    steps = []
    for axis, shift in zip(*plan, strict=True):
        n = shape[axis]
        if not is_static_int(n):
            if abs(shift) >= 2**62 or not _gather_is_faster(shape, axis, itemsize):
                return None  # JAX's body splits at a position computed in the graph
            steps.append((axis, shift, True))
            continue
        if n == 0 or shift % n == 0:
            continue  # nothing moves (JAX skips these axes as well)
        steps.append((axis, shift % n, _gather_is_faster(shape, axis, itemsize)))
    if steps and not any(gather for *_, gather in steps):
        return None  # the body is exactly the Slice+Concat form chosen for every axis
    for axis, shift, gather in steps:
        n = shape[axis]
        if gather:  # out[i] = x[(i - shift) mod n] along the axis
            x = ctx.op.Gather(x, _indices(ctx, n, shift), axis=axis)
        else:  # JAX's form: the last `shift` entries, then the rest
            start = int(n) - shift
            head = ctx.op.Slice(x, ctx.i64([start]), ctx.i64([int(n)]), ctx.i64([axis]))
            tail = ctx.op.Slice(x, ctx.i64([0]), ctx.i64([start]), ctx.i64([axis]))
            x = ctx.op.Concat(head, tail, axis=axis)
        # typed like the input, so core's RollSplitPass sees the size of the axis a later roll cuts
        ctx.set_aval(x, ctx.avals_in[0])
    return x if steps else ctx.op.Identity(x)

