"""lax ``fft`` (FFT/IFFT/RFFT/IRFFT, 1-D to 3-D over the trailing axes) → ``DFT``, and the complex
helpers ``real``/``imag``/``complex``/``conj``.

Complex values travel as real pairs: a trailing axis of 2 holding (real, imag), the layout of ONNX's
DFT (core types every complex aval that way). ONNX DFT is one axis per node, so an n-D transform is
a chain. onnxruntime's inverse DFT loses precision for lengths that are not powers of two (about
1e-8 in float64), while its forward DFT is exact, so inverses use ``ifft(z) = conj(fft(conj(z)))/N``
and IRFFT rebuilds the Hermitian half of the spectrum before doing the same. Complex graph inputs
and outputs do not exist in ONNX: functions take and return real arrays.
"""

from __future__ import annotations

import numpy as np
from jax2onnx.plugin import Lowerings

from . import complex_pairs as cp

lowerings = Lowerings()

FFT, IFFT, RFFT, IRFFT = 0, 1, 2, 3
_INT64_MIN = np.iinfo(np.int64).min


def _dft(ctx, x, axis, onesided=0):
    return ctx.op.DFT(x, None, ctx.i64(axis), onesided=onesided)


def _conj(ctx, z, dtype, scale=1.0):
    return ctx.op.Mul(z, np.asarray([scale, -scale], dtype=dtype))


def _inverse(ctx, z, axes, lengths, dtype):
    """Inverse DFT over ``axes`` with forward DFTs only: conj(fft(conj(z))) / prod(lengths)."""
    z = _conj(ctx, z, dtype)
    for axis in axes:
        z = _dft(ctx, z, axis)
    return _conj(ctx, z, dtype, 1.0 / float(np.prod(lengths)))


def _hermitian_full(ctx, half, axis, n):
    """The full length-``n`` spectrum from its first n//2+1 bins: X[n-k] = conj(X[k])."""
    tail_len = n - (n // 2 + 1)
    if tail_len == 0:
        return half
    # Bins n//2+1 .. n-1 are conj(X[n-k]), i.e. X[tail_len], X[tail_len-1], ..., X[1] conjugated.
    tail = ctx.op.Slice(half, ctx.i64([tail_len]), ctx.i64([0]), ctx.i64([axis]), ctx.i64([-1]))
    dtype = cp.part_dtype(ctx.avals_out[0])
    return ctx.op.Concat(half, _conj(ctx, tail, dtype), axis=axis)


@lowerings.register("fft")
def lower_fft(ctx, x):
    p = ctx.params
    kind = int(getattr(p["fft_type"], "value", p["fft_type"]))
    lengths = [int(n) for n in p["fft_lengths"]]
    rank = len(ctx.avals_in[0].shape)
    axes = list(range(rank - len(lengths), rank))  # signal axes; the pair axis stays last
    dtype = cp.part_dtype(ctx.avals_out[0])
    if kind == FFT:
        for axis in axes:
            x = _dft(ctx, x, axis)
        return x
    if kind == IFFT:
        return _inverse(ctx, x, axes, lengths, dtype)
    if kind == RFFT:
        y = _dft(ctx, ctx.op.Unsqueeze(x, ctx.i64([-1])), axes[-1], onesided=1)
        for axis in axes[:-1]:
            y = _dft(ctx, y, axis)
        return y
    if kind == IRFFT:
        if len(axes) > 1:  # complex inverse over the leading axes leaves a Hermitian last axis
            x = _inverse(ctx, x, axes[:-1], lengths[:-1], dtype)
        full = _hermitian_full(ctx, x, axes[-1], lengths[-1])
        z = _inverse(ctx, full, axes[-1:], lengths[-1:], dtype)
        return ctx.op.Gather(z, np.asarray(0, dtype=np.int64), axis=-1)
    raise NotImplementedError(f"fft_type {p['fft_type']!r}")


@lowerings.register("real")
def lower_real(ctx, z):
    return ctx.op.Gather(z, np.asarray(0, dtype=np.int64), axis=-1)


@lowerings.register("imag")
def lower_imag(ctx, z):
    return ctx.op.Gather(z, np.asarray(1, dtype=np.int64), axis=-1)


@lowerings.register("complex")
def lower_complex(ctx, re, im):
    out_shape = ctx.avals_out[0].shape
    # A scalar literal part (autodiff writes complex(x, 0.0)) is broadcast to the other's shape.
    re, im = (v if len(aval.shape) == len(out_shape) else ctx.op.Expand(v, ctx.shape_tensor(out_shape))
              for v, aval in zip((re, im), ctx.avals_in))
    return ctx.op.Concat(ctx.op.Unsqueeze(re, ctx.i64([-1])), ctx.op.Unsqueeze(im, ctx.i64([-1])), axis=-1)


@lowerings.register("conj")
def lower_conj(ctx, z):
    dtype = cp.part_dtype(ctx.avals_out[0])
    if np.dtype(ctx.avals_in[0].dtype).kind != "c":  # conj of a real array is that array, as complex
        pads = [0] * (2 * (len(ctx.avals_in[0].shape) + 1))
        pads[-1] = 1
        return ctx.op.Pad(ctx.op.Unsqueeze(z, ctx.i64([-1])), ctx.i64(pads))
    return _conj(ctx, z, dtype)
