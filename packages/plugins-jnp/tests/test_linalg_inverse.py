"""Singular matrices under target="onnxruntime" (com.microsoft.Inverse): no error, results
non-finite wherever JAX's are (NaN throughout; see jax2onnx_jnp.linalg_inverse's docstring)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import onnx
import pytest
from jax2onnx import compat, to_onnx

ort = pytest.importorskip("onnxruntime")

SINGULAR = {
    "zeros": np.zeros((3, 3)),
    "rank_one": np.outer([1.0, 2.0, 3.0], [4.0, 5.0, 6.0]),
    "equal_rows": np.array([[1.0, 2.0, 3.0], [1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]),
    "equal_columns": np.array([[1.0, 1.0, 3.0], [2.0, 2.0, 3.0], [4.0, 4.0, 6.0]]),
}


def _export_run(fn, args, dtype):
    x64 = dtype == np.float64
    with compat.x64_enabled(x64):
        model = to_onnx(fn, [jax.ShapeDtypeStruct(a.shape, dtype) for a in args], target="onnxruntime",
                        enable_double_precision=x64)
        onnx.checker.check_model(model, full_check=True)
        assert [n.op_type for n in model.graph.node].count("Inverse") == 1
        sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        ours = sess.run(None, {i.name: a.astype(dtype) for i, a in zip(sess.get_inputs(), args, strict=True)})[0]
        theirs = np.asarray(jax.jit(fn)(*(a.astype(dtype) for a in args)))
    return ours, theirs


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kind", sorted(SINGULAR))
def test_inv_of_a_singular_matrix_is_nan(kind, dtype):
    """Eigen's inverse has JAX's inf/NaN entries; the refinement step's products make them NaN
    throughout (JAX's: inf, -inf, NaN and finite entries)."""
    ours, theirs = _export_run(lambda a: jnp.linalg.inv(a), [SINGULAR[kind]], dtype)
    assert not np.isfinite(theirs).all()
    assert np.isnan(ours).all()


def test_the_inverse_node_itself_has_jaxs_singular_entries():
    """Without the refinement step (the Inverse node's output read directly) inf and NaN are
    where JAX's inv has them."""
    from onnx import TensorProto, helper

    a = helper.make_tensor_value_info("a", TensorProto.FLOAT, [3, 3])
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 3])
    model = helper.make_model(helper.make_graph([helper.make_node("Inverse", ["a"], ["x"], domain="com.microsoft")],
                                                "inverse", [a], [x]),
                              opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid("com.microsoft", 1)])
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for kind, matrix in SINGULAR.items():
        ours = sess.run(None, {"a": matrix.astype(np.float32)})[0]
        theirs = np.asarray(jnp.linalg.inv(matrix.astype(np.float32)))
        for same in (np.isnan, np.isposinf, np.isneginf):
            np.testing.assert_array_equal(same(ours), same(theirs), err_msg=kind)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kind", sorted(SINGULAR))
def test_solve_with_a_singular_matrix_is_non_finite_where_jax_is(kind, dtype):
    """JAX's LU solve leaves the entries its back substitution does not reach from the zero pivot
    finite (equal columns: [-inf, inf, 0.17]); the refinement step's products spread the inverse's
    inf/NaN to every entry, so ours is NaN throughout: non-finite wherever JAX's is."""
    b = np.array([1.0, 2.0, 3.0])
    ours, theirs = _export_run(lambda a, b: jnp.linalg.solve(a, b), [SINGULAR[kind], b], dtype)
    assert not np.isfinite(theirs).all()
    assert np.isnan(ours).all()


def test_library_function_given_directly_as_first_export_fuses():
    """``to_onnx(jnp.linalg.solve, ...)`` as a process's first export, with a reference taken
    before the packs loaded: the library function itself is the exported callable, its ``jit``
    equation is recognized like any call of it, and ``jnp.linalg.solve`` stays that very object."""
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent("""
        import jax, jax.numpy as jnp, numpy as np, onnx, onnxruntime as ort
        solve = jnp.linalg.solve  # held before any export loads the packs
        from jax2onnx import to_onnx
        a = np.random.default_rng(0).standard_normal((5, 5)).astype(np.float32) + 5 * np.eye(5, dtype=np.float32)
        b = np.arange(5, dtype=np.float32)
        model = to_onnx(solve, [jax.ShapeDtypeStruct((5, 5), np.float32), jax.ShapeDtypeStruct((5,), np.float32)],
                        target="onnxruntime")
        onnx.checker.check_model(model, full_check=True)
        ops = [n.op_type for n in model.graph.node]
        sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        out = sess.run(None, dict(zip([i.name for i in sess.get_inputs()], (a, b))))[0]
        np.testing.assert_allclose(out, np.asarray(jnp.linalg.solve(a, b)), rtol=1e-5, atol=1e-5)
        assert jnp.linalg.solve is solve  # nothing replaced: the export found the call in the trace
        print(ops.count("Inverse"))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split()[-1] == "1"
