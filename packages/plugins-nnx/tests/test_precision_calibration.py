"""Calibrated int4 (issues #35, #46): GPTQ / activation-aware clipping choose the codes, the graph stays
plain int4's, and on an MLP with correlated inputs GPTQ at least halves round-to-nearest's held-out
output error (measured in onnxruntime against JAX); a weight keeps calibrated codes only where
they beat rounding on held-out rows, so calibration never makes int4 worse than rounding."""

from __future__ import annotations

import re
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import onnx
import pytest
from jax2onnx import Precision, to_onnx
from jax2onnx.precision import PrecisionError, parse_precision
from jax2onnx.precision.gptq import dequantized, gptq_blocks, rtn_blocks
from jax2onnx.targets.weight_layouts import int4_blocks, int4_dq_blocks, int4_dq_packed, int4_packed

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

    return mlp, [(data(512),), (data(512),)], data(512)  # 1024 rows: 4 per input of the 256-wide second matmul


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    """``{(target, method): (model, held-out relative error)}``, made once per session
    (``built_once``: under pytest-xdist this module's tests may land on different workers, and the
    first to ask exports for all; the others load its files)."""
    from jax2onnx.testing import built_once, xdist_session_folder

    keys = [(target, method) for target in ("onnx", "onnxruntime") for method in ("rtn", "gptq", "awq")]

    def build(root):
        mlp, calibration, held_out = _mlp_and_data()
        reference = np.asarray(mlp(held_out))
        spec = [jax.ShapeDtypeStruct(("B", D), jnp.float32)]
        errors = {}
        for target, method in keys:
            precision = Precision("int4", method=method, calibration=calibration if method != "rtn" else ())
            model = to_onnx(mlp, spec, precision=precision, target=target)
            onnx.checker.check_model(model, full_check=True)
            session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
            y = session.run(None, {session.get_inputs()[0].name: held_out})[0]
            errors[target, method] = float(np.linalg.norm(y - reference) / np.linalg.norm(reference))
            onnx.save(model, root / f"{target}-{method}.onnx")
        return errors

    root, errors = built_once("precision-calibration-exports", build, xdist_session_folder(tmp_path_factory))
    return {key: (onnx.load(root / f"{key[0]}-{key[1]}.onnx"), errors[key]) for key in keys}


@pytest.mark.parametrize("target", ["onnx", "onnxruntime"])
def test_gptq_halves_the_held_out_error_of_rounding(exports, target):
    rtn, gptq, awq = (exports[target, m][1] for m in ("rtn", "gptq", "awq"))
    assert gptq <= 0.5 * rtn, (gptq, rtn)
    assert awq < rtn, (awq, rtn)  # clipping helps less, but helps


def _held_out_figures(detail: str) -> tuple[float, float, float]:
    """(method, round-to-nearest, kept) held-out output errors the detail reports."""
    found = re.search(r"held-out output error \w+ ([0-9.e-]+), round-to-nearest ([0-9.e-]+), kept ([0-9.e-]+)", detail)
    assert found, detail
    return tuple(float(v) for v in found.groups())


@pytest.mark.parametrize("target", ["onnx", "onnxruntime"])
def test_enough_rows_keep_gptq_and_the_detail_says_so(exports, target):
    """With 1024 correlated rows (4 per input of the wider matmul) GPTQ beats rounding on the
    held-out rows of both matmuls, so both keep its codes, and the detail gives the figures."""
    detail = next(p.value for p in exports[target, "gptq"][0].metadata_props if p.key.endswith("detail"))
    assert "2 calibrated (GPTQ kept for 2 of 2;" in detail, detail
    gptq, rounded, kept = _held_out_figures(detail)
    assert kept == gptq and gptq < 0.7 * rounded, detail
    detail = next(p.value for p in exports[target, "awq"][0].metadata_props if p.key.endswith("detail"))
    assert "2 calibrated (AWQ kept for" in detail and "held-out output error AWQ" in detail, detail


def _isotropic_mlp():
    """Uncorrelated inputs: nothing for GPTQ to exploit, so its codes from few rows fit their noise."""
    rng = np.random.default_rng(7)
    w1 = (rng.normal(size=(D, HIDDEN)) / np.sqrt(D)).astype(np.float32)
    w2 = (rng.normal(size=(HIDDEN, D)) / np.sqrt(HIDDEN)).astype(np.float32)

    def data(n: int) -> np.ndarray:
        return rng.normal(size=(n, D)).astype(np.float32)

    return (lambda x: jax.nn.gelu(x @ w1) @ w2), w1, data


