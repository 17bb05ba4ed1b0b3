"""Dtype sweep: common user-facing functions x every dtype JAX has, exported and run in onnxruntime.

A valid ONNX graph can still fail to load in onnxruntime (no kernel for an op at a dtype: ``TopK``
of uint32, ``Pad`` of int16, ...) or compute something else at a dtype's edge (the lowest signed
value, unsigned values above ``2**(bits-1)``, NaN, integer overflow, which XLA wraps). Each
(function, dtype) pair JAX itself accepts (found by tracing it, not by a hand list) is exported
with ``to_onnx``, run in onnxruntime and compared with JAX by ``jax2onnx.verification.compare.compare``:
integers and bools exactly (as integers: 64-bit ones too), floats with a
tolerance for their width. 64-bit dtypes are exported with ``enable_double_precision=True``. Some
functions also run with a symbolic batch dim. A pair that traces but that JAX itself cannot
compile (``cumlogsumexp`` of an int) is skipped, saying so, when its export fails.

Default session: a deterministic subset (about a fifth of the pairs, every function and every
dtype in it). ``JAX2ONNX_DTYPE_SWEEP=full`` runs the whole matrix (``nox -s fuzz`` does).

Every pair here exports to a graph that runs and matches; none needed to become an export error.
What a graph cannot reproduce is left out of the values, each with its reason where it is left
out: the sign of a NaN (XLA's sort order reads it, no ONNX op can: ``partition``), subnormals
(XLA on CPU flushes them: ``_extreme``), and a Python branch JAX takes on a concrete empty input
(``nonzero_size`` runs with static shapes only). Known failures outside this sweep's fixes are
strict xfails in ``KNOWN_FAILURES``.
"""

from __future__ import annotations

import dataclasses
import os
import zlib
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import onnx_ir
import pytest

pytest.importorskip("jax2onnx_jnp")

from jax import lax  # noqa: E402
from jax2onnx import compat, to_onnx  # noqa: E402
from jax2onnx.dtypes import is_float as _is_float  # noqa: E402
from jax2onnx.verification.compare import compare, jax_expected, onnx_runner  # noqa: E402

FULL = os.environ.get("JAX2ONNX_DTYPE_SWEEP") == "full"
#: export at this opset (default: to_onnx's); nox -s fuzz also runs the floor, 17
OPSET = {"opset": int(os.environ["JAX2ONNX_DTYPE_SWEEP_OPSET"])} if os.environ.get("JAX2ONNX_DTYPE_SWEEP_OPSET") else {}

BF16 = np.dtype(jnp.bfloat16)
DTYPES = [np.dtype(t) for t in (np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32,
                                np.uint64, np.float16)] + [BF16] + [np.dtype(np.float32), np.dtype(np.float64)]


# ---------------------------------------------------------------------------------------------
# Inputs: one (2, 4) array per operand, values at the dtype's edges.

SHAPE = (2, 4)


def _edge(dtype: np.dtype, nan: bool) -> list[Any]:
    """Eight values at the edges of ``dtype``: its lowest and highest value, unsigned values
    above ``2**(bits-1)``, -1/0/1, and for floats (when NaN is defined there) NaN and infinities."""
    if dtype == np.bool_:
        return [True, False, True, True, False, False, True, False]
    if dtype.kind == "i":
        info = np.iinfo(dtype)
        return [info.min, -1, 0, 1, info.max, -7, 5, info.min + 1]
    if dtype.kind == "u":
        half = 2 ** (8 * dtype.itemsize - 1)
        return [0, 1, half, 2 * half - 1, half + 3, 7, 5, half - 1]
    if nan:
        return [np.nan, -np.inf, np.inf, -0.0, 1.5, -2.25, 3.0, 0.5]
    return [0.25, -1.5, 1.5, -0.0, 2.0, -2.25, 3.0, 0.5]


def _second(dtype: np.dtype, nan: bool) -> list[Any]:
    """A second operand: other edge values, so x op y meets (lowest, -1), (highest, 1), ..."""
    if dtype == np.bool_:
        return [True, True, False, True, False, True, False, False]
    if dtype.kind == "i":
        info = np.iinfo(dtype)
        return [3, info.min, info.max, -1, 2, 0, -7, 5]
    if dtype.kind == "u":
        half = 2 ** (8 * dtype.itemsize - 1)
        return [3, 2 * half - 1, half, 0, 2, half + 3, 7, 1]
    if nan:
        return [1.0, np.nan, -np.inf, 0.0, -1.5, 2.0, 3.0, -0.5]
    return [1.0, -0.5, -1.5, 0.0, 1.5, 2.0, 3.0, -0.25]


