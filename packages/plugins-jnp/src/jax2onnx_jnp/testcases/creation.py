"""Testcases of :mod:`jax2onnx_jnp.creation` (imported only by the pytest plugin and the coverage command)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax2onnx.testing import Component, Testcase

from .helpers import on_symbolic_expect


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
