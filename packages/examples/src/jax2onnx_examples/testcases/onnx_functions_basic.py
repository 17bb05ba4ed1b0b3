"""ONNX-function examples 000–006 and 014–016: ``@onnx_function`` on outer, inner and nested
modules, with other components beside them, and with a ``deterministic`` call parameter.

Each example's ``check`` asserts which functions the model defines and how often they are called:
different weights give different functions; identical bodies share one.
"""

from __future__ import annotations

from typing import Any, ClassVar

import jax
from flax import nnx
from jax2onnx import onnx_function
from jax2onnx.testing import Component, Testcase

from ._common import gelu_exact
from .helpers import all_of, expect_bool_input, expect_functions

HIDDEN, MLP_DIM = 8, 16
SHAPE = ("B", 10, HIDDEN)


class MLPBlock(nnx.Module):
    """Dense → GELU → Dropout → Dense → Dropout."""

    def __init__(self, num_hiddens: int, mlp_dim: int, *, rngs: nnx.Rngs):
        self.linear1 = nnx.Linear(num_hiddens, mlp_dim, rngs=rngs)
        self.dropout1 = nnx.Dropout(rate=0.1, rngs=rngs)
        self.linear2 = nnx.Linear(mlp_dim, num_hiddens, rngs=rngs)
        self.dropout2 = nnx.Dropout(rate=0.1, rngs=rngs)

    def __call__(self, x: jax.Array, deterministic: Any = True) -> jax.Array:
        x = self.dropout1(gelu_exact(self.linear1(x)), deterministic=deterministic)
        return self.dropout2(self.linear2(x), deterministic=deterministic)


@onnx_function(name="MLPBlock")
class MLPBlockFn(MLPBlock):
    pass


@onnx_function(name="NestedBlock")
class NestedBlock(nnx.Module):
    """One Dense layer as a function."""

    def __init__(self, num_hiddens: int, mlp_dim: int, *, rngs: nnx.Rngs):
        self.linear = nnx.Linear(num_hiddens, mlp_dim, rngs=rngs)

    def __call__(self, x: jax.Array, deterministic: Any = True) -> jax.Array:
        return self.linear(x)


