"""``jnp.arange`` → Range when a bound is a symbolic dimension (``jnp.arange(x.shape[0])``);
with static bounds it is a constant, folded at export. ``jnp.linspace`` needs a static ``num`` in
JAX, so it is a constant too (static bounds) or an iota-based computation (traced bounds).

JAX cannot trace ``jnp.arange`` with array-valued (data-dependent) bounds: the result's length
must be known while tracing. The seed's "concrete_input_val" cases therefore pass concrete values.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax2onnx.plugin import Lowerings, is_symbolic_dim
from jax2onnx.testing import Component, Testcase

from ._common import is_static_int, mark, mark_name, patches_for
from .cases.helpers import on_symbolic_expect

lowerings = Lowerings()


def _arange_region(original, *, start, stop, step, dtype):
    return original(start, stop, step, dtype=dtype)


def _make_arange(name, original):
    region = functools.partial(_arange_region, original)

    @functools.wraps(original)
    def arange(start, stop=None, step=None, dtype=None, **kwargs):
        bounds = (start, stop, step)
        symbolic = any(is_symbolic_dim(b) for b in bounds)
        if symbolic and not kwargs and all(b is None or is_static_int(b) or is_symbolic_dim(b) for b in bounds):
            return mark("arange", region, start=start, stop=stop, step=step, dtype=dtype)
        return original(start, stop, step, dtype=dtype, **kwargs)

    return arange


def _scalar(ctx, value, dtype):
    if is_symbolic_dim(value):
        return ctx.dim_scalar(value, dtype)
    return ctx.const(value, dtype)


@lowerings.register_call(mark_name("arange"))
def lower_arange(ctx):
    p = ctx.marked.params
    dtype = ctx.avals_out[0].dtype
    start, stop, step = p["start"], p["stop"], p["step"]
    if stop is None:  # arange(n) counts from 0
        start, stop = 0, start
    step = 1 if step is None else step
    # ONNX Range yields max(ceil((limit - start) / delta), 0) elements, numpy's count.
    return ctx.op.Range(_scalar(ctx, start, dtype), _scalar(ctx, stop, dtype), _scalar(ctx, step, dtype))


patches = patches_for("jax.numpy", ["arange"], _make_arange)


# ---------------------------------------------------------------------------------------------
# testcases


def _static(name, fn, **kw):
    return Testcase(name, fn, input_values=[], **kw)


def _static_f32(name, fn):
    # The case asks for float32 explicitly, so its float64 variant (which requires no float32
    # output) does not apply.
    return _static(name, fn, run_f64=False)


_RANGE = on_symbolic_expect("Range")


components = [
    Component(name="jnp.arange", onnx=["Range"], since="v0.5.2", testcases=[
        Testcase("arange_symbolic_stop", lambda x: jnp.arange(x.shape[0]), [("B", 3)], check=_RANGE),
        Testcase("arange_symbolic_start_stop_step", lambda x: jnp.arange(1, x.shape[0] * 2, 3), [("B", 3)],
                 check=_RANGE, static_sizes={"B": 4}),
        Testcase("arange_symbolic_float", lambda x: x[:, 0] * jnp.arange(x.shape[0], dtype=x.dtype), [("B", 3)],
                 check=_RANGE),
        Testcase("arange_symbolic_vmap", jax.vmap(lambda x: x + jnp.arange(x.shape[0], dtype=x.dtype)),
                 [("B", 4)], description="the arange does not depend on the batch: same region"),
        Testcase("arange_data_dependent_indices", lambda x: jnp.arange(x.shape[1]), [(3, "B")],
                 check=_RANGE),
        _static_f32("arange_stop_only_concrete_input_val", lambda: jnp.arange(np.float32(5.0), dtype=jnp.float32)),
        _static_f32("arange_start_stop_concrete_input_val",
                lambda: jnp.arange(np.float32(2.0), np.float32(7.0), dtype=jnp.float32)),
        _static_f32("arange_start_stop_step_concrete_input_val",
                lambda: jnp.arange(np.float32(1.0), np.float32(7.0), np.float32(2.0), dtype=jnp.float32)),
        _static_f32("arange_float_concrete_input_val",
                lambda: jnp.arange(np.float32(1.0), np.float32(4.5), np.float32(0.5), dtype=jnp.float32)),
        _static("arange_static_stop_only_int", lambda: jnp.arange(5)),
        _static("arange_static_stop_only_float", lambda: jnp.arange(5.0)),
        _static("arange_static_start_stop_int", lambda: jnp.arange(2, 7)),
        _static("arange_static_start_stop_step_int", lambda: jnp.arange(1, 10, 2)),
        _static("arange_static_empty_result_pos_step", lambda: jnp.arange(5, 2, 1)),
        _static("arange_static_empty_result_neg_step", lambda: jnp.arange(2, 5, -1)),
        _static("arange_static_negative_step", lambda: jnp.arange(5, 0, -1)),
        _static_f32("arange_static_float_step_explicit_dtype", lambda: jnp.arange(1.0, 2.0, 0.25, dtype=jnp.float32)),
        _static("arange_static_float_step_inferred_dtype", lambda: jnp.arange(0.0, 1.0, 0.3)),
        _static("arange_static_stop_zero", lambda: jnp.arange(0)),
        _static("arange_static_start_equals_stop", lambda: jnp.arange(5, 5, 1)),
        _static("arange_static_large_numbers_int", lambda: jnp.arange(1000, 1010, 1, dtype=jnp.int32)),
    ]),
    Component(name="jnp.linspace", onnx=["Constant"], since="v0.5.2", testcases=[
        _static("linspace_static_basic", lambda: jnp.linspace(0.0, 1.0, 5)),
        _static("linspace_static_endpoint_false", lambda: jnp.linspace(0.0, 1.0, 4, endpoint=False)),
        _static("linspace_static_num_1", lambda: jnp.linspace(2.0, 3.0, 1)),
        _static("linspace_static_num_0", lambda: jnp.linspace(2.0, 3.0, 0)),
        _static("linspace_static_int_inputs_default_dtype", lambda: jnp.linspace(0, 10, 6)),
        Testcase("linspace_traced_bounds", lambda a, b: jnp.linspace(a, b, 4, axis=-1), [("B",), ("B",)],
                 description="array bounds: an iota-based computation"),
    ]),
]
