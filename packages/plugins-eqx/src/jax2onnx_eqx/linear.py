"""eqx.nn.Linear → MatMul (+ Add); eqx.nn.Identity needs nothing.

Equinox layers take one example (``x`` of shape ``(in_features,)``) and are batched with
``jax.vmap``. The unbatched call is one ``MatMul`` with the transposed weight (a constant, folded)
plus the bias ``Add``. Under ``jax.vmap``/``eqx.filter_vmap`` the region's shapes gain the batch axis
and core lowers equinox's own math instead: ``dot_general`` + ``add``, which the lax pack also
turns into a MatMul and an Add. ``"scalar"`` features are left to equinox's code.
"""

from __future__ import annotations

import equinox as eqx
import jax
from jax2onnx.plugin import Lowerings, Patch
from jax2onnx.testing import Component, Testcase

from ._fusion import Operands, call_module, is_array, no_extras, one_output_like
from ._testing import model

lowerings = Lowerings()

LINEAR = "jax2onnx_eqx.linear"


def _patch_linear(original):
    def __call__(self, x, *args, **kwargs):
        if (not no_extras(args, kwargs) or not is_array(x) or x.ndim != 1 or self.in_features == "scalar"
                or self.out_features == "scalar"):
            return original(self, x, *args, **kwargs)
        return call_module(LINEAR, self, lambda m, x: original(m, x), {"x": x})

    return __call__


patches = [Patch("equinox.nn.Linear", "__call__", _patch_linear)]


@lowerings.register_call(LINEAR)
def lower_linear(ctx, *ins):
    ops = Operands(ctx, ins)
    if "weight" not in ops or not one_output_like(ctx, (ops.shape("weight")[0],)):
        return None
    dtype = ctx.avals_out[0].dtype
    weight_t = ctx.op.Transpose(ctx.cast(ops["weight"], dtype), perm=[1, 0])  # folded on a constant weight
    y = ctx.op.MatMul(ctx.cast(ops["x"], dtype), weight_t)
    return ctx.op.Add(y, ctx.cast(ops["bias"], dtype)) if "bias" in ops else y


# ---------------------------------------------------------------------------------------------
# Testcases

components = [
    Component(
        name="eqx.linear",
        onnx=["MatMul", "Add"],
        since="v0.7.0",
        testcases=[
            Testcase("eqx_linear", factory=model(lambda k: eqx.nn.Linear(8, 5, key=k)), input_shapes=[(8,)],
                     expected_ops=["MatMul", "Add"], max_nodes=2),
            Testcase("eqx_linear_no_bias", factory=model(lambda k: eqx.nn.Linear(8, 5, use_bias=False, key=k)),
                     input_shapes=[(8,)], expected_ops=["MatMul"], max_nodes=1),
            # The usual way to batch an equinox layer: equinox's math (weight @ x per example), lowered
            # by the lax pack as Transpose, MatMul, Transpose, Add.
            Testcase("eqx_linear_vmapped", factory=model(lambda k: eqx.nn.Linear(8, 5, key=k), wrap=jax.vmap),
                     input_shapes=[("B", 8)], expected_ops=["MatMul"], max_nodes=4),
            Testcase("eqx_linear_scalar_in", factory=model(lambda k: eqx.nn.Linear("scalar", 3, key=k)),
                     input_shapes=[()]),
            Testcase("eqx_identity", factory=lambda: eqx.nn.Identity(), input_shapes=[("B", 3)], max_nodes=1),
        ],
    ),
]
