"""Testcases of :mod:`jax2onnx_nnx.linear` (imported only by the pytest plugin and the coverage command)."""

from __future__ import annotations

from flax import nnx
from jax2onnx.testing import Component, Testcase

from .helpers import model

_rngs = lambda: nnx.Rngs(0)  # noqa: E731


_SIGNED = {"low": -1.0, "high": 1.0}


def _lg(in_f, out_f, **kw):
    return lambda: nnx.LinearGeneral(in_f, out_f, rngs=_rngs(), **kw)


def _lora_linear():
    m = nnx.LoRALinear(6, 4, lora_rank=2, rngs=_rngs())
    from .helpers import randomized

    return randomized(m, 1, **_SIGNED)


components = [
    Component(
        name="nnx.linear",
        onnx=["Gemm", "MatMul", "Add"],
        since="v0.1.0",
        testcases=[
            Testcase("linear_symbolic_batch", factory=model(lambda: nnx.Linear(8, 5, rngs=_rngs()), **_SIGNED),
                     input_shapes=[("B", 8)], expected_ops=["Gemm"], max_nodes=1),
            Testcase("linear_high_rank", factory=model(lambda: nnx.Linear(8, 5, rngs=_rngs()), **_SIGNED),
                     input_shapes=[("B", 3, 4, 8)], expected_ops=["MatMul", "Add"],
                     forbidden_ops=["Reshape", "Shape", "Concat", "Gemm"], max_nodes=2),
            Testcase("linear_no_bias", factory=lambda: nnx.Linear(8, 5, use_bias=False, rngs=_rngs()),
                     input_shapes=[("B", 8)], expected_ops=["Gemm"], max_nodes=1),
            Testcase("linear_1d_input", factory=model(lambda: nnx.Linear(4, 3, rngs=_rngs()), **_SIGNED),
                     input_shapes=[(4,)], expected_ops=["MatMul", "Add"], max_nodes=2),
        ],
    ),
    Component(
        name="nnx.linear_general",
        onnx=["Gemm", "MatMul", "Add", "Reshape"],
        since="v0.1.0",
        testcases=[
            Testcase("linear_general", factory=_lg((2, 3), 4, axis=(-2, -1)), input_shapes=[("B", 5, 2, 3)],
                     expected_ops=["MatMul", "Reshape"], forbidden_ops=["Shape", "Concat"], max_nodes=3),
            Testcase("linear_general_2", factory=_lg(3, (2, 4)), input_shapes=[("B", 5, 3)],
                     expected_ops=["MatMul", "Reshape"], forbidden_ops=["Shape", "Concat"], max_nodes=3),
            Testcase("linear_general_3", factory=_lg(4, 6), input_shapes=[("B", 4)],
                     expected_ops=["Gemm"], max_nodes=1),
            Testcase("linear_general_4", factory=_lg((2, 3), (2, 2), axis=(-2, -1)), input_shapes=[("B", 2, 3)],
                     expected_ops=["Gemm", "Reshape"], forbidden_ops=["Shape", "Concat"], max_nodes=3),
            Testcase("linear_general_abstract_eval_axes", factory=_lg(3, (2, 4), axis=-1),
                     input_shapes=[("B", 6, 3)], expected_ops=["MatMul"], forbidden_ops=["Shape", "Concat"]),
            Testcase("linear_general_abstract_eval_axes_pair", factory=_lg((2, 3), (4, 2), axis=(-2, -1)),
                     input_shapes=[("B", 5, 2, 3)], expected_ops=["MatMul"], forbidden_ops=["Shape", "Concat"]),
        ],
    ),
    Component(
        name="nnx.einsum",
        onnx=["Einsum", "Add"],
        since="v0.4.2",
        testcases=[
            Testcase("einsum_module_with_bias",
                     factory=model(lambda: nnx.Einsum("nta,hab->nthb", (3, 4, 5), (3, 5), rngs=_rngs()), **_SIGNED),
                     input_shapes=[("B", 6, 4)], expected_ops=["Einsum", "Add"], max_nodes=2),
            Testcase("einsum_module_no_bias",
                     factory=lambda: nnx.Einsum("nta,hab->nthb", (3, 4, 5), rngs=_rngs()),
                     input_shapes=[("B", 6, 4)], expected_ops=["Einsum"], max_nodes=1),
        ],
    ),
    Component(
        name="nnx.lora",
        onnx=["MatMul", "Gemm"],
        since="v0.7.0",
        testcases=[
            Testcase("lora", factory=model(lambda: nnx.LoRA(6, 2, 4, rngs=_rngs()), **_SIGNED),
                     input_shapes=[("B", 6)], expected_ops=["MatMul"], max_nodes=2),
            # W + A @ B merged into one weight: a single Gemm.
            Testcase("lora_linear", factory=_lora_linear, input_shapes=[("B", 6)], expected_ops=["Gemm"],
                     max_nodes=1),
            Testcase("lora_linear_high_rank", factory=_lora_linear, input_shapes=[("B", 3, 6)],
                     expected_ops=["MatMul", "Add"], max_nodes=2),
        ],
    ),
]