def _small(dtype: np.dtype) -> list[Any]:
    """Values every function is defined on and no result overflows: for float -> int casts,
    transcendental functions of ints, shift amounts' partner, bincount."""
    if dtype == np.bool_:
        return [True, False, True, True, False, False, True, False]
    if dtype.kind == "u":
        return [0, 1, 3, 2, 5, 4, 7, 1]
    if dtype.kind == "i":
        return [0, -1, 3, 2, -5, 4, 7, 1]
    return [0.5, 1.75, 3.0, 0.0, 7.5, 100.25, 2.0, 0.25]


def _divisor(dtype: np.dtype) -> list[Any]:
    """Divisors for the edge values: zero (XLA defines x / 0 for ints, ONNX traps) and -1 under the
    lowest value (lowest / -1 overflows)."""
    if dtype == np.bool_:
        return [True] * 8
    if dtype.kind == "u":
        return [3, 0, 7, 1, 2, 2 ** (8 * dtype.itemsize - 1) + 1, 0, 9]
    if dtype.kind == "i":
        return [-1, 3, 0, 1, 2, -5, 0, -1]
    return [3.0, -2.0, 0.0, 1.5, -0.5, np.nan, 4.0, np.inf]


def _shift(dtype: np.dtype) -> list[Any]:
    """Shift amounts, some at or beyond the width (JAX defines those: 0, or the sign)."""
    if dtype.kind not in "iu":
        return _small(dtype)
    b = 8 * dtype.itemsize
    return [0, 1, 3, b - 1, b, b + 3, 2, 5]


def _extreme(dtype: np.dtype) -> list[Any]:
    """Floats at the ends of their range: the largest finite value and the smallest normal one, of
    both signs (ints: the edge values). No subnormals: XLA on CPU flushes them to zero (inputs and
    results), onnxruntime keeps them unless its session option ``session.set_denormal_as_zero``
    is set; a graph cannot say which, and flushing by hand around every op is not worth its cost."""
    if not _is_float(dtype):
        return _edge(dtype, True)
    info = jnp.finfo(dtype)
    big, tiny = float(info.max), float(info.smallest_normal)
    return [big, -big, tiny, -tiny, 2.5, -0.0, big / 2, 1.0]


VALUES: dict[str, Callable[[np.dtype], list[Any]]] = {
    "extreme": _extreme,
    "edge": lambda dt: _edge(dt, True),
    "finite": lambda dt: _edge(dt, False),
    "second": lambda dt: _second(dt, True),
    "second_finite": lambda dt: _second(dt, False),
    "small": _small,
    "divisor": _divisor,
    "shift": _shift,
}


# ---------------------------------------------------------------------------------------------
# The functions.


@dataclasses.dataclass(frozen=True)
class Case:
    name: str
    fn: Callable[..., Any]
    values: tuple[str, ...] = ("edge",)  # one VALUES key per operand
    symbolic: bool = False  # also run with a symbolic batch dim ("B", 4)
    tol: float = 1.0  # multiplies the float tolerance (for functions that round more)
    x64: bool = False  # export with enable_double_precision whatever the input dtype (a 64-bit cast)


def _window(op, init_of):
    return lambda x: lax.reduce_window(x, init_of(x.dtype), op, (1, 2), (1, 1), "VALID")


def _lowest(dtype):
    dtype = np.dtype(dtype)
    if _is_float(dtype):
        return np.asarray(-np.inf, dtype)
    if dtype == np.bool_:
        return np.asarray(False)
    return np.asarray(np.iinfo(dtype).min, dtype)


_IDX = np.asarray([3, 0, -1, 2, 0], np.int32)  # duplicates and a negative (numpy-style) index
_ROWS = np.asarray([1, 0, 1], np.int32)


def _unary(name: str, **kw: Any) -> Case:
    return Case(name, getattr(jnp, name), **kw)


def _binary(name: str, values=("edge", "second"), **kw: Any) -> Case:
    return Case(name, getattr(jnp, name), values=values, **kw)


