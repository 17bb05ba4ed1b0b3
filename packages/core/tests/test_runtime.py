"""The one source of runtime knowledge: measured kernel tables per onnxruntime version, probed and
cached for a version without one (jax2onnx.ir.runtime)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from jax2onnx.ir import kernel_probe, runtime

BF16 = np.dtype("bfloat16")


def test_the_probe_reaches_the_oldest_opset_exports_take():
    from jax2onnx.ir.opsets import MIN_OPSET

    assert kernel_probe.MIN_OPSET == MIN_OPSET
    assert min(int(o) for o in runtime.for_version("1.32")._table["by_opset"]) == MIN_OPSET


def test_a_table_per_measured_version():
    assert {"1.31", "1.32"} <= set(runtime.shipped_versions())
    old, new = runtime.for_version("1.31"), runtime.for_version("1.32.0")
    assert old.version.startswith("1.31.") and new.version.startswith("1.32.")
    # Pad-23 on bfloat16: a kernel from onnxruntime 1.32 on, none in 1.31 nor in Pad-13 (opsets < 21)
    assert not old.supports("Pad", BF16, 23) and new.supports("Pad", BF16, 23) and not new.supports("Pad", BF16, 17)
    # BitShift: unsigned only; uint16 from 1.32 on
    assert not old.supports("BitShift", np.uint16) and new.supports("BitShift", np.uint16)
    with pytest.raises(LookupError, match="no kernel table for onnxruntime 0.1"):
        runtime.for_version("0.1")


def test_dtypes_are_what_the_schema_takes_and_a_kernel_runs():
    rt = runtime.for_version("1.32")
    add = rt.dtypes("Add", 23)
    assert np.dtype(np.bool_) not in add  # the schema has no bool Add
    assert BF16 not in add  # the schema has, onnxruntime has no kernel
    assert {np.dtype(np.float32), np.dtype(np.int8), np.dtype(np.uint64)} <= add
    assert rt.dtypes("BitShift", 23) == {np.dtype(t) for t in ("uint8", "uint16", "uint32", "uint64")}
    assert np.dtype(np.float32) in rt.dtypes("Where", 23) and np.dtype(np.int16) not in rt.dtypes("Where", 23)


def test_the_installed_onnxruntime_is_the_target():
    ort = pytest.importorskip("onnxruntime")
    assert runtime.installed().version.split(".")[:2] == ort.__version__.split(".")[:2]


def test_an_unmeasured_version_is_probed_once_then_read_from_the_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("JAX2ONNX_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(runtime, "_installed_version", lambda: "9.99.1")
    runtime.installed.cache_clear()
    measured = {**json.load(open(f"{runtime._TABLES}/1.32.json")), "onnxruntime": "9.99.1"}
    calls = []
    monkeypatch.setattr(kernel_probe, "measure_table", lambda: calls.append(1) or measured)
    try:
        first = runtime.installed()
        assert first.version == "9.99.1" and calls == [1]
        assert (tmp_path / "ort_kernels" / "9.99.1.json").exists()
        runtime.installed.cache_clear()
        again = runtime.installed()
        assert calls == [1] and "cached" in again.source  # read back, not probed again
        assert again.missing(23) == first.missing(23)
    finally:
        runtime.installed.cache_clear()


def test_without_onnxruntime_exports_target_the_oldest_measured_version(monkeypatch):
    monkeypatch.setattr(runtime, "_installed_version", lambda: None)
    runtime.installed.cache_clear()
    try:
        assert runtime.installed().version.startswith(runtime.shipped_versions()[0] + ".")
    finally:
        runtime.installed.cache_clear()


def test_the_probe_tells_a_missing_kernel_from_a_type_the_schema_refuses():
    pytest.importorskip("onnxruntime")
    from onnx import TensorProto

    assert kernel_probe.probe("Add", 2, TensorProto.FLOAT, 21) is True
    assert kernel_probe.probe("Add", 2, TensorProto.BFLOAT16, 21) is False  # schema yes, kernel no
    assert kernel_probe.probe("Add", 2, TensorProto.BOOL, 21) is None  # the schema refuses it


@pytest.mark.parametrize("version", ["1.31", "1.32"])
def test_what_the_lowerings_once_listed_by_hand_is_measured(version):
    """The kernel facts fusions and lax lowerings kept as their own dtype sets now come from the
    table: a fused op's kernels, a reduction's, and values a kernel gets wrong."""
    rt = runtime.for_version(version)
    f16, f32, f64 = (np.dtype(t) for t in ("float16", "float32", "float64"))
    # Attention (opset 23, probed at its own opset): float64 runs, float32-accurate; bfloat16 has none
    assert rt.dtypes("Attention", 23) == {f16, f32, f64} and rt.dtypes("Attention", 23, exact=True) == {f16, f32}
    assert rt.inexact("Attention") == {f64} and not rt.dtypes("Attention", 21)  # no such op at 21
    assert rt.dtypes("InstanceNormalization", 23) == {f16, f32}
    # ScatterND reduces no 16-bit float (bfloat16 refused only when it runs), nor bool by max/min;
    # before opset 16/18 the reduction is legalization's form, asked at the reduction's own kernels
    for opset in (13, 17, 23):
        assert not {f16, BF16} & rt.dtypes("ScatterND:add", opset) and {f32, np.dtype(np.bool_)} <= rt.dtypes("ScatterND:add", opset)
        assert np.dtype(np.bool_) not in rt.dtypes("ScatterND:max", opset)
    # float16 Sign gives 0 for NaN: float16 computes in float32, which is exact
    assert rt.inexact("Sign") == {f16} and f16 not in rt.dtypes("Sign", 23) and f32 in rt.dtypes("Sign", 23)
    assert f16 in rt.dtypes("Clip", 23, exact=True)  # NaN, infinities and bounds as numpy's clip


def test_a_bfloat16_probe_runs_the_kernel():
    """numpy cannot feed bfloat16: the probe casts in the graph, so a kernel that loads but refuses
    the type when it runs is recorded missing."""
    pytest.importorskip("onnxruntime")
    assert kernel_probe.probe_structured("ScatterND:add", "bfloat16", 21) is False
    assert kernel_probe.probe_structured("ScatterND", "bfloat16", 21) is True


@pytest.mark.parametrize("version", ["1.31", "1.32"])
def test_a_contrib_op_has_the_dtypes_its_kernel_was_measured_on(version):
    """onnxruntime's own ops have no ONNX schema: the table's ``contrib`` is the one answer
    (jax2onnx_jnp's solve/inv under target="onnxruntime" ask it for com.microsoft.Inverse)."""
    rt = runtime.for_version(version)
    floats = {np.dtype(t) for t in ("float16", "float32", "float64")}
    assert rt.dtypes("com.microsoft.Inverse") == floats
    assert rt.supports("com.microsoft.Inverse", np.float64) and not rt.supports("com.microsoft.Inverse", np.int32)
    assert not rt.dtypes("com.microsoft.NoSuchOp")  # unmeasured: nothing runs it


def test_the_contrib_probe_checks_the_answer():
    pytest.importorskip("onnxruntime")
    assert kernel_probe.measure_contrib()["com.microsoft.Inverse"] == ["float16", "float32", "float64"]