class SuperBlock(nnx.Module):
    """LayerNorm and an MLP; which of them are functions is chosen by subclasses' ``mlp_cls``."""

    mlp_cls: ClassVar[type] = MLPBlock
    normalize: ClassVar[bool] = False

    def __init__(self, *, rngs: nnx.Rngs):
        self.layer_norm = nnx.LayerNorm(HIDDEN, rngs=rngs)
        self.mlp = self.mlp_cls(HIDDEN, MLP_DIM, rngs=rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        return self.mlp(self.layer_norm(x) if self.normalize else x)


@onnx_function(name="SuperBlock")
class OuterFunction(SuperBlock):  # 000: the outer block is a function, its MLP is not
    pass


class InnerFunction(SuperBlock):  # 001: only the inner MLP is a function
    mlp_cls = MLPBlockFn


@onnx_function(name="SuperBlock")
class TwoNested(SuperBlock):  # 002: both
    mlp_cls = MLPBlockFn


@onnx_function(name="SuperBlock")
class TwoSimpleNested(SuperBlock):  # 003: both, the inner one a single Dense layer
    mlp_cls = NestedBlock


@onnx_function(name="SuperBlock")
class NestedPlusComponent(SuperBlock):  # 004: LayerNorm beside the nested function
    mlp_cls = NestedBlock
    normalize = True


@onnx_function(name="SuperBlock")
class NestedPlusComponents(nnx.Module):
    """005: LayerNorm → MLP function → residual → LayerNorm, all inside the outer function."""

    def __init__(self, *, rngs: nnx.Rngs):
        self.layer_norm1 = nnx.LayerNorm(HIDDEN, rngs=rngs)
        self.mlp = MLPBlockFn(HIDDEN, MLP_DIM, rngs=rngs)
        self.layer_norm2 = nnx.LayerNorm(HIDDEN, rngs=rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        return self.layer_norm2(x + self.mlp(self.layer_norm1(x)))


@onnx_function(name="SuperBlock")
class LayerNormOnly(nnx.Module):
    """006: a function whose body is just a LayerNorm."""

    def __init__(self, *, rngs: nnx.Rngs):
        self.layer_norm = nnx.LayerNorm(HIDDEN, rngs=rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        return self.layer_norm(x)


class TwinBlocks(nnx.Module):
    """Two NestedBlocks: built from the same seed (identical weights) or from different seeds."""

    def __init__(self, identical: bool):
        self.first = NestedBlock(HIDDEN, HIDDEN, rngs=nnx.Rngs(0))
        self.second = NestedBlock(HIDDEN, HIDDEN, rngs=nnx.Rngs(0 if identical else 1))

    def __call__(self, x: jax.Array) -> jax.Array:
        return self.second(self.first(x))


class SameBlockTwice(nnx.Module):
    def __init__(self, *, rngs: nnx.Rngs):
        self.block = NestedBlock(HIDDEN, HIDDEN, rngs=rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        return self.block(self.block(x))


class _NormThenMlp(nnx.Module):
    # Undecorated base: subclassing a decorated class would wrap its call twice.
    def __init__(self, *, rngs: nnx.Rngs):
        self.layer_norm = nnx.LayerNorm(3, rngs=rngs)
        self.mlp = MLPBlock(3, 6, rngs=rngs)


@onnx_function(name="SuperBlock")
class WithDefaultParam(_NormThenMlp):
    """014: ``deterministic`` has a default; it may also be given as a runtime input."""

    def __call__(self, x: jax.Array, deterministic: Any = True) -> jax.Array:
        return self.mlp(self.layer_norm(x), deterministic=deterministic)


@onnx_function(name="SuperBlock")
class WithoutDefaultParam(_NormThenMlp):
    """015: ``deterministic`` has no default, so the caller must give it (here: a runtime input)."""

    def __call__(self, x: jax.Array, deterministic: Any) -> jax.Array:
        return self.mlp(self.layer_norm(x), deterministic=deterministic)


@onnx_function(name="SuperBlock")
class InternalParamWithDefault(nnx.Module):
    """016: the outer function passes its defaulted ``deterministic`` on to an inner function."""

    def __init__(self, *, rngs: nnx.Rngs):
        self.layer_norm = nnx.LayerNorm(HIDDEN, rngs=rngs)
        self.mlp = MLPBlockFn(HIDDEN, MLP_DIM, rngs=rngs)

    def __call__(self, x: jax.Array, deterministic: Any = True) -> jax.Array:
        return self.mlp(self.layer_norm(x), deterministic=deterministic)


def _build(cls: type) -> Any:
    return lambda: cls(rngs=nnx.Rngs(0))


def _example(number: str, description: str, *cases: Testcase) -> Component:
    return Component(f"onnx_functions_{number}", onnx=["Function"], testcases=list(cases), since="v0.4.0",
                     description=description, kind="example")


ONE_SUPER = expect_functions({"SuperBlock": 1}, {"SuperBlock": 1})
ONE_SUPER_WITH_FLAG = all_of(ONE_SUPER, expect_bool_input("deterministic"))
SUPER_AND_MLP = expect_functions({"SuperBlock": 1, "MLPBlock": 1}, {"SuperBlock": 1, "MLPBlock": 1})
SUPER_AND_NESTED = expect_functions({"SuperBlock": 1, "NestedBlock": 1}, {"SuperBlock": 1, "NestedBlock": 1})

components = [
    _example("000", "one function on an outer layer.",
             Testcase("000_one_function_on_outer_layer", factory=_build(OuterFunction), input_shapes=[SHAPE], check=ONE_SUPER)),
    _example("001", "one function on an inner layer.",
             Testcase("001_one_function_inner", factory=_build(InnerFunction), input_shapes=[SHAPE],
                      check=expect_functions({"MLPBlock": 1}, {"MLPBlock": 1}))),
    _example("002", "two nested functions.",
             Testcase("002_two_nested_functions", factory=_build(TwoNested), input_shapes=[SHAPE], check=SUPER_AND_MLP)),
    _example(
        "003", "two nested functions.",
        Testcase("003_two_simple_nested_functions", factory=_build(TwoSimpleNested), input_shapes=[SHAPE],
                 check=SUPER_AND_NESTED),
        # Identical bodies (same ops, same weights) share one FunctionProto; different weights don't.
        Testcase("003_identical_instances_share_one_function", factory=lambda: TwinBlocks(identical=True),
                 input_shapes=[SHAPE], check=expect_functions({"NestedBlock": 1}, {"NestedBlock": 2})),
        Testcase("003_different_weights_two_functions", factory=lambda: TwinBlocks(identical=False),
                 input_shapes=[SHAPE], check=expect_functions({"NestedBlock": 2}, {"NestedBlock": 2})),
        Testcase("003_same_instance_called_twice", factory=_build(SameBlockTwice), input_shapes=[SHAPE],
                 check=expect_functions({"NestedBlock": 1}, {"NestedBlock": 2})),
    ),
    _example("004", "nested function plus component",
             Testcase("004_nested_function_plus_component", factory=_build(NestedPlusComponent), input_shapes=[SHAPE],
                      check=SUPER_AND_NESTED)),
    _example("005", "nested function plus more components",
             Testcase("005_nested_function_plus_component", factory=_build(NestedPlusComponents), input_shapes=[SHAPE],
                      check=SUPER_AND_MLP)),
    _example("006", "one function on an outer layer.",
             Testcase("006_one_function_outer", factory=_build(LayerNormOnly), input_shapes=[SHAPE], check=ONE_SUPER)),
    _example(
        "014", "one function on an outer layer.",
        Testcase("014_one_function_with_input_param_with_default_value", factory=_build(WithDefaultParam),
                 input_shapes=[(5, 10, 3)], input_params={"deterministic": True}, check=ONE_SUPER_WITH_FLAG),
        Testcase("014_one_function_without_input_param_with_default_value", factory=_build(WithDefaultParam),
                 input_shapes=[("B", 10, 3)], check=ONE_SUPER),
    ),
    _example("015", "one function on an outer layer.",
             Testcase("015_one_function_with_input_param_without_default_value", factory=_build(WithoutDefaultParam),
                      input_shapes=[("B", 10, 3)], input_params={"deterministic": True}, check=ONE_SUPER_WITH_FLAG)),
    _example("016", "nested function plus more components",
             Testcase("016_internal_function_with_input_param_with_default_value",
                      factory=_build(InternalParamWithDefault), input_shapes=[SHAPE], check=SUPER_AND_MLP)),
]
