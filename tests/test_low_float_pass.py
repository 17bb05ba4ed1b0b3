"""``jax2onnx.rewrite.LowFloatPass`` in a front-end's rewrite slot, after the precision stage: an int8
embedding table's dequantizing ``Gather``/``Cast``/``Mul`` (values the precision stage makes untyped)
computes in float16 with the rest, the table staying int8, and the model is valid and matches JAX."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort
from jax2onnx import ExportProgram, Precision
from jax2onnx.rewrite import LowFloatPass
from jax2onnx.targets import get_target


def test_an_int8_table_then_float16_compute(tmp_path):
    rng = np.random.default_rng(0)
    table = jnp.asarray(rng.normal(size=(64, 32)), jnp.float32)
    w = jnp.asarray(rng.normal(size=(32, 48)) / 8, jnp.float32)

    def embed_and_project(ids):
        return table[ids] @ w

    runtime = get_target("onnx").runtime()
    program = ExportProgram(embed_and_project, [jax.ShapeDtypeStruct((2, 5), jnp.int32)], return_mode="ir",
                            precision=Precision("int4", embeddings="int8"),
                            rewrite_passes=[lambda options: LowFloatPass("float16", True, runtime)])
    model = program.optimize().model
    initializers = {v.name: v.dtype for v in model.graph.initializers.values()}
    assert ir.DataType.INT8 in initializers.values(), initializers  # the table stays int8
    dequantize = next(n for n in model.graph if n.op_type == "Mul")
    assert [v.dtype for v in (*dequantize.inputs, *dequantize.outputs)] == [ir.DataType.FLOAT16] * 3
    path = tmp_path / "model.onnx"
    ir.save(model, path)
    onnx.checker.check_model(str(path), full_check=True)

    ids = rng.integers(0, 64, size=(2, 5)).astype(np.int32)
    got = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {model.graph.inputs[0].name: ids})[0]
    want = np.asarray(embed_and_project(ids))
    assert got.dtype == np.float32  # keep_io_types: float32 at the interface
    # int8 rows, int4 weights and float16 compute: within what they round to
    np.testing.assert_allclose(got, want, rtol=0, atol=0.15 * np.abs(want).max())
