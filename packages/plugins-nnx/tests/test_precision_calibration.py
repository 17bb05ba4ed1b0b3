"""Calibrated int4 (issue #35): GPTQ / activation-aware clipping choose the codes, the graph stays
plain int4's, and on an MLP with correlated inputs GPTQ at least halves round-to-nearest's held-out
output error (measured in onnxruntime against JAX)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import onnx
import pytest
from jax2onnx import Precision, to_onnx
from jax2onnx.precision import PrecisionError, parse_precision
from jax2onnx.precision.gptq import dequantized, rtn_blocks
from jax2onnx.precision.quantizers import int4_blocks, int4_dq_blocks, int4_packed

ort = pytest.importorskip("onnxruntime")

D, HIDDEN, RANK = 128, 256, 16


def _mlp_and_data():
    rng = np.random.default_rng(0)
    mixing = rng.normal(size=(RANK, D)) / np.sqrt(RANK)

    def data(n: int) -> np.ndarray:  # x = z @ M (+ a little noise): strongly correlated features
        return (rng.normal(size=(n, RANK)) @ mixing + 0.05 * rng.normal(size=(n, D))).astype(np.float32)

    w1 = (rng.normal(size=(D, HIDDEN)) / np.sqrt(D)).astype(np.float32)
    w2 = (rng.normal(size=(HIDDEN, D)) / np.sqrt(HIDDEN)).astype(np.float32)

    def mlp(x):
        return jax.nn.gelu(x @ w1) @ w2

    return mlp, [(data(256),), (data(256),)], data(512)


@pytest.fixture(scope="module")
def exports():
    mlp, calibration, held_out = _mlp_and_data()
    reference = np.asarray(mlp(held_out))
    spec = [jax.ShapeDtypeStruct(("B", D), jnp.float32)]
    out = {}
    for target in ("onnx", "onnxruntime"):
        for method in ("rtn", "gptq", "awq"):
            precision = Precision("int4", method=method, calibration=calibration if method != "rtn" else ())
            model = to_onnx(mlp, spec, precision=precision, target=target)
            onnx.checker.check_model(model, full_check=True)
            session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
            y = session.run(None, {session.get_inputs()[0].name: held_out})[0]
            out[target, method] = (model, float(np.linalg.norm(y - reference) / np.linalg.norm(reference)))
    return out


@pytest.mark.parametrize("target", ["onnx", "onnxruntime"])
def test_gptq_halves_the_held_out_error_of_rounding(exports, target):
    rtn, gptq, awq = (exports[target, m][1] for m in ("rtn", "gptq", "awq"))
    assert gptq <= 0.5 * rtn, (gptq, rtn)
    assert awq < rtn, (awq, rtn)  # clipping helps less, but helps


@pytest.mark.parametrize("target", ["onnx", "onnxruntime"])
def test_calibrated_graph_is_plain_int4s(exports, target):
    def form(model):  # accuracy_level="auto" measures each layer on the data it is given: left out here
        nodes = [(n.domain, n.op_type, tuple((a.name, onnx.helper.get_attribute_value(a)) for a in n.attribute
                                             if a.name != "accuracy_level")) for n in model.graph.node]
        inits = sorted((i.data_type, tuple(i.dims), len(i.raw_data)) for i in model.graph.initializer)
        return nodes, inits

    plain, calibrated = exports[target, "rtn"][0], exports[target, "gptq"][0]
    assert form(calibrated) == form(plain)
    assert {i.raw_data for i in calibrated.graph.initializer} != {i.raw_data for i in plain.graph.initializer}
    detail = next(p.value for p in calibrated.metadata_props if p.key.endswith("detail"))
    assert "2 calibrated (GPTQ)" in detail


@pytest.mark.parametrize("symmetric", [False, True])
def test_block_grid_and_layouts_are_onnxruntimes(symmetric):
    """The calibrated path's grid and packing, fed round-to-nearest codes, give onnxruntime's
    quantizer's codes and zero points exactly and its scales to the last float32 bit or so
    (K = 80: a partial last block)."""
    w = np.random.default_rng(1).normal(size=(80, 24)).astype(np.float32)
    chosen = rtn_blocks(w, 32, symmetric)
    for ours, theirs in zip(int4_packed(*chosen, 32, symmetric, "MatMulNBits"), int4_blocks(w, 32, symmetric),
                            strict=False):
        np.testing.assert_allclose(ours, theirs, rtol=1e-6, atol=0)
    for ours, theirs in zip(int4_packed(*chosen, 32, symmetric, "DequantizeLinear"), int4_dq_blocks(w, 32, symmetric),
                            strict=True):
        np.testing.assert_allclose(np.asarray(ours, np.float32), np.asarray(theirs, np.float32), rtol=1e-6, atol=0)
    assert np.abs(dequantized(*chosen, 32) - w).max() < 0.5


def test_wrong_width_batch_is_refused_naming_the_width():
    mlp, calibration, _ = _mlp_and_data()
    bad = [(np.zeros((4, D - 1), np.float32),)]
    with pytest.raises(PrecisionError, match=rf"width \(last axis\) must be {D}, got {D - 1}"):
        to_onnx(mlp, [jax.ShapeDtypeStruct(("B", D), jnp.float32)], precision=Precision("int4", calibration=bad))
    with pytest.raises(PrecisionError, match="has 2 array"):
        to_onnx(mlp, [jax.ShapeDtypeStruct(("B", D), jnp.float32)],
                precision=Precision("int4", calibration=[(calibration[0][0], calibration[0][0])]))


def test_wrong_dtype_batch_is_refused_naming_the_dtype():
    table = jnp.asarray(np.random.default_rng(0).normal(size=(32, 64)).astype(np.float32))
    w = np.random.default_rng(1).normal(size=(64, 64)).astype(np.float32)

    def f(ids):
        return table[ids] @ w

    with pytest.raises(PrecisionError, match=r"is float32; the export's input is int32 \[B, 8\]"):
        to_onnx(f, [jax.ShapeDtypeStruct(("B", 8), jnp.int32)],
                precision=Precision("int4", calibration=[np.zeros((2, 8), np.float32)]))


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"kind": "int4", "method": "obq"}, "method='obq' is unknown"),
    ({"kind": "int4", "method": "gptq"}, "pass calibration="),
    ({"kind": "int8", "calibration": [np.zeros((2, 4), np.float32)]}, "precision 'int8' takes none"),
    ({"kind": "int4", "method": "rtn", "calibration": [np.zeros((2, 4), np.float32)]}, "reads no calibration data"),
    ({"kind": "int4", "calibration": np.zeros((2, 4), np.float32)}, "a list of input batches"),
    ({"kind": "int4", "calibration": [np.zeros((2, 4)), np.zeros((2, 4, 1))]}, "batch 0's is"),
])
def test_bad_calibration_options_are_refused(kwargs, message):
    with pytest.raises(PrecisionError, match=message):
        parse_precision(Precision(**kwargs))


def test_calibration_defaults_to_gptq_and_is_not_compared():
    p = parse_precision(Precision("int4", calibration=[np.ones((2, 4), np.float32)]))
    assert p.int4_method() == "gptq" and p == Precision("int4") and "GPTQ calibrated on 1 batch" in p.describe()
    assert isinstance(p.calibration, tuple) and p.calibration[0][0].shape == (2, 4)


def _stacked_mlp(layers: int = 3):
    """``lax.scan`` over stacked ``[L, D, D]`` weights (an ``nnx.scan`` over layers exports the
    same Scan), fed correlated inputs, after one unstacked matmul."""
    rng = np.random.default_rng(3)
    mixing = rng.normal(size=(RANK, 64)) / np.sqrt(RANK)

    def data(n: int) -> np.ndarray:
        return (rng.normal(size=(n, RANK)) @ mixing + 0.05 * rng.normal(size=(n, 64))).astype(np.float32)

    first = (rng.normal(size=(64, 64)) / 8).astype(np.float32)
    stacked = (rng.normal(size=(layers, 64, 64)) / 8).astype(np.float32)

    def f(x):
        return jax.lax.scan(lambda h, w: (h + jnp.tanh(h @ w), None), x @ first, stacked)[0]

    return f, [(data(256),), (data(256),)], data(512)


def test_scanned_stacked_weights_are_calibrated_per_layer():
    """A Scan's stacked weights get each layer's codes from that layer's inputs (an extra scan
    output of the calibration copy): listed as calibrated, the same graph and bytes as plain int4,
    and GPTQ at least halves round-to-nearest's held-out error through the scanned layers."""
    f, calibration, held_out = _stacked_mlp()
    reference = np.asarray(f(held_out))
    spec = [jax.ShapeDtypeStruct(("B", 64), jnp.float32)]
    errors, models = {}, {}
    for method in ("rtn", "gptq"):
        model = to_onnx(f, spec, target="onnxruntime",
                        precision=Precision("int4", method=method, calibration=calibration if method != "rtn" else ()))
        onnx.checker.check_model(model, full_check=True)
        session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        y = session.run(None, {session.get_inputs()[0].name: held_out})[0]
        errors[method] = float(np.linalg.norm(y - reference) / np.linalg.norm(reference))
        models[method] = model
    detail = next(p.value for p in models["gptq"].metadata_props if p.key.endswith("detail"))
    assert "2 calibrated (GPTQ)" in detail and "not reachable" not in detail, detail
    assert "1 scanned stacked weight(s): const_3x64x64 (int4, 3 layers)" in detail
    shapes = [sorted((i.data_type, tuple(i.dims)) for i in models[m].graph.initializer) for m in ("rtn", "gptq")]
    assert shapes[0] == shapes[1]
    assert errors["gptq"] <= 0.5 * errors["rtn"], errors


