"""``precision=`` reads the export's target (jax2onnx.targets): int8/int4 take the target's form, and a
form the target does not run is refused before tracing, naming the fix.

- ``target="onnx"`` (the default): standard ONNX only. int8 is int8 codes with a scale per column
  widened by ``DequantizeLinear`` before the ``MatMul`` (weight-only; ``activations="dynamic"``:
  ``DynamicQuantizeLinear`` + ``MatMulInteger``); int4 is 4-bit codes widened by one blocked ``DequantizeLinear`` (opset 21) before
  the ``MatMul``: the same blocks as onnxruntime's ``MatMulNBits``, so both forms compute the same
  numbers; embedding tables and stacked layer weights are int8 under it.
- ``target="onnxruntime"``: the com.microsoft forms (test_precision.py covers them in depth).
- ``target="web"``: the standard forms, but int4 as ``MatMulNBits`` (and int4 tables as
  ``GatherBlockQuantized``), the two contrib ops it allows.
- ``target="tensorrt"``: no dynamic int8/int4 form; refused before the function is traced.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from jax2onnx import Precision, to_onnx
from jax2onnx.errors import TargetUnsupportedError
from jax2onnx.precision import PrecisionError
from onnx import numpy_helper

RNG = np.random.default_rng(0)
W1 = RNG.standard_normal((128, 64)).astype(np.float32) / 8
B1 = RNG.standard_normal((64,)).astype(np.float32)
W2 = RNG.standard_normal((64, 16)).astype(np.float32) / 8
TABLE = RNG.standard_normal((50, 128)).astype(np.float32)
X = RNG.standard_normal((5, 128)).astype(np.float32)


def _mlp(x):
    return jax.nn.relu(x @ W1 + B1) @ W2


def _lm(ids):
    return jnp.take(TABLE, ids, axis=0) @ W1


def _run(model: onnx.ModelProto, *inputs: np.ndarray) -> np.ndarray:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {i.name: v for i, v in zip(session.get_inputs(), inputs)})[0]


def _domains(model: onnx.ModelProto) -> set[str]:
    return {n.domain for n in model.graph.node}


@pytest.mark.parametrize("kind", ["int8", "int4"])
def test_standard_target_writes_standard_forms_with_the_contrib_forms_numbers(kind):
    standard = to_onnx(_mlp, [("B", 128)], precision=kind)
    contrib = to_onnx(_mlp, [("B", 128)], precision=kind, target="onnxruntime")
    onnx.checker.check_model(standard, full_check=True)
    assert _domains(standard) == {""}, [n.op_type for n in standard.graph.node]
    assert "com.microsoft" not in {o.domain for o in standard.opset_import}
    assert _domains(contrib) >= {"com.microsoft"}
    ops = [n.op_type for n in standard.graph.node]
    if kind == "int8":
        assert ops.count("DequantizeLinear") == 2 and ops.count("MatMul") == 2
        codes = [i for i in standard.graph.initializer if i.data_type == onnx.TensorProto.INT8]
        assert sorted(tuple(c.dims) for c in codes) == [(64, 16), (128, 64)]
        assert [{a.name: a.i for a in n.attribute}["bits"] for n in contrib.graph.node if n.op_type == "MatMulNBits"] == [8, 8]
        # K <= 128: 8-bit MatMulNBits takes one block of K per column: the standard form's codes + 128
        # (onnxruntime computes either with int8 activations per block, blocks of its own: numbers checked above)
        ours8 = sorted((numpy_helper.to_array(c) for c in codes), key=np.shape)
        theirs8 = sorted((numpy_helper.to_array(i) for i in contrib.graph.initializer if i.data_type == onnx.TensorProto.UINT8),
                         key=lambda q: q.shape[::-1])
        assert [q.shape for q in theirs8] == [(16, 1, 64), (64, 1, 128)]
        for q8, packed in zip(ours8, theirs8):
            np.testing.assert_array_equal(q8.astype(np.int16) + 128, packed[:, 0, :].T)
    else:
        assert ops.count("DequantizeLinear") == 2 and ops.count("MatMul") == 2
        codes = [i for i in standard.graph.initializer if i.data_type == onnx.TensorProto.UINT4]
        # codes [K, N] and zero points [K / 32, N] of both weights
        assert sorted(tuple(c.dims) for c in codes) == [(2, 16), (4, 64), (64, 16), (128, 64)]
    reference = np.asarray(_mlp(X))
    ours, theirs = _run(standard, X), _run(contrib, X)
    cosine = float(np.sum(ours * reference) / np.linalg.norm(ours) / np.linalg.norm(reference))
    for got in (ours, theirs):
        cosine = float(np.sum(got * reference) / np.linalg.norm(got) / np.linalg.norm(reference))
        assert cosine > (0.9999 if kind == "int8" else 0.99), cosine
    if kind == "int4":
        # the same blocks: the two forms agree far closer than either to float32 (not exactly:
        # onnxruntime fuses DequantizeLinear + MatMul into MatMulNBits at its own accuracy level)
        apart, off = np.abs(ours - theirs).max(), np.abs(theirs - reference).max()
        assert apart <= 0.25 * off, (apart, off)


def test_int4_standard_form_is_smaller_than_float32_like_the_contrib_form():
    float32 = to_onnx(_mlp, [("B", 128)]).ByteSize()
    standard = to_onnx(_mlp, [("B", 128)], precision="int4").ByteSize()
    contrib = to_onnx(_mlp, [("B", 128)], precision="int4", target="onnxruntime").ByteSize()
    assert standard < float32 / 4 and abs(standard - contrib) < 0.1 * contrib, (float32, standard, contrib)


def test_int4_embeddings_are_int8_rows_under_the_standard_form():
    ids = np.array([[1, 7, 49]], dtype=np.int32)
    model = to_onnx(_lm, [jax.ShapeDtypeStruct((1, 3), jnp.int32)], precision="int4")
    onnx.checker.check_model(model, full_check=True)
    assert _domains(model) == {""}
    assert "GatherBlockQuantized" not in [n.op_type for n in model.graph.node]
    int8_tables = [i for i in model.graph.initializer if i.data_type == onnx.TensorProto.INT8 and tuple(i.dims) == (50, 128)]
    assert len(int8_tables) == 1
    reference = np.asarray(_lm(ids))
    ours = _run(model, ids)
    assert np.abs(ours - reference).max() < 0.1 * np.abs(reference).max()


def test_web_int4_is_matmulnbits_and_gathered_4_bit_tables_and_nothing_else_of_the_contrib_domain():
    """target="web" runs two com.microsoft ops (onnxruntime-web's wasm build has their kernels):
    int4 matmuls are MatMulNBits, an int4 table GatherBlockQuantized; the standard form stays
    available by name."""
    ids = np.array([[1, 7, 49]], dtype=np.int32)
    model = to_onnx(_lm, [jax.ShapeDtypeStruct((1, 3), jnp.int32)], precision="int4", target="web")
    onnx.checker.check_model(model, full_check=True)
    assert sorted(f"{n.domain}::{n.op_type}" for n in model.graph.node if n.domain) == [
        "com.microsoft::GatherBlockQuantized", "com.microsoft::MatMulNBits"]
    reference = np.asarray(_lm(ids))
    assert np.abs(_run(model, ids) - reference).max() < 0.1 * np.abs(reference).max()
    standard = to_onnx(_lm, [jax.ShapeDtypeStruct((1, 3), jnp.int32)], target="web",
                       precision=Precision("int4", int4_kernel="DequantizeLinear"))
    assert _domains(standard) == {""}


def test_a_form_the_target_does_not_run_is_refused_before_tracing():
    traced = []

    def fn(x):
        traced.append(1)
        return x @ W1

    with pytest.raises(TargetUnsupportedError, match="precision='int4' has no form target='tensorrt'.*target='onnx'"):
        to_onnx(fn, [("B", 128)], precision="int4", target="tensorrt")
    with pytest.raises(TargetUnsupportedError, match="int8_kernel='DynamicQuantizeMatMul' writes com.microsoft ops"):
        to_onnx(fn, [("B", 128)], precision=Precision("int8", int8_kernel="DynamicQuantizeMatMul"))
    with pytest.raises(TargetUnsupportedError, match="int8_kernel='MatMulNBits' writes com.microsoft ops"):
        to_onnx(fn, [("B", 128)], precision=Precision("int8", int8_kernel="MatMulNBits"))
    with pytest.raises(TargetUnsupportedError, match="int4_kernel='MatMulNBits' writes com.microsoft ops"):
        to_onnx(fn, [("B", 128)], precision=Precision("int4", int4_kernel="MatMulNBits"))
    with pytest.raises(TargetUnsupportedError, match="int8_kernel='DynamicQuantizeMatMul' writes com.microsoft ops"):
        to_onnx(fn, [("B", 128)], precision=Precision("int8", int8_kernel="DynamicQuantizeMatMul"), target="web")
    with pytest.raises(TargetUnsupportedError, match="from opset 21; got opset=20"):
        to_onnx(fn, [("B", 128)], precision="int4", opset=20)
    with pytest.raises(PrecisionError, match="embeddings='int4' gathers 4-bit rows"):
        to_onnx(fn, [("B", 128)], precision=Precision("int4", embeddings="int4", int4_kernel="DequantizeLinear"))
    assert traced == []  # every refusal came before the trace


def test_the_standard_kernels_are_taken_by_the_onnxruntime_target_when_named():
    model = to_onnx(_mlp, [("B", 128)], target="onnxruntime",
                    precision=Precision("int4", int4_kernel="DequantizeLinear"))
    assert _domains(model) == {""}
    reference, ours = np.asarray(_mlp(X)), _run(model, X)
    assert np.sum(ours * reference) / np.linalg.norm(ours) / np.linalg.norm(reference) > 0.99


def _low_rank(x):
    """Two weight matmuls in a row, nothing between (a low-rank factorization; OPT-350m's project_out
    before its tied head): quantizing the first replaces the value the second reads."""
    return (x @ W1) @ W2


@pytest.mark.parametrize("target", ["onnx", "onnxruntime"])
@pytest.mark.parametrize("kind", ["int8", "int4"])
def test_weight_matmuls_in_a_row_are_each_quantized(kind, target):
    model = to_onnx(_low_rank, [("B", 128)], precision=kind, target=target)
    onnx.checker.check_model(model, full_check=True)
    ops = [n.op_type for n in model.graph.node]
    assert "MatMul" not in ops or target == "onnx", ops  # the standard forms: DequantizeLinear + MatMul
    want = np.asarray(_low_rank(X))
    got = _run(model, X)
    assert np.linalg.norm(got - want) / np.linalg.norm(want) < (0.05 if kind == "int8" else 0.2)
