"""Errors a new user meets, each with the user's line and the fix: tracer misuse, unsupported
primitives (all at once), input dtypes ONNX has, complex inputs, a class passed uninstantiated,
a missing onnxruntime, and the output file (mode, unwritable folder, external data)."""

from __future__ import annotations

import os
import stat
import sys

import jax
import jax.numpy as jnp
import numpy as np
import onnx
import pytest
from jax2onnx import InputSpecError, Jax2OnnxError, UnsupportedPrimitiveError, UserFunctionError, allclose, to_onnx
from mini_pack import MiniPack, registry_in_use

THIS_FILE = os.path.basename(__file__)


# -- tracer misuse -------------------------------------------------------------------------------
def _float_of_sum(x):
    return x * float(x.sum())  # the line the error must point at


def _python_if(x):
    if x.sum() > 0:
        return x
    return -x


@pytest.mark.parametrize(
    ("fn", "code", "hint"),
    [
        (_float_of_sum, "float(x.sum())", "x.sum() instead of float(x.sum())"),
        (_python_if, "if x.sum() > 0", "jnp.where"),
    ],
)
def test_tracer_misuse_points_at_the_users_line_with_the_right_hint(mini_registry, fn, code, hint):
    with pytest.raises(UserFunctionError) as err:
        to_onnx(fn, [(3,)])
    msg = str(err.value)
    assert f"{THIS_FILE}:" in msg and code in msg, msg
    assert hint in msg, msg
    assert "conversion.py" not in msg, msg  # JAX's note named our wrapper, not the user's function
    assert "flat[0]" not in msg and "'x'" in msg, msg
    assert "rank and sizes" not in msg, msg  # the shape hint does not fit a tracer misuse


def _branch_on_batch_size(x):
    if x.shape[0] > 1:  # decidable for a static size only
        return x
    return -x


def test_python_test_on_a_symbolic_dim_gets_the_comparison_hint(mini_registry):
    to_onnx(_branch_on_batch_size, [(3,)])  # a static size decides the test
    with pytest.raises(UserFunctionError) as err:
        to_onnx(_branch_on_batch_size, [("B",)])
    msg = str(err.value)
    assert f"{THIS_FILE}:" in msg and "x.shape[0] > 1" in msg, msg
    assert "holds for every size" in msg and "static size" in msg, msg
    assert "may need to be equal" not in msg, msg  # the hint for two dims combined does not fit


# -- unsupported primitives ----------------------------------------------------------------------
def test_all_unsupported_primitives_are_listed_at_once_with_their_lines(mini_registry):
    def f(x):
        a = jnp.tanh(x)
        b = jnp.log(x)
        return jnp.tanh(a) + b

    with pytest.raises(UnsupportedPrimitiveError) as err:
        to_onnx(f, [(3,)])
    msg = str(err.value)
    assert "'tanh'" in msg and "'log'" in msg, msg
    assert [u.primitive for u in err.value.unsupported] == ["tanh", "log"]
    tanh = err.value.unsupported[0]
    assert len(tanh.locations) == 2 and all(THIS_FILE in loc for loc in tanh.locations), tanh


def test_primitive_a_loaded_pack_does_not_lower_is_not_called_a_broken_install():
    # A registry whose loaded pack is named like the lax pack but lowers only the mini set.
    with registry_in_use(("jax2onnx-lax", MiniPack())), pytest.raises(UnsupportedPrimitiveError) as err:
        to_onnx(lambda x: jax.lax.erf_inv(x), [(3,)])
    msg = str(err.value)
    assert "did not register" not in msg and "should provide" not in msg, msg
    assert "does not convert it yet" in msg and "pip install" not in msg, msg


def test_primitive_called_directly_names_no_library_file(core_only_registry):
    with pytest.raises(UnsupportedPrimitiveError) as err:
        to_onnx(jnp.sin, [(3,)])
    msg = str(err.value)
    assert "'sin'" in msg and "(pip install jax2onnx-lax)" in msg, msg
    assert "/jax/" not in msg and "conversion.py" not in msg, msg


# -- input dtypes --------------------------------------------------------------------------------
@pytest.mark.parametrize(("dtype", "onnx_type"), [(jnp.int4, onnx.TensorProto.INT4), (jnp.uint4, onnx.TensorProto.UINT4)])
def test_int4_inputs_are_onnx_tensor_types(mini_registry, dtype, onnx_type):
    model = to_onnx(lambda x: x.astype(jnp.int8), [jax.ShapeDtypeStruct(("B", 4), dtype)])
    assert model.graph.input[0].type.tensor_type.elem_type == onnx_type
    onnx.checker.check_model(model, full_check=True)