def test_nnx_scan_layers_are_calibrated_per_layer():
    """Three NNX residual blocks (a Linear with bias each) created stacked by ``nnx.vmap`` and
    scanned over: the stacked kernel is calibrated per layer."""
    from flax import nnx

    class Block(nnx.Module):
        def __init__(self, rngs):
            self.linear = nnx.Linear(64, 64, rngs=rngs)

        def __call__(self, h):
            return h + jnp.tanh(self.linear(h))

    blocks = nnx.vmap(lambda key: Block(nnx.Rngs(key)), in_axes=0, out_axes=0)(jax.random.split(jax.random.key(0), 3))
    graphdef, state = nnx.split(blocks)

    def f(x):  # each layer's state a slice of the stacked state, as nnx.scan over layers passes it
        return jax.lax.scan(lambda h, layer: (nnx.merge(graphdef, layer)(h), None), x, state)[0]

    _, calibration, held_out = _stacked_mlp()
    reference = np.asarray(f(held_out))
    errors = {}
    for method in ("rtn", "gptq"):
        model = to_onnx(f, [jax.ShapeDtypeStruct(("B", 64), jnp.float32)], target="onnxruntime",
                        precision=Precision("int4", method=method, calibration=calibration if method != "rtn" else ()))
        onnx.checker.check_model(model, full_check=True)
        session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        y = session.run(None, {session.get_inputs()[0].name: held_out})[0]
        errors[method] = float(np.linalg.norm(y - reference) / np.linalg.norm(reference))
    detail = next(p.value for p in model.metadata_props if p.key.endswith("detail"))
    assert "1 calibrated (GPTQ)" in detail and "3 layers" in detail and "not reachable" not in detail, detail
    assert errors["gptq"] <= 0.5 * errors["rtn"], errors


