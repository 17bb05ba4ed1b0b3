"""The broadcasting-matmul rule: ``jnp.matmul``'s trace of batch axes that broadcast (a squeeze, a
dot_general the lax pack writes as Einsum, a transpose) becomes one MatMul, the outputs the same;
forms that are not numpy's matmul are left alone and explain why."""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from jax2onnx.passes import PassPipeline, RewritePass
from jax2onnx.passes.rewrite import explain_rewrites
from jax2onnx.passes.rules import RULE_KEY
from onnx import TensorProto, helper, numpy_helper
from pass_checks import run_model

pytest.importorskip("onnxruntime")
RNG = np.random.default_rng(0)


def _model(equation: str, perm: list[int], a_shape, b_shape, out_shape, squeeze: list[int] | None) -> ir.Model:
    nodes, inits, a = [], [], "a"
    if squeeze is not None:
        inits.append(numpy_helper.from_array(np.asarray(squeeze, np.int64), "sq_axes"))
        nodes.append(helper.make_node("Squeeze", ["a", "sq_axes"], ["a_sq"], name="squeeze"))
        a = "a_sq"
    nodes += [helper.make_node("Einsum", [a, "b"], ["e"], equation=equation, name="einsum"),
              helper.make_node("Transpose", ["e"], ["y"], perm=perm, name="transpose")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("a", TensorProto.FLOAT, a_shape),
                                           helper.make_tensor_value_info("b", TensorProto.FLOAT, b_shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, out_shape)], inits)
    return ir.from_proto(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)]))


def _rewritten(build, feeds):
    before = run_model(build(), feeds)
    model = build()
    PassPipeline([RewritePass()], finish_dead_code=True)(model)
    after = run_model(model, feeds)
    np.testing.assert_allclose(after[0], before[0], rtol=1e-6, atol=1e-6)
    return [n.op_type for n in model.graph], model


def test_squeeze_einsum_transpose_is_one_matmul():
    """[2, 1, 3, 4] @ [5, 4, 2] as jnp.matmul traces it: the Squeeze is read past."""
    feeds = {"a": RNG.standard_normal((2, 1, 3, 4)).astype(np.float32),
             "b": RNG.standard_normal((5, 4, 2)).astype(np.float32)}
    ops, model = _rewritten(lambda: _model("abc,dce->abde", [0, 2, 1, 3], [2, 1, 3, 4], [5, 4, 2], [2, 5, 3, 2], [1]),
                            feeds)
    assert ops == ["MatMul"]
    np.testing.assert_allclose(run_model(model, feeds)[0], np.matmul(feeds["a"], feeds["b"]), rtol=1e-5, atol=1e-5)
    assert next(iter(model.graph)).metadata_props[RULE_KEY] == "matmul_broadcast/einsum_transpose_matmul"


def test_without_a_squeeze_the_axes_are_put_back_by_one_unsqueeze():
    feeds = {"a": RNG.standard_normal((2, 3, 4)).astype(np.float32),
             "b": RNG.standard_normal((5, 4, 6)).astype(np.float32)}
    ops, _ = _rewritten(lambda: _model("abc,dce->abde", [0, 2, 1, 3], [2, 3, 4], [5, 4, 6], [2, 5, 3, 6], None), feeds)
    assert ops == ["Unsqueeze", "MatMul"]


def test_a_transpose_that_is_not_numpys_layout_stays_and_says_why():
    feeds = {"a": RNG.standard_normal((2, 3, 4)).astype(np.float32),
             "b": RNG.standard_normal((5, 4, 6)).astype(np.float32)}
    build = lambda: _model("abc,dce->abde", [1, 0, 2, 3], [2, 3, 4], [5, 4, 6], [3, 2, 5, 6], None)  # noqa: E731
    ops, model = _rewritten(build, feeds)
    assert ops == ["Einsum", "Transpose"]
    misses = [m for m in explain_rewrites(model) if m.rule.endswith("einsum_transpose_matmul")]
    assert misses and "perm" in misses[0].reason, misses


def test_jnp_matmul_with_broadcast_batch_exports_one_matmul():
    """End to end with no patch of jnp.matmul: the lax body and the rule give numpy's MatMul."""
    jnp = pytest.importorskip("jax.numpy")
    pytest.importorskip("jax2onnx_lax", reason="the lax pack lowers the body")
    from jax2onnx import to_onnx

    proto = to_onnx(jnp.matmul, [(2, 1, 3, 4), (5, 4, 2)])
    onnx.checker.check_model(proto, full_check=True)
    assert [n.op_type for n in proto.graph.node] == ["MatMul"]
