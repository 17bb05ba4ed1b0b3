"""Complex inputs and outputs at the model's boundary: (real, imag) pairs on a trailing axis of 2.

The export marks them (metadata and doc_string); verify, allclose, the report and the CLI take
complex arrays and specs in that layout; the helpers that run a model convert a complex array to
its pairs and name the layout when an array does not fit, never onnxruntime's "Numpy_type 14"."""

from __future__ import annotations

import json
import os
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from jax2onnx import allclose, compat, to_onnx, verify
from jax2onnx.cli import main
from jax2onnx.ir import complex_io
from jax2onnx.verification.compare import onnx_runner, run_onnx
from jax2onnx.verification.report import summarize


def _rotate(z, x):
    """complex in, real in; complex and real out."""
    return z * (1.0 + 2.0j) + x, jnp.abs(z)


def _spectrum(x):
    """real in, complex out (the common case: an FFT)."""
    return jnp.fft.rfft(x)


def _cases(double):
    c, f = (np.complex128, np.float64) if double else (np.complex64, np.float32)
    rng = np.random.default_rng(0)
    z = (rng.standard_normal((5, 4)) + 1j * rng.standard_normal((5, 4))).astype(c)
    x = rng.standard_normal((5, 4)).astype(f)
    return c, f, z, x


def _session(model):
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


@pytest.mark.parametrize("double", [False, True], ids=["complex64", "complex128"])
@pytest.mark.parametrize("dims", [(5, 4), ("B", 4)], ids=["static", "symbolic"])
def test_pairs_in_and_out_match_jax_in_onnxruntime(double, dims):
    c, f, z, x = _cases(double)
    model = to_onnx(_rotate, [jax.ShapeDtypeStruct(dims, c), jax.ShapeDtypeStruct(dims, f)],
                    enable_double_precision=double)
    onnx.checker.check_model(model, full_check=True)
    # the graph: z as pairs [..., 2], x as itself; the outputs likewise
    shapes = [[d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim] for v in model.graph.input]
    assert shapes == [[*dims, 2], list(dims)]
    part = onnx.helper.np_dtype_to_tensor_dtype(np.dtype(f))
    assert {v.type.tensor_type.elem_type for v in [*model.graph.input, *model.graph.output]} == {part}
    # the marks say which values are pairs, by position
    meta = {p.key: p.value for p in model.metadata_props}
    assert complex_io.read(meta) == ({0: np.dtype(c).name}, {0: np.dtype(c).name})
    assert model.graph.input[0].doc_string.startswith(f"{np.dtype(c).name}[{dims[0]}, 4] as (real, imag) pairs")
    assert model.graph.input[1].doc_string == ""
    # onnxruntime fed by hand, as the guide shows; read back as complex and compared with JAX
    sess = _session(model)
    rot, mag = sess.run(None, {"z": np.stack([z.real, z.imag], axis=-1), "x": x})
    with compat.x64_enabled(double):
        want_rot, want_mag = _rotate(z, x)
    got = complex_io.from_pairs(rot)
    assert got.dtype == c and mag.dtype == f
    np.testing.assert_allclose(got, np.asarray(want_rot), rtol=1e-5)
    np.testing.assert_allclose(mag, np.asarray(want_mag), rtol=1e-5)


def test_verify_and_allclose_take_complex_specs_and_arrays():
    c, f, z, x = _cases(False)
    specs = [jax.ShapeDtypeStruct(("B", 4), c), jax.ShapeDtypeStruct(("B", 4), f)]
    model = to_onnx(_rotate, specs, verify=True)  # raises VerificationError on a mismatch
    report = verify(_rotate, model, specs)
    assert report.ok, str(report)
    assert [o.dtype for o in report.trials[0].outputs] == ["complex64", "float32"]
    ok, message = allclose(_rotate, model, [z, x])
    assert ok, message
    spectrum = to_onnx(_spectrum, [("B", 8)], verify=True)
    assert verify(_spectrum, spectrum, [("B", 8)]).ok


