"""precision= options and errors, with core alone and its test-only mini pack: a bad option is one
clear line naming it, a model without weight matmuls is refused for int8/int4, a weight beyond
float16's range stays float32 (or, streamed, stops the write with nothing left behind).

The precisions on real models (NNX MLPs, CNNs, transformer blocks, scanned and looped layers) are
tested where their lowerings are: packages/plugins-nnx/tests/test_precision.py and
test_precision_bodies.py; greedy tokens of a trained LM in packages/examples/tests."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import onnx
import pytest
from jax2onnx import Precision, PrecisionError, Weights, to_onnx
from jax2onnx.verification.compare import run_onnx


def test_float16_out_of_range_constant_stays_float32(mini_registry):
    """A weight beyond float16's range stays float32 and so does the matmul reading it."""
    w = np.full((64, 64), 1e5, np.float32)

    def f(x):
        return x @ w

    model = to_onnx(f, [(2, 64)], precision="float16")
    assert {t.data_type for t in model.graph.initializer} == {onnx.TensorProto.FLOAT}
    x = np.full((2, 64), 1e-4, np.float32)
    (got,) = run_onnx(model, [x])
    np.testing.assert_allclose(got, x @ w, rtol=1e-5)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"precision": "int3"}, "precision='int3' is unknown"),
    ({"precision": 16}, "precision must be a name"),
    ({"precision": Precision("int4", block_size=48)}, "block_size=48"),
    ({"precision": Precision("int8", keep_io_types=False)}, "keep_io_types=False"),
    ({"precision": Precision("int4", exclude="head")}, "list of name patterns"),
    ({"precision": Precision("int4", embeddings="int2")}, "embeddings='int2'.*'auto'"),
    ({"precision": Precision("int4", lm_head=None)}, "lm_head=None"),
    ({"precision": "float16", "enable_double_precision": True}, "drop enable_double_precision"),
    ({"precision": Precision("int8", activations="static")}, "activations='static': use None.*or 'dynamic'"),
    ({"precision": Precision("float16", activations="dynamic")}, "precision 'float16' has none"),
    ({"precision": Precision("int8", activations="dynamic", int8_kernel="MatMulNBits")},
     "int8_kernel='MatMulNBits' is weight-only"),
])
def test_bad_options_are_one_clear_line(mini_registry, kwargs, message):
    with pytest.raises(PrecisionError, match=message) as info:
        to_onnx(lambda x: x + 1.0, [(2, 3)], **kwargs)
    assert "\n" not in str(info.value)


def test_int8_activations_are_checked_once_and_frozen():
    """Weight-only unless asked; a dynamic kernel named alone implies dynamic activations."""
    from jax2onnx.precision import parse_precision

    assert parse_precision("int8").activations is None
    assert "weight-only" in parse_precision("int8").describe()
    dynamic = parse_precision(Precision("int8", int8_kernel="DynamicQuantizeMatMul"))
    assert dynamic.activations == "dynamic" and "dynamic activations" in dynamic.describe()
    assert parse_precision(Precision("int4", activations="dynamic")).activations == "dynamic"  # its int8 matmuls


def test_the_targets_precision_forms_are_the_precisions_kernels():
    """Precision takes exactly the kernels of the targets' forms, and each target's default int8
    form is weight-only while its dynamic form quantizes the activations."""
    from jax2onnx.precision.options import kernels
    from jax2onnx.targets import available_targets

    listed = {(f.kind, f.kernel) for t in available_targets() for f in t.precision_forms if f.kernel is not None}
    assert {(k, name) for k in ("int8", "int4") for name in kernels(k)} == listed
    assert set(kernels("int8", "dynamic")) == {"DynamicQuantizeMatMul", "MatMulInteger"}
    for target in available_targets():
        if target.forms_of("int8"):
            assert target.precision_form("int8").activations is None, target
            assert target.forms_of("int8", "dynamic")[0].kernel in kernels("int8", "dynamic"), target


@pytest.mark.parametrize("precision", ["int8", "int4"])
def test_quantizing_a_model_without_weight_matmuls_is_one_clear_line(mini_registry, precision):
    with pytest.raises(PrecisionError, match="has none") as info:
        to_onnx(lambda x: jnp.sin(x) * 2.0, [("B", 8)], precision=precision)
    assert "\n" not in str(info.value)


def test_streamed_float16_weight_beyond_range_is_an_error_naming_it(mini_registry, tmp_path):
    """A streamed weight is converted when written; one beyond float16's range stops the write."""
    w = {"w": np.full((64, 64), 1e6, np.float32)}

    def f(params, x):
        return x @ params["w"]

    spec = {"w": jax.ShapeDtypeStruct((64, 64), jnp.float32)}
    with pytest.raises(PrecisionError, match="'w'.*beyond float16's range"):
        to_onnx(f, [Weights(spec, w), (2, 64)], output_path=tmp_path / "m.onnx", external_data=True, precision="float16")
    assert not (tmp_path / "m.onnx").exists()


def test_the_precision_stage_finds_each_weight_form_by_the_kernel_it_names():
    """One source of truth: every int8/int4 kernel ``Precision`` accepts is one form class that the
    stage asks (``weight_form``), with its layout and its answers to the stage's questions."""
    from jax2onnx.precision.options import kernels
    from jax2onnx.targets.precision_forms import WeightMatmulForm, weight_form

    for kind in ("int8", "int4"):
        for kernel in kernels(kind):
            form = weight_form(kind, kernel)
            assert isinstance(form, WeightMatmulForm) and (form.kind, form.kernel) == (kind, kernel)
            assert form.parts(64, 16, Precision(kind, block_size=32)), form  # a layout for a [64, 16] weight
    standard_int4 = weight_form("int4", "DequantizeLinear")
    assert not (standard_int4.sliceable or standard_int4.int4_embeddings or standard_int4.accuracy_levels)
    assert weight_form("int4", "MatMulNBits").accuracy_levels
    assert weight_form("int8", None, "dynamic").activations == "dynamic"  # a precision no target fitted
    with pytest.raises(ValueError, match="no int8 form writes 'Gemm'"):
        weight_form("int8", "Gemm")


def test_a_weight_forms_parts_round_trip_through_its_quantizer():
    """Each form's quantizer writes exactly the parts it declares (dtype and shape), so the stage
    writes them without knowing the layout."""
    from jax2onnx.precision.options import kernels
    from jax2onnx.targets.precision_forms import weight_form

    w = np.linspace(-1, 1, 96 * 24, dtype=np.float32).reshape(96, 24)
    checked = []
    for kind in ("int8", "int4"):
        p = Precision(kind, block_size=32, symmetric=False)
        for kernel in kernels(kind):
            form = weight_form(kind, kernel)
            specs = form.parts(96, 24, p)
            parts = form.quantizer(96, p)(w)[: len(specs)]
            assert [(tuple(a.shape), str(a.dtype)) for a in parts] == \
                [(shape, str(dtype.numpy())) for _, dtype, shape in specs], (kind, kernel)
            checked.append((kind, kernel))
    assert {kind for kind, _ in checked} == {"int8", "int4"}, checked  # both kinds have forms to check