def test_complex_inputs_round_trip_through_allclose(mini_registry):
    fn = lambda z: z + z  # noqa: E731
    model = to_onnx(fn, [jax.ShapeDtypeStruct((3,), jnp.complex64)])
    z = np.array([1 + 2j, 3 - 1j, 0.5j], np.complex64)
    result = allclose(fn, model, [z])
    assert result, str(result)
    wrong = allclose(lambda z: z * 3, model, [z])  # the comparison sees the imaginary parts
    assert not wrong


def test_class_passed_instead_of_instance(mini_registry):
    class Model:
        def __init__(self, features):
            self.features = features

        def __call__(self, x):
            return x * 2.0

    with pytest.raises(InputSpecError) as err:
        to_onnx(Model, [(3,)])
    msg = str(err.value)
    assert "class Model" in msg and "instance" in msg and "Model(...)" in msg, msg
    to_onnx(Model(3), [(3,)])  # the instance converts


# -- verification without onnxruntime ------------------------------------------------------------
def test_allclose_without_onnxruntime_says_what_to_install(mini_registry, monkeypatch):
    model = to_onnx(lambda x: x * 2.0, [(3,)])
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # makes `import onnxruntime` fail
    with pytest.raises(ImportError) as err:
        allclose(lambda x: x * 2.0, model, [np.ones(3, np.float32)])
    assert isinstance(err.value, Jax2OnnxError)
    assert "jax2onnx-core[runtime]" in str(err.value)


# -- the output file ------------------------------------------------------------------------------
def test_saved_model_gets_the_umask_mode(mini_registry, tmp_path):
    old = os.umask(0o022)
    try:
        path = tmp_path / "m.onnx"
        to_onnx(lambda x: x * 2.0, [(3,)], output_path=path)
        ext = tmp_path / "e.onnx"
        to_onnx(lambda x: x * 2.0, [(3,)], output_path=ext, external_data=True)
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    assert stat.S_IMODE(ext.stat().st_mode) == 0o644


def _counting():
    calls = []

    def f(x):
        calls.append(1)
        return x * 2.0

    return f, calls


def test_output_folder_that_cannot_exist_fails_before_converting(mini_registry, tmp_path):
    blocker = tmp_path / "not_a_folder"
    blocker.write_text("a file where the output folder should be")
    target = blocker / "model.onnx"
    f, calls = _counting()
    with pytest.raises(Jax2OnnxError) as err:
        to_onnx(f, [(3,)], output_path=target)
    assert calls == [], "the output path must be checked before tracing"
    msg = str(err.value)
    assert str(target) in msg and ".tmp" not in msg, msg


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root writes into read-only folders")
def test_read_only_folder_fails_before_converting(mini_registry, tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    f, calls = _counting()
    try:
        with pytest.raises(Jax2OnnxError) as err:
            to_onnx(f, [(3,)], output_path=folder / "model.onnx")
    finally:
        folder.chmod(0o755)
    assert calls == []
    assert str(folder / "model.onnx") in str(err.value) and ".tmp" not in str(err.value)


def test_external_data_without_output_path_says_so(mini_registry):
    with pytest.raises(InputSpecError) as err:
        to_onnx(lambda x: x * 2.0, [(3,)], external_data=True)
    msg = str(err.value)
    assert "output_path" in msg and "external_data" in msg, msg
    assert "GiB" not in msg and "over protobuf" not in msg, msg


def test_primitive_of_a_pack_that_failed_to_load_says_reinstall(tmp_path, monkeypatch):
    import warnings

    class FakeDist:
        name = "jax2onnx-lax"
        version = "0.1.0"

    class BrokenEntryPoint:  # an installed jax2onnx-lax whose plugin module fails to import
        name = "lax"
        group = "jax2onnx"
        value = "jax2onnx_lax_missing_module:plugin"
        dist = FakeDist()

        def load(self):
            raise ImportError("No module named 'jax2onnx_lax_missing_module'")

    broken = BrokenEntryPoint()
    with registry_in_use(("jax2onnx-mini", MiniPack()), entry_points=[broken]), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(UnsupportedPrimitiveError) as err:
            to_onnx(lambda x: jnp.tanh(x), [(3,)])
    msg = str(err.value)
    assert "failed to load" in msg and "pip install -U jax2onnx-lax" in msg, msg


def test_integer_outputs_match_exactly_even_past_2_53():
    """allclose compares integers as integers: 2**60 + 1 and 2**60 + 2 are one float64."""
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "one"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.INT64, [2])], [helper.make_tensor_value_info("y", TensorProto.INT64, [2])],
        [helper.make_tensor("one", TensorProto.INT64, [], [1])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    x = np.array([2**60, 2**61], np.int64)
    assert allclose(lambda x: x + 1, model, [x], enable_double_precision=True)
    off = allclose(lambda x: x + 2, model, [x], enable_double_precision=True)
    assert not off and off.comparison.max_abs_diff == [1.0], str(off)
