"""JAX's outputs shared between a testcase's variants (jax2onnx.testing.references): found by what
they depend on, shared across processes through the session folder, never across settings."""

from __future__ import annotations

import dataclasses

import jax
import numpy as np
from jax2onnx.testing import Testcase, references, runner, variants_of


def _case():
    return Testcase("tanh_shared", lambda x, y: jax.numpy.tanh(x) * y, [("B", 3), ("B", 1)], run_f64=False)


def test_the_static_variant_takes_the_symbolic_variant_s_trial_at_its_size():
    static, symbolic = variants_of(_case())
    fn = static.case.build()
    mine = runner.variant_inputs(static, fn)
    theirs = runner.variant_inputs(symbolic, fn)
    assert [tuple(s) for s in mine.specs] == [(runner.DEFAULT_STATIC_SIZE, 3), (runner.DEFAULT_STATIC_SIZE, 1)]
    (run,) = mine.runs
    shared = [r for r in theirs.runs if r[0].shape[0] == runner.DEFAULT_STATIC_SIZE]
    assert len(theirs.runs) == 2 and len(shared) == 1
    for a, b in zip(run, shared[0]):
        np.testing.assert_array_equal(a, b)
    assert references.reference_key(static, run, {}) == references.reference_key(symbolic, shared[0], {})


def test_a_key_changes_with_the_inputs_the_testcase_and_the_settings():
    static, _ = variants_of(_case())
    arrays = [np.ones((5, 3), np.float32), np.ones((5, 1), np.float32)]
    key = references.reference_key(static, arrays, {})
    assert references.reference_key(static, [arrays[0] * 2, arrays[1]], {}) != key
    assert references.reference_key(static, [arrays[0].astype(np.float64), arrays[1]], {}) != key
    other = dataclasses.replace(static, case=dataclasses.replace(static.case, name="other"))
    assert references.reference_key(other, arrays, {}) != key
    with jax.threefry_partitionable(not jax.config.jax_threefry_partitionable):
        assert references.reference_key(static, arrays, {}) != key
    assert references.reference_key(static, arrays, {"scale": np.float32(2)}) != key


def test_another_process_reads_the_output_from_the_session_folder(tmp_path, monkeypatch):
    monkeypatch.setenv(references.FOLDER_VARIABLE, str(tmp_path))
    monkeypatch.setattr(references, "_recent", type(references._recent)())
    computed = []

    def compute():
        computed.append(1)
        return [np.arange(3.0)], "info"

    first = references.shared_reference("k" * 64, compute)
    references._recent.clear()  # as a fresh worker: only the folder holds it
    again = references.shared_reference("k" * 64, compute)
    assert computed == [1] and again[1] == "info"
    np.testing.assert_array_equal(again[0][0], first[0][0])
    assert [p.name for p in tmp_path.iterdir()] == ["k" * 64 + ".pickle"]  # whole, no partial left


def test_two_testcases_of_one_name_never_share_outputs(mini_registry):
    """A test may build two testcases of one name around different functions (no pack, no
    component): each compares with its own function's outputs."""
    from jax2onnx.testing import run_variant

    (sin,) = variants_of(Testcase("same_name", lambda x: jax.numpy.sin(x), [(2, 3)], run_f64=False))
    (cos,) = variants_of(Testcase("same_name", lambda x: jax.numpy.cos(x), [(2, 3)], run_f64=False))
    assert run_variant(sin).max_abs_diff[0] < 1e-6
    assert run_variant(cos).max_abs_diff[0] < 1e-6  # against sin's outputs it would be off by ~1