@pytest.mark.parametrize("rows", [64, 1024])
def test_calibration_never_makes_int4_worse_than_rounding(rows):
    """Uncorrelated inputs, where GPTQ's codes from all the rows are worse than rounding's on fresh
    inputs. 64 rows (16 held out, under the 128 and 256 inputs): both weights rounded, with a
    warning naming the rows to give. 1024 rows: the first weight, whose inputs are the uncorrelated
    ones, is rounded because GPTQ does not beat rounding on its held-out rows; the second (inputs
    through a gelu) keeps GPTQ. Either way the export is no worse than plain int4 on held-out data."""
    mlp, w1, data = _isotropic_mlp()
    calibration, held_out = [(data(rows),)], data(1024)
    x = calibration[0][0]
    # the premise: codes from all the rows (no hold-out) are worse than rounding's on the held-out data
    error = lambda blocks: np.linalg.norm(held_out @ (w1 - dequantized(*blocks, 32)))  # noqa: E731
    assert error(gptq_blocks(w1, x.T @ x, 32, False)) > error(rtn_blocks(w1, 32, False))
    spec = [jax.ShapeDtypeStruct(("B", D), jnp.float32)]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        calibrated = to_onnx(mlp, spec, precision=Precision("int4", calibration=calibration), target="onnxruntime")
    said = [str(w.message) for w in caught if "int4 calibration gave" in str(w.message)]
    plain = to_onnx(mlp, spec, precision="int4", target="onnxruntime")
    reference = np.asarray(mlp(held_out))
    errors = {}
    for name, model in (("calibrated", calibrated), ("plain", plain)):
        onnx.checker.check_model(model, full_check=True)
        session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        y = session.run(None, {session.get_inputs()[0].name: held_out})[0]
        errors[name] = float(np.linalg.norm(y - reference) / np.linalg.norm(reference))
    assert errors["calibrated"] <= errors["plain"], errors
    detail = next(p.value for p in calibrated.metadata_props if p.key.endswith("detail"))
    if rows == 64:
        assert len(said) == 1 and re.search(r"gave const_128x256 64 rows .* under 4 per input feature \(it has 128\).* "
                                            r"give at least 1024 rows \(4 x 256, the widest calibrated input\)", said[0])
        assert ("GPTQ kept for 0 of 2, round-to-nearest with too few held-out rows to judge by: const_128x256, "
                "const_256x128") in detail, detail
        assert {i.raw_data for i in calibrated.graph.initializer} == {i.raw_data for i in plain.graph.initializer}
    else:
        assert not said, said
        assert "GPTQ kept for 1 of 2, round-to-nearest where GPTQ was no better on the held-out rows: const_128x256;" \
            in detail, detail
        gptq, rounded, kept = _held_out_figures(detail)
        assert kept < min(gptq, rounded), detail
        assert errors["calibrated"] < 0.95 * errors["plain"], errors
        # the export report's precision row shows the choice (read from the model's metadata)
        from jax2onnx import verify

        report = verify(mlp, calibrated, spec)
        assert "round-to-nearest where GPTQ was no better on the held-out rows: const_128x256" in report.precision.detail
        assert any("held-out output error GPTQ" in value for _, value in report.precision.rows(str))


def test_stacked_layers_short_of_rows_are_rounded_and_listed():
    """A Scan's stacked weight with 64 uncorrelated rows (16 held out, under its 64 inputs and the
    directions they span): each layer is rounded, listed as ``name[layer]``, and the export is no
    worse than plain int4 on held-out data."""
    f, _, held_out = _stacked_mlp()
    calibration = [(np.random.default_rng(11).normal(size=(64, 64)).astype(np.float32),)]
    spec = [jax.ShapeDtypeStruct(("B", 64), jnp.float32)]
    with pytest.warns(UserWarning, match="give at least 256 rows"):
        calibrated = to_onnx(f, spec, target="onnxruntime", precision=Precision("int4", calibration=calibration))
    plain = to_onnx(f, spec, target="onnxruntime", precision="int4")
    onnx.checker.check_model(calibrated, full_check=True)
    detail = next(p.value for p in calibrated.metadata_props if p.key.endswith("detail"))
    assert ("GPTQ kept for 0 of 4, round-to-nearest with too few held-out rows to judge by: const_64x64, "
            "const_3x64x64[0], const_3x64x64[1], const_3x64x64[2]") in detail, detail
    reference = np.asarray(f(held_out))
    errors = []
    for model in (calibrated, plain):
        session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        y = session.run(None, {session.get_inputs()[0].name: held_out})[0]
        errors.append(float(np.linalg.norm(y - reference) / np.linalg.norm(reference)))
    # the stacked layers' round-to-nearest codes are computed on the calibrated path (same grid)
    assert errors[0] <= errors[1] * (1 + 1e-4), errors


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
    assert "2 calibrated (GPTQ kept for" in detail


@pytest.mark.parametrize("symmetric", [False, True])
def test_block_grid_and_layouts_are_onnxruntimes(symmetric):
    """The calibrated path's grid and packing, fed round-to-nearest codes, give onnxruntime's
    quantizer's codes and zero points exactly and its scales to the last float32 bit or so
    (K = 80: a partial last block)."""
    w = np.random.default_rng(1).normal(size=(80, 24)).astype(np.float32)
    chosen = rtn_blocks(w, 32, symmetric)
    for ours, theirs in zip(int4_packed(*chosen, 32, symmetric), int4_blocks(w, 32, symmetric),
                            strict=False):
        np.testing.assert_allclose(ours, theirs, rtol=1e-6, atol=0)
    for ours, theirs in zip(int4_dq_packed(*chosen), int4_dq_blocks(w, 32, symmetric),
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
    assert "2 calibrated (GPTQ kept for" in detail and "not reachable" not in detail, detail
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
    assert "1 calibrated (GPTQ kept for" in detail and "3 layers" in detail and "not reachable" not in detail, detail
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
    assert "2 calibrated (GPTQ kept for" in detail and "indexed per iteration" in detail and "not reachable" not in detail, detail
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