def test_the_report_names_the_pair_layout():
    model = to_onnx(_rotate, [jax.ShapeDtypeStruct((5, 4), np.complex64), (5, 4)])
    summary = summarize(model)
    assert str(summary.inputs[0]) == "z: complex64[5, 4] as (real, imag) pairs float32[5, 4, 2]"
    assert str(summary.inputs[1]) == "x: float32[5, 4]"
    assert [o.complex for o in summary.outputs] == ["complex64", None]
    as_json = json.loads(json.dumps(summary.to_dict()))
    assert [t["complex"] for t in as_json["inputs"]] == ["complex64", None]


def test_run_onnx_converts_complex_arrays_and_names_the_layout_of_a_misfit():
    c, f, z, x = _cases(False)
    model = to_onnx(_rotate, [jax.ShapeDtypeStruct((5, 4), c), (5, 4)])
    rot, _ = run_onnx(model, [z, x])  # a complex64 array: converted to its pairs
    np.testing.assert_allclose(complex_io.from_pairs(rot), np.asarray(_rotate(z, x)[0]), rtol=1e-5)
    rot_pairs, _ = run_onnx(model, [complex_io.to_pairs(z), x])  # or the pairs themselves
    np.testing.assert_array_equal(rot_pairs, rot)
    run = onnx_runner(model)  # one session, many calls (greedy decoding's runner)
    np.testing.assert_array_equal(run(z, x)[0], rot)
    with pytest.raises(ValueError, match=r"input 'z' takes complex64\[5, 4\] as \(real, imag\) pairs"):
        run(z.real, x)
    with pytest.raises(ValueError, match=r"input 'z' takes complex64\[5, 4\] as \(real, imag\) pairs float32\[5, 4, 2\]; "
                                         r"got float32\[5, 4\]: pass a complex64 array"):
        run_onnx(model, [z.real, x])
    with pytest.raises(ValueError, match=r"input 'z' takes complex64\[5, 4\] as \(real, imag\) pairs.*got complex128"):
        run_onnx(model, [z.astype(np.complex128), x])
    # a complex array for a real input: named, with the way to export a complex one
    with pytest.raises(ValueError, match=r"input 'x' takes float32\[5, 4\], a real array; got complex64\[5, 4\]\. "
                                         r"Complex values travel as \(real, imag\) pairs.*jnp.complex64"):
        run_onnx(model, [z, z])
    # verify with a real spec where the model takes complex numbers: the same named error
    with pytest.raises(ValueError, match=r"\(real, imag\) pairs") as err:
        verify(_rotate, model, [(5, 4), (5, 4)])
    assert "Numpy_type" not in str(err.value)


def test_a_model_without_marks_still_takes_complex_arrays_as_pairs():
    """A model exported elsewhere (no jax2onnx metadata) whose input has a trailing axis of 2."""
    c, f, z, x = _cases(False)
    model = to_onnx(_rotate, [jax.ShapeDtypeStruct((5, 4), c), (5, 4)])
    del model.metadata_props[:]
    rot, _ = run_onnx(model, [z, x])
    np.testing.assert_allclose(complex_io.from_pairs(rot), np.asarray(_rotate(z, x)[0]), rtol=1e-5)


def test_cli_converts_and_verifies_a_complex_input(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "cfn.py").write_text(textwrap.dedent("""
        import jax.numpy as jnp

        def fn(z):
            return z * (1 + 2j) + jnp.conj(z) * jnp.abs(z)
    """))
    rc = main(["convert", "cfn.py:fn", "-i", "B,3:complex64", "--verify", "--report", "r.json", "-o", "c.onnx", "-q"])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "inputs z: complex64[B, 3] as (real, imag) pairs float32[B, 3, 2]" in out
    with open("r.json", encoding="utf-8") as fh:
        report = json.load(fh)
    assert report["ok"] and report["trials"][0]["outputs"][0]["dtype"] == "complex64"
    assert report["summary"]["inputs"][0]["complex"] == "complex64"
    assert os.path.exists("c.onnx")