CASES = [
    # elementwise math (ints and bools are promoted to floats by jnp)
    *(_unary(n, values=("small",), tol=2.0) for n in ("exp", "log", "sqrt", "sin", "tanh", "log1p", "expm1")),
    *(_unary(n) for n in ("floor", "ceil", "round", "abs", "sign", "negative", "square", "isnan", "isfinite")),
    Case("sigmoid", jax.nn.sigmoid, values=("small",), tol=2.0),
    Case("relu", jax.nn.relu, symbolic=True),
    Case("softmax", lambda x: jax.nn.softmax(x, axis=-1), values=("finite",), tol=4.0, symbolic=True),
    Case("gelu", jax.nn.gelu, values=("finite",), tol=4.0),
    Case("power_int", lambda x: x**3, values=("small",)),
    # binary
    *(_binary(n) for n in ("add", "subtract", "multiply", "maximum", "minimum")),
    _binary("true_divide", values=("edge", "divisor")),
    _binary("floor_divide", values=("edge", "divisor")),
    _binary("remainder", values=("edge", "divisor")),
    *(_binary(n) for n in ("equal", "not_equal", "less", "greater_equal")),
    *(_binary(n) for n in ("bitwise_and", "bitwise_or", "bitwise_xor", "logical_and", "logical_xor")),
    _binary("left_shift", values=("edge", "shift")),
    _binary("right_shift", values=("edge", "shift")),
    _unary("bitwise_not"),
    _unary("logical_not"),
    Case("where", lambda x, y: jnp.where(x > y, x, y), values=("edge", "second"), symbolic=True),
    Case("clip", lambda x: jnp.clip(x, 1, 5), symbolic=True),
    Case("clip_array", lambda x, y: jnp.clip(x, y, y + 3), values=("edge", "second_finite")),
    # reductions
    *(Case(f"{n}_axis", lambda x, n=n: getattr(jnp, n)(x, axis=1), symbolic=n in ("sum", "max", "any"))
      for n in ("sum", "prod", "max", "min", "mean", "any", "all", "argmax", "argmin")),
    *(Case(f"{n}_batch", lambda x, n=n: getattr(jnp, n)(x, axis=0), symbolic=True) for n in ("sum", "prod", "min", "argmax")),
    *(Case(f"{n}_all", lambda x, n=n: getattr(jnp, n)(x)) for n in ("sum", "max", "min", "argmax")),
    Case("var", lambda x: jnp.var(x, axis=1), values=("finite",), tol=4.0, symbolic=True),
    # cumulative
    Case("cumsum", lambda x: jnp.cumsum(x, axis=1), symbolic=True),
    Case("cumprod", lambda x: jnp.cumprod(x, axis=1)),
    Case("cumprod_batch", lambda x: jnp.cumprod(x, axis=0), symbolic=True),
    Case("cummax", lambda x: lax.cummax(x, axis=1), symbolic=True),
    Case("cummin", lambda x: lax.cummin(x, axis=0)),
    # order
    Case("sort", lambda x: jnp.sort(x, axis=1), symbolic=True),
    Case("argsort_batch", lambda x: jnp.argsort(x, axis=0), symbolic=True),
    Case("sort_flat", lambda x: jnp.sort(x, axis=None)),
    Case("argsort", lambda x: jnp.argsort(x, axis=1, stable=True)),
    Case("argsort_descending", lambda x: jnp.argsort(x, axis=0, descending=True)),
    Case("top_k", lambda x: lax.top_k(x, 2), symbolic=True),
    Case("searchsorted", lambda x, y: jnp.searchsorted(jnp.sort(x[0]), y), values=("edge", "second"), symbolic=True),
    Case("unique_size", lambda x: jnp.unique(x, size=8), symbolic=True),
    Case("bincount", lambda x: jnp.bincount(x.ravel(), length=6), values=("small",), symbolic=True),
    # indexing
    Case("take", lambda x: jnp.take(x, _IDX, axis=1), symbolic=True),
    Case("gather_rows", lambda x: x[_ROWS], symbolic=True),
    Case("dynamic_slice", lambda x: lax.dynamic_slice(x, (jnp.argmax(x[0] != x[0]).astype(jnp.int32), 1), (1, 2))),
    Case("dynamic_update_slice", lambda x, y: lax.dynamic_update_slice(x, y[:1, :2], (1, 2)), values=("edge", "second")),
    Case("scatter_add", lambda x, y: x.at[:, _IDX[:3]].add(y[:, :3]), values=("edge", "second"), symbolic=True),
    Case("scatter_max", lambda x, y: x.at[:, _IDX[:3]].max(y[:, :3]), values=("edge", "second"), symbolic=True),
    Case("scatter_min", lambda x, y: x.at[:, _IDX[:3]].min(y[:, :3]), values=("edge", "second")),
    Case("scatter_set", lambda x, y: x.at[1, _IDX[:2]].set(y[0, :2]), values=("edge", "second")),
    # layout
    Case("concatenate", lambda x, y: jnp.concatenate([x, y], axis=1), values=("edge", "second"), symbolic=True),
    Case("pad", lambda x: jnp.pad(x, ((1, 0), (0, 2))), symbolic=True),
    Case("pad_edge", lambda x: jnp.pad(x, ((0, 1), (2, 0)), mode="edge"), symbolic=True),
    Case("pad_value", lambda x: jnp.pad(x, 1, constant_values=x[0, 0])),
    Case("roll", lambda x: jnp.roll(x, 1, axis=1), symbolic=True),
    Case("flip", lambda x: jnp.flip(x, axis=1), symbolic=True),
    Case("tile", lambda x: jnp.tile(x, (2, 1)), symbolic=True),
    Case("repeat", lambda x: jnp.repeat(x, 2, axis=1), symbolic=True),
    Case("reshape_transpose", lambda x: x.reshape(4, 2).T),
    Case("broadcast", lambda x: jnp.broadcast_to(x[:, None, :], (2, 3, 4))),
    Case("stack", lambda x, y: jnp.stack([x, y], axis=-1), values=("edge", "second")),
    # windows
    Case("reduce_window_max", _window(lax.max, _lowest), symbolic=True),
    Case("reduce_window_sum", _window(lax.add, lambda dt: np.zeros((), dt)), symbolic=True),
    Case("max_pool_same", lambda x: lax.reduce_window(x, _lowest(x.dtype), lax.max, (1, 3), (1, 2), "SAME")),
    # linear algebra
    Case("matmul", lambda x, y: x @ y.T, values=("finite", "second_finite"), tol=4.0, symbolic=True),
    Case("dot_vector", lambda x, y: jnp.dot(x[0], y[1]), values=("finite", "second_finite"), tol=4.0),
    Case("einsum", lambda x, y: jnp.einsum("ij,kj->ik", x, y), values=("finite", "second_finite"), tol=4.0),
    Case("matmul_fn", lambda x, y: jnp.matmul(x, y.T), values=("finite", "second_finite"), tol=4.0),
    Case("dot_general_batch_last", lambda x, y: lax.dot_general(x, y, (((0,), (0,)), ((1,), (1,)))),
         values=("finite", "second_finite"), tol=4.0),
    Case("convolve", lambda x, y: jnp.convolve(x[0], y[1, :3]), values=("finite", "second_finite"), tol=4.0),
    # more elementwise
    *(_unary(n, values=("small",), tol=2.0) for n in ("arcsin", "arctan", "sinh", "cosh", "tan", "cbrt")),
    Case("erf", jax.scipy.special.erf, values=("small",), tol=2.0),
    Case("power", lambda x, y: jnp.power(x, jnp.abs(y) % 4), values=("small", "small")),
    Case("arctan2", jnp.arctan2, values=("edge", "second"), tol=2.0),
    Case("fmod", jnp.fmod, values=("edge", "divisor")),
    Case("logaddexp", jnp.logaddexp, values=("finite", "second_finite"), tol=2.0),
    Case("nan_to_num", jnp.nan_to_num),
    Case("population_count", lax.population_count),
    Case("clz", lax.clz),
    Case("bitcast_unsigned", lambda x: lax.bitcast_convert_type(x, jnp.dtype(f"uint{8 * x.dtype.itemsize}"))),
    Case("select_n", lambda x, y: lax.select_n(x > y, x, y), values=("edge", "second")),
    Case("one_hot", lambda x: jax.nn.one_hot(x, 5), values=("small",), symbolic=True),
    Case("log_softmax", lambda x: jax.nn.log_softmax(x, axis=-1), values=("finite",), tol=4.0, symbolic=True),
    Case("logsumexp", lambda x: jax.scipy.special.logsumexp(x, axis=-1), values=("finite",), tol=4.0),
    # more reductions and order
    Case("argmax_keepdims", lambda x: jnp.argmax(x, axis=0, keepdims=True), symbolic=True),
    Case("count_nonzero", lambda x: jnp.count_nonzero(x, axis=1), symbolic=True),
    Case("cumsum_reverse", lambda x: lax.cumsum(x, axis=1, reverse=True), symbolic=True),
    Case("cumsum_flat", lambda x: jnp.cumsum(x)),
    # static only: for an empty input jnp.nonzero takes a Python branch that ignores fill_value,
    # which a graph traced with a symbolic batch (like jax.export's) cannot follow
    Case("nonzero_size", lambda x: jnp.nonzero(x, size=5, fill_value=-1)),
    Case("lexsort", lambda x, y: jnp.lexsort((x[0], y[0])), values=("edge", "second")),
    Case("sort_two_keys", lambda x, y: lax.sort((x, y), num_keys=2, dimension=1), values=("edge", "second")),
    Case("searchsorted_right", lambda x, y: jnp.searchsorted(jnp.sort(x[0]), y, side="right"),
         values=("edge", "second")),
    Case("tril", jnp.tril),
    Case("diff", lambda x: jnp.diff(x, axis=1)),
    Case("take_fill", lambda x: jnp.take(x, np.asarray([0, 7, -9, 2]), axis=1, mode="fill"), symbolic=True),
    Case("take_clip", lambda x: jnp.take(x, np.asarray([0, 7, -9, 2]), axis=1, mode="clip")),
    Case("gather_oob_get", lambda x: x.at[:, np.asarray([1, 9])].get(mode="fill", fill_value=None)),
    Case("scatter_mul", lambda x, y: x.at[:, _IDX[:3]].mul(y[:, :3]), values=("edge", "second")),
    Case("scatter_add_drop", lambda x, y: x.at[:, np.asarray([0, 9, 2])].add(y[:, :3], mode="drop"),
         values=("edge", "second")),
    Case("reduce_window_min", _window(lax.min, lambda dt: -_lowest(dt) if _is_float(np.dtype(dt))
                                      else np.asarray(True if np.dtype(dt) == np.bool_ else np.iinfo(dt).max, dt))),
    Case("rev_slice_stride", lambda x: x[::-1, ::2]),
    Case("expand_squeeze", lambda x: jnp.squeeze(jnp.expand_dims(x, 0), 0)[None]),
    Case("full_like", lambda x: jnp.full_like(x, 3) + x),
    Case("max_where_initial", lambda x: jnp.max(x, axis=1, initial=x[0, 0], where=x[0] != x[1])),
    Case("sum_where", lambda x: jnp.sum(x, axis=0, where=x[0] != x[1])),
    Case("std", lambda x: jnp.std(x, axis=1), values=("finite",), tol=8.0),
    Case("median", lambda x: jnp.median(x, axis=1), values=("finite",)),
    Case("sort_descending", lambda x: jnp.sort(x, axis=1, descending=True), symbolic=True),
    # finite: jnp.partition is -top_k(-x), and XLA ranks a NaN by its sign bit (-NaN below -inf),
    # which no ONNX op can read (see the lax pack's total_order.py)
    Case("partition", lambda x: jnp.partition(x, 2, axis=1), values=("finite",)),
    Case("argpartition", lambda x: jnp.argpartition(x, 1, axis=1)[:, :1], values=("finite",)),
    Case("isin", lambda x, y: jnp.isin(x, y), values=("edge", "second")),
    Case("logical_or", jnp.logical_or, values=("edge", "second")),
    Case("signbit", jnp.signbit),
    Case("copysign", jnp.copysign, values=("edge", "second")),
    Case("heaviside", jnp.heaviside, values=("edge", "second")),
    Case("isinf", jnp.isinf),
    Case("round_decimals", lambda x: jnp.round(x, 1), values=("finite",)),
    Case("unpackbits", lambda x: jnp.unpackbits(x, axis=1)),
    Case("outer", lambda x, y: jnp.outer(x[0], y[1]), values=("finite", "second_finite")),
    Case("kron", lambda x, y: jnp.kron(x[:, :2], y[:, :2]), values=("finite", "second_finite")),
    Case("split", lambda x: jnp.split(x, 2, axis=1)),
    Case("repeat_total", lambda x: jnp.repeat(x, np.asarray([1, 0, 2, 1]), axis=1, total_repeat_length=4)),
    Case("unravel_index", lambda x: jnp.unravel_index(x, (3, 4)), values=("small",)),
    Case("dynamic_index", lambda x: lax.dynamic_index_in_dim(x, jnp.argmin(x[0]), axis=1)),
    Case("cumlogsumexp", lambda x: lax.cumlogsumexp(x, axis=1), values=("finite",), tol=4.0),
    Case("trapezoid", lambda x: jnp.trapezoid(x, axis=1), values=("finite",)),
    Case("polyval", lambda x, y: jnp.polyval(x[0], y), values=("small", "small"), tol=4.0),
    Case("integer_pow", lambda x: lax.integer_pow(x, 5)),
    Case("rsqrt", lax.rsqrt, values=("small",), tol=2.0),
    Case("reduce_precision", lambda x: lax.reduce_precision(x, exponent_bits=5, mantissa_bits=2)),
    Case("conv2d", lambda x, y: lax.conv(x[None, None], y[None, None, :, :3], (1, 1), "SAME"),
         values=("finite", "second_finite"), tol=4.0),
    Case("silu", jax.nn.silu, values=("finite",), tol=2.0),
    Case("elu", jax.nn.elu, values=("finite",), tol=2.0),
    Case("leaky_relu", jax.nn.leaky_relu),
    Case("relu6", jax.nn.relu6),
    Case("softplus", jax.nn.softplus, values=("finite",), tol=2.0),
    Case("gelu_exact", lambda x: jax.nn.gelu(x, approximate=False), values=("finite",), tol=4.0),
    Case("standardize", lambda x: jax.nn.standardize(x, axis=-1), values=("finite",), tol=16.0),
    Case("shift_right_logical", lax.shift_right_logical, values=("edge", "shift")),
    Case("lax_rem", lax.rem, values=("edge", "divisor")),
    Case("lax_div", lax.div, values=("edge", "divisor")),
    Case("cumsum_int8_dtype", lambda x: jnp.cumsum(x, axis=1, dtype=jnp.int8)),
    Case("average_weights", lambda x, y: jnp.average(x, axis=1, weights=jnp.abs(y) + 1), values=("small", "small")),
    Case("einsum3", lambda x, y: jnp.einsum("ij,kj,k->i", x, y, y[:, 0]), values=("small", "small")),
    Case("take_along_axis", lambda x: jnp.take_along_axis(x, jnp.argsort(x, axis=1, stable=True), axis=1)),
    Case("put_along_axis", lambda x, y: jnp.put_along_axis(x, np.asarray([[1], [3]]), y[:, :1], axis=1, inplace=False),
         values=("edge", "second")),
    Case("select3", lambda x, y: jnp.select([x > y, x < y], [x, y], x[0, 0]), values=("edge", "second")),
    Case("argwhere_size", lambda x: jnp.argwhere(x, size=3, fill_value=-1)),
    Case("flatnonzero_size", lambda x: jnp.flatnonzero(x, size=3)),
    Case("searchsorted_compare_all", lambda x, y: jnp.searchsorted(jnp.sort(x[0]), y, method="compare_all"),
         values=("edge", "second")),
    Case("searchsorted_sort", lambda x, y: jnp.searchsorted(jnp.sort(x[0]), y, method="sort"),
         values=("edge", "second")),
    Case("bincount_weights", lambda x, y: jnp.bincount(x.ravel(), weights=y.ravel(), length=5), values=("small", "second")),
    Case("unique_counts", lambda x: jnp.unique(x, size=8, return_counts=True, return_inverse=True)),
    Case("setdiff1d", lambda x, y: jnp.setdiff1d(x, y, size=4), values=("edge", "second")),
    Case("intersect1d", lambda x, y: jnp.intersect1d(x, y, size=4), values=("edge", "second")),
    Case("rot90", jnp.rot90),
    Case("moveaxis_roll2", lambda x: jnp.roll(jnp.moveaxis(x, 0, 1), (1, -1), axis=(0, 1))),
    Case("diag_trace", lambda x: (jnp.diagonal(x), jnp.trace(x))),
    Case("trunc", jnp.trunc),
    Case("nextafter", lambda x, y: jnp.nextafter(x, y), values=("edge", "second")),
    Case("lgamma", lax.lgamma, values=("small",), tol=8.0),
    Case("digamma", lax.digamma, values=("small",), tol=8.0),
    Case("erf_inv", lax.erf_inv, values=("small",), tol=8.0),
    Case("round_even", lambda x: lax.round(x, lax.RoundingMethod.TO_NEAREST_EVEN)),
    Case("real_imag", lambda x: (jnp.real(x), jnp.imag(x), jnp.conj(x))),
    # the ends of the float range: overflow to inf, subnormals kept or flushed alike
    *(Case(f"{n}_extreme", fn, values=("extreme",) * k) for n, fn, k in (
        ("add", jnp.add, 2), ("multiply", lambda x, y: x * y[::-1], 2), ("abs", jnp.abs, 1), ("sign", jnp.sign, 1),
        ("sum", lambda x: jnp.sum(x, axis=1), 1), ("cumsum", lambda x: jnp.cumsum(x, axis=0), 1),
        ("sort", lambda x: jnp.sort(x, axis=1), 1), ("argmin", lambda x: jnp.argmin(x, axis=1), 1),
        ("floor", jnp.floor, 1), ("round", jnp.round, 1), ("maximum", lambda x, y: jnp.maximum(x, y[::-1]), 2),
        ("reciprocal", jnp.reciprocal, 1), ("sqrt", lambda x: jnp.sqrt(jnp.abs(x)), 1),
        ("to_float16", lambda x: x.astype(jnp.float16), 1), ("to_bfloat16", lambda x: x.astype(jnp.bfloat16), 1),
        ("to_float32", lambda x: x.astype(jnp.float32), 1), ("mean", lambda x: jnp.mean(x, axis=1), 1),
        ("matmul", lambda x, y: x @ y.T, 2), ("max_pool", _window(lax.max, _lowest), 1))),
]

