"""Testcases of :mod:`jax2onnx_jnp.roll` (imported only by the pytest plugin and the coverage command)."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
from jax2onnx.dtypes import is_float
from jax2onnx.testing import Component, Testcase
from jax2onnx.testing.runner import op_types

from .helpers import grad_of_sum

_EXACT = {"rtol": 0.0, "atol": 0.0, "rtol_f64": 0.0, "atol_f64": 0.0}


def _heat_step(u):
    """The bench's periodic 5-point stencil (bench/models.py heat_step)."""
    lap = jnp.roll(u, 1, axis=-2) + jnp.roll(u, -1, axis=-2) + jnp.roll(u, 1, axis=-1) + jnp.roll(u, -1, axis=-1)
    return u + 0.1 * (lap - 4.0 * u)


def _heat_loop(u):
    return jax.lax.fori_loop(0, 3, lambda _, v: _heat_step(v), u)


def _values(dtype, shape=(4, 6)):
    """Distinct entries of ``dtype`` (a misplaced element shows); 64-bit ints near the top of their
    range, so a path through a narrower type would show too."""
    n = math.prod(shape)
    if dtype == np.bool_:
        return (np.arange(n) % 3 == 0).reshape(shape)
    values = np.arange(n) - (n // 2 if np.issubdtype(dtype, np.signedinteger) or is_float(dtype) else 0)
    if dtype in (np.int64, np.uint64):
        values = values.astype(dtype) + np.asarray(np.iinfo(dtype).max - n, dtype)
    return values.astype(dtype).reshape(shape)


def _stencil_forms(model, variant):
    """The heat step: Gather along axis -2; the ±1 rolls along the last axis read one Split (core's
    RollSplitPass) and are one Concat each."""
    ops = op_types(model)
    assert {"Gather", "Split", "Concat"} <= ops and "Slice" not in ops, f"{variant.id}: ops {sorted(ops)}"


def _runtime_indices_when_symbolic(model, variant):
    """A symbolic size on the rolled axis: the Gather's indices are computed in the graph (Range,
    Mod); the static export has them as a constant."""
    ops = op_types(model)
    assert "Gather" in ops and "Concat" not in ops, f"{variant.id}: ops {sorted(ops)}"
    assert ({"Range", "Mod"} <= ops) == variant.symbolic, f"{variant.id}: ops {sorted(ops)}"


def _case(name, fn, shapes=None, ops=("Gather",), **kw):
    forbidden = () if "Concat" in ops else ("Concat",)
    forbidden = kw.pop("forbidden_ops", forbidden)
    return Testcase(name, fn, shapes or [], expected_ops=list(ops), forbidden_ops=forbidden, **{**_EXACT, **kw})


def _dtype_case(dtype):
    name = np.dtype(dtype).name
    return _case(f"roll_{name}", lambda x: jnp.roll(x, (1, -2), axis=(0, 1)), input_values=[_values(dtype)])


def _pair_along_last(x):
    return jnp.roll(x, 1, axis=-1), jnp.roll(x, -1, axis=-1)


def _split_case(dtype):
    """A ±1 pair along the last axis of a wide array: JAX's form, then one Split (RollSplitPass)."""
    name = np.dtype(dtype).name
    return _case(f"roll_pair_split_{name}", _pair_along_last, input_values=[_values(dtype, (2, 120))],
                 ops=("Split", "Concat"), forbidden_ops=["Slice", "Gather"])


components = [
    Component(name="jnp.roll", onnx=["Gather", "Split", "Concat"], since="v0.7.0", testcases=[
        _case("roll", lambda x: jnp.roll(x, 2, axis=1), [("B", 5)]),
        _case("roll_axis0", lambda x: jnp.roll(x, 1, axis=0), [(5, 4)]),
        _case("roll_negative", lambda x: jnp.roll(x, -2, axis=1), [("B", 6, 8)]),
        _case("roll_beyond_size", lambda x: jnp.roll(x, 13, axis=0), [(5, "B")],
              description="13 mod 5 = 3"),
        _case("roll_negative_beyond_size", lambda x: jnp.roll(x, -11, axis=1), [("B", 4, 3)]),
        _case("roll_zero", lambda x: jnp.roll(x, 0, axis=0), [(5, 4)], ops=(), forbidden_ops=["Gather", "Concat"]),
        _case("roll_full_turn", lambda x: jnp.roll(x, (5, -4), axis=(0, 1)), [(5, 4)], ops=(),
              forbidden_ops=["Gather", "Concat"]),
        _case("roll_two_axes", lambda x: jnp.roll(x, (1, 2), axis=(0, 1)), [(5, 4)]),
        _case("roll_repeated_axis", lambda x: jnp.roll(x, (1, 2), axis=(1, -2)), [("B", 5, 3)],
              description="shifts on one axis add up"),
        _case("roll_one_shift_two_axes", lambda x: jnp.roll(x, -1, axis=(0, 1)), [(3, 4)]),
        # the last axis of a large array keeps JAX's form (Gather copies element by element), which
        # core's RollSplitPass turns into Split + Concat
        _case("roll_last_axis_large", lambda x: jnp.roll(x, 1, axis=-1), [(8, 32, 32)], ops=("Split", "Concat"),
              forbidden_ops=["Gather", "Slice"]),
        _case("roll_mixed_forms", lambda x: jnp.roll(x, (1, -1), axis=(1, 2)), [(8, 32, 32)],
              ops=("Gather", "Split", "Concat"), forbidden_ops=["Slice"]),
        _case("roll_symbolic_axis", lambda x: jnp.roll(x, 2, axis=0), [("B", 3)], ops=(), forbidden_ops=(),
              check=_runtime_indices_when_symbolic),
        _case("roll_symbolic_axis_negative_beyond", lambda x: jnp.roll(x, (-7, 1), axis=(1, 2)), [(2, "N", 4)],
              ops=(), forbidden_ops=(), check=_runtime_indices_when_symbolic,
              description="-7 mod N at run time, for each N the symbolic variant runs at"),
        _case("roll_symbolic_last_axis", lambda x: jnp.roll(x, 3, axis=1), [(64, "N")], ops=("Concat",),
              forbidden_ops=["Gather"], static_sizes={"N": 40},
              description="blocks of one element along a symbolic axis: JAX's body (Slice+Concat)"),
        _case("roll_flat", lambda x: jnp.roll(x, -1), [(2, 3)],
              description="axis=None: JAX rolls the flattened array (a 1-D _roll_static between two reshapes); "
                          "on a tiny array the cost model picks one Gather"),
        _case("roll_traced_shift", lambda x, s: jnp.roll(x, s, axis=0),
              input_values=[np.arange(12, dtype=np.float32).reshape(4, 3), np.asarray(-3, np.int32)],
              ops=(), forbidden_ops=["Gather"], description="a traced shift: JAX's body"),
        _case("roll_heat_step", _heat_step, [("B", 32, 32)], ops=(), forbidden_ops=(), check=_stencil_forms,
              rtol=1e-6, rtol_f64=1e-15, atol_f64=1e-15,
              description="the bench stencil: Gather along axis -2, a shared Split along the last"),
        _case("roll_heat_loop", _heat_loop, [(2, 32, 32)], ops=("Loop",), forbidden_ops=(), check=_stencil_forms,
              rtol=1e-6, rtol_f64=1e-15, atol_f64=1e-15),
        _case("roll_vmap", jax.vmap(lambda x: jnp.roll(x, 1, axis=0)), [("B", 4, 3)], ops=(), forbidden_ops=(),
              description="under vmap the mark is not offered: JAX's body"),
        _case("roll_grad", grad_of_sum(lambda x: jnp.sin(jnp.roll(x, (1, 2), axis=(0, 1)))), [(4, 5)], ops=(),
              forbidden_ops=(), rtol=1e-5, atol=1e-6, rtol_f64=1e-12, atol_f64=1e-12),
        _case("roll_bfloat16", lambda x: jnp.roll(x.astype(jnp.bfloat16), (1, -2), axis=(0, 1)).astype(x.dtype),
              input_values=[np.linspace(-3, 3, 24, dtype=np.float32).reshape(4, 6)]),
        *[_dtype_case(d) for d in (np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16,
                                   np.uint32, np.uint64, np.float16)],
        *[_split_case(d) for d in (np.bool_, np.int8, np.int16, np.uint64, np.float16)],
        _case("roll_pair_split_bfloat16",
              lambda x: [r.astype(x.dtype) for r in _pair_along_last(x.astype(jnp.bfloat16))],
              input_values=[np.linspace(-3, 3, 240, dtype=np.float32).reshape(2, 120)], ops=("Split", "Concat"),
              forbidden_ops=["Slice", "Gather"]),
    ]),
]