@pytest.mark.parametrize("select", ["slice", "gather"])
def test_loop_indexed_stacked_weights_are_calibrated_per_layer(select):
    """``lax.fori_loop`` picking layer ``i`` of a stacked weight (a Loop body's Slice or Gather):
    each layer's Hessian from the iterations that picked it (the body's matmul input and the index,
    extra scan outputs of the calibration copy); GPTQ at least halves round-to-nearest's error."""
    _, calibration, held_out = _stacked_mlp()
    rng = np.random.default_rng(5)
    first = (rng.normal(size=(64, 64)) / 8).astype(np.float32)
    stacked = jnp.asarray((rng.normal(size=(3, 64, 64)) / 8).astype(np.float32))

    def f(x):
        def body(i, h):
            w = stacked[i] if select == "slice" else jnp.take(stacked, i, axis=0, mode="clip")
            return h + jnp.tanh(h @ w)

        return jax.lax.fori_loop(0, 3, body, x @ first)

    reference = np.asarray(f(held_out))
    errors = {}
    for method in ("rtn", "gptq"):
        model = to_onnx(f, [jax.ShapeDtypeStruct(("B", 64), jnp.float32)], target="onnxruntime",
                        precision=Precision("int4", method=method, calibration=calibration if method != "rtn" else ()))
        onnx.checker.check_model(model, full_check=True)
        assert any(n.op_type == "Loop" for n in model.graph.node)
        session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        y = session.run(None, {session.get_inputs()[0].name: held_out})[0]
        errors[method] = float(np.linalg.norm(y - reference) / np.linalg.norm(reference))
    detail = next(p.value for p in model.metadata_props if p.key.endswith("detail"))
    assert "2 calibrated (GPTQ)" in detail and "indexed per iteration" in detail and "not reachable" not in detail, detail
    assert errors["gptq"] <= 0.5 * errors["rtn"], errors


def test_calibration_runs_layer_by_layer_and_reports_each_group():
    """The progress hook is called once per group, in order: the first matmul, then the second
    (whose inputs come through the first, already quantized), then the Scan's stacked layers."""
    from jax2onnx.precision.calibration import reporting_layers

    f, calibration, _ = _stacked_mlp(layers=2)
    seen = []
    with reporting_layers(lambda done, total, weights: seen.append((done, total, weights))):
        to_onnx(f, [jax.ShapeDtypeStruct(("B", 64), jnp.float32)], target="onnxruntime",
                precision=Precision("int4", calibration=calibration))
    assert seen == [(1, 2, ["const_64x64"]), (2, 2, ["const_2x64x64"])], seen