#: casts from every dtype to every dtype: float -> int of NaN or out-of-range values is not defined
#: (in JAX either), so those use small values
CASTS = [Case(f"astype_{t.name}", lambda x, t=t: x.astype(t), x64=t.itemsize == 8) for t in DTYPES]
CASES += CASTS

_BY_NAME = {c.name: c for c in CASES}
assert len(_BY_NAME) == len(CASES), "case names must be unique"


def _values_of(case: Case, dtype: np.dtype, shape: tuple[int, ...]) -> list[np.ndarray]:
    kinds = case.values
    if case in CASTS and _is_float(dtype):
        target = np.dtype(case.name.removeprefix("astype_"))
        if not _is_float(target) and target != np.bool_:
            kinds = ("small",)
    n = int(np.prod(shape))
    out = []
    for k in kinds:
        vals = VALUES[k](dtype)
        vals = (vals * max(1, (n + len(vals) - 1) // len(vals)))[:n]
        out.append(np.asarray(vals).astype(dtype).reshape(shape))
    return out


# ---------------------------------------------------------------------------------------------
#: Known failures not fixed yet (strict xfails: they fail once fixed), by (case name, symbolic):
#: (the opset from which the case passes, the reason).
KNOWN_FAILURES: dict[tuple[str, bool], tuple[int, str]] = {}


# ---------------------------------------------------------------------------------------------
# The matrix: every pair JAX traces.


def _wrapped(case: Case, dtype: np.dtype) -> Callable[..., Any]:
    """The function as exported: onnxruntime's Python API takes and returns no bfloat16 arrays, so a
    bfloat16 operand arrives as float32 (its values are bfloat16 values: the cast is exact) and a
    bfloat16 result leaves as float32 (exact too). The graph still computes in bfloat16."""

    def run(*xs):
        if dtype == BF16:
            xs = [x.astype(BF16) for x in xs]
        out = case.fn(*xs)
        return jax.tree_util.tree_map(lambda o: o.astype(jnp.float32) if o.dtype == BF16 else o, out)

    return run


def _feed_dtype(dtype: np.dtype) -> np.dtype:
    return np.dtype(np.float32) if dtype == BF16 else dtype


def _double(case: Case, dtype: np.dtype) -> bool:
    return case.x64 or dtype.itemsize == 8


def _jax_accepts(case: Case, dtype: np.dtype) -> bool:
    specs = [jax.ShapeDtypeStruct(SHAPE, _feed_dtype(dtype)) for _ in case.values]
    with compat.x64_enabled(_double(case, dtype)):
        try:
            jax.eval_shape(_wrapped(case, dtype), *specs)
        except Exception:  # noqa: BLE001 - any refusal at trace time: JAX does not define the pair
            return False
    return True


def _jax_compiles(fn: Callable[..., Any], specs: list[Any], double: bool) -> bool:
    with compat.x64_enabled(double):
        try:
            jax.jit(fn).lower(*specs)
        except Exception:  # noqa: BLE001 - JAX's own refusal
            return False
    return True


def _jax_outputs(fn: Callable[..., Any], xs: list[np.ndarray], double: bool) -> Any:
    """JAX's outputs as :func:`compare` compares them, or None where JAX itself has no value
    (argmax or max over an empty batch)."""
    try:
        return jax_expected(fn, xs, double=double)
    except Exception:  # noqa: BLE001 - JAX's own refusal
        return None


def _selected(name: str, dtype: np.dtype) -> bool:
    """The default subset: a fixed sixth of the pairs (crc32, so every run picks the same), and one
    dtype of every function."""
    if FULL:
        return True
    return zlib.crc32(f"{name}/{dtype.name}".encode()) % 6 == 0 or dtype == DTYPES[zlib.crc32(name.encode()) % len(DTYPES)]


def _pairs(symbolic: bool) -> list[Any]:
    pairs = []
    for case in CASES:
        if symbolic and not case.symbolic:
            continue
        for dtype in DTYPES:
            if not _selected(case.name + ("/B" if symbolic else ""), dtype):
                continue
            if not _jax_accepts(case, dtype):
                continue
            marks = ()
            known = KNOWN_FAILURES.get((case.name, symbolic))
            if known is not None and OPSET.get("opset", 23) < known[0]:
                marks = pytest.mark.xfail(strict=True, reason=known[1])
            pairs.append(pytest.param(case, dtype, id=f"{case.name}-{dtype.name}", marks=marks))
    return pairs


def _tolerance(case: Case, dtype: np.dtype, out_dtypes: list[np.dtype]) -> tuple[float, float]:
    """Relative and absolute tolerance for the loosest float on the way (exact for ints/bools)."""
    widths = [d for d in [dtype, *out_dtypes] if _is_float(d)]
    if not widths:
        return 0.0, 0.0
    base = {np.dtype(np.float16): 2e-3, BF16: 1.6e-2, np.dtype(np.float32): 2e-6, np.dtype(np.float64): 1e-13}
    tol = max(base[d] for d in widths) * case.tol
    return tol, tol


def _check(case: Case, dtype: np.dtype, shape: tuple[Any, ...], runs: list[tuple[int, ...]]) -> None:
    fn = _wrapped(case, dtype)
    double = _double(case, dtype)
    feed = _feed_dtype(dtype)
    specs = [jax.ShapeDtypeStruct(shape, feed) for _ in case.values]
    try:
        model = to_onnx(fn, specs, enable_double_precision=double, **OPSET)
    except Exception:
        # Some pairs trace but JAX itself cannot compile them (cumlogsumexp of an int: its -inf
        # identity has no int value): only those may fail here.
        if not _jax_compiles(fn, specs, double):
            pytest.skip(f"JAX itself does not compile {case.name} of {dtype.name}")
        raise
    # the graph's input dtypes: a float32 operand of a 64-bit cast is traced as float64
    fed = [onnx_ir.DataType(i.type.tensor_type.elem_type).numpy() for i in model.graph.input]
    run = onnx_runner(model, threads=1)  # one session for every batch size of the symbolic variant
    for concrete in runs:
        xs = [v.astype(feed).astype(d) for v, d in zip(_values_of(case, dtype, concrete), fed)]
        if 0 in concrete:
            expected = _jax_outputs(fn, xs, double)
            if expected is None:
                continue  # JAX itself has no value here (argmax or max over an empty batch)
        else:
            expected = jax_expected(fn, xs, double=double)
        with compat.x64_enabled(double):
            outs = jax.eval_shape(fn, *[jax.ShapeDtypeStruct(x.shape, x.dtype) for x in xs])
        out_dtypes = [np.dtype(o.dtype) for o in jax.tree_util.tree_leaves(outs)]
        rtol, atol = _tolerance(case, dtype, out_dtypes)
        cmp = compare(fn, model, xs, rtol=rtol, atol=atol, enable_double_precision=double, expected=expected, runner=run)
        assert cmp.ok, f"{case.name} of {dtype.name} {concrete}: {cmp}"  # integers: exactly, as integers


@pytest.mark.parametrize(("case", "dtype"), _pairs(symbolic=False))
def test_dtype_sweep(case: Case, dtype: np.dtype) -> None:
    _check(case, dtype, SHAPE, [SHAPE])


@pytest.mark.parametrize(("case", "dtype"), _pairs(symbolic=True))
def test_dtype_sweep_symbolic_batch(case: Case, dtype: np.dtype) -> None:
    _check(case, dtype, ("B", SHAPE[1]), [(3, SHAPE[1]), (1, SHAPE[1]), (0, SHAPE[1])])
