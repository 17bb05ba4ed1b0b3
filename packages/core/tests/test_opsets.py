"""Opsets, IR versions and the onnxruntime table (docs/opsets.md) stay true."""

from __future__ import annotations

import os
import re

import jax.numpy as jnp
import numpy as np
import onnx
import pytest
from jax2onnx import allclose, to_onnx
from jax2onnx.errors import InputSpecError
from jax2onnx.ir import runtime
from jax2onnx.ir.opsets import MIN_ONNXRUNTIME, MIN_OPSET, ir_version, max_opset, op_available

DOCS = os.path.join(os.path.dirname(__file__), "..", "..", "..", "docs", "opsets.md")


def _f(x):
    return jnp.sin(x) * 2.0


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", text)[:2])


@pytest.mark.parametrize("opset", range(MIN_OPSET, max_opset() + 1))
def test_ir_version_is_the_oldest_onnx_pairs_with_the_opset(mini_registry, opset):
    model = to_onnx(_f, [("B", 3)], opset=opset)
    want = onnx.helper.find_min_ir_version_for([onnx.helper.make_opsetid("", opset)], ignore_unknown=True)
    assert model.ir_version == want == ir_version(opset)
    onnx.checker.check_model(model, full_check=True)


def test_default_export_is_opset_23_ir_11(mini_registry):
    model = to_onnx(_f, [("B", 3)])
    assert (model.opset_import[0].version, model.ir_version) == (23, 11)


def test_a_dtype_newer_than_the_opset_names_the_opset_that_has_it(mini_registry):
    # float8 exists in ONNX from opset 19: at 17 the model could not be valid.
    def f(x):
        return x.astype(jnp.float8_e4m3fn).astype(jnp.float32)

    with pytest.raises(InputSpecError, match="float8e4m3fn values, an ONNX type from opset 19.*pass opset=19"):
        to_onnx(f, [(3,)], opset=17)
    assert to_onnx(f, [(3,)], opset=19).ir_version == 9  # float8 needs IR 9, which opset 19 has anyway


def test_onnxruntime_table_covers_every_opset_up_to_the_measured_and_is_monotonic():
    opsets = sorted(MIN_ONNXRUNTIME)
    assert opsets == list(range(MIN_OPSET, opsets[-1] + 1))
    versions = [_version(MIN_ONNXRUNTIME[o]) for o in opsets]
    assert versions == sorted(versions)


def test_docs_table_is_the_code_table():
    with open(DOCS, encoding="utf-8") as f:
        text = f.read()
    rows = dict(re.findall(r"^\|\s*(\d+)\s*\|\s*\d+\s*\|\s*([\d.]+)", text, flags=re.M))
    assert {int(k): v for k, v in rows.items()} == MIN_ONNXRUNTIME
    for opset, v in rows.items():  # the IR column is what to_onnx writes (with an onnx that knows the opset)
        if int(opset) > max_opset():
            continue
        ir = re.search(rf"^\|\s*{opset}\s*\|\s*(\d+)\s*\|", text, flags=re.M).group(1)
        assert int(ir) == ir_version(int(opset))


def test_installed_onnxruntime_runs_the_opsets_the_table_promises(mini_registry):
    """Every opset the table says the installed onnxruntime runs loads and matches JAX; with the
    floor's onnxruntime (the matrix's floor cell) this is the floor's promise."""
    ort = pytest.importorskip("onnxruntime")
    installed = _version(ort.__version__)
    promised = [o for o, v in MIN_ONNXRUNTIME.items() if _version(v) <= installed and o <= max_opset()]
    assert promised, f"onnxruntime {ort.__version__} is older than every row of the table"
    x = np.linspace(-2, 2, 6, dtype=np.float32).reshape(2, 3)
    for opset in promised:
        model = to_onnx(_f, [("B", 3)], opset=opset)
        assert allclose(_f, model, [x]), opset


def test_runner_exports_every_variant_at_the_requested_opset(mini_registry):
    from jax2onnx.testing import Testcase
    from jax2onnx.testing.runner import model_opset, run_variant, variants_of

    case = Testcase("sin_twice", _f, [("B", 3)], expected_ops=["Sin"])
    variants = list(variants_of(case, "jax2onnx-mini", "mini.sin", opset=17))
    assert [v.id for v in variants] == ["sin_twice_opset17", "sin_twice_dynamic_opset17", "sin_twice_f64_opset17",
                                        "sin_twice_dynamic_f64_opset17"]
    for v in variants:
        assert model_opset(run_variant(v).model) == 17
    assert [v.id for v in variants_of(case)][0] == "sin_twice"  # no opset: to_onnx's default, ids unchanged


def test_runner_drops_the_fused_structure_of_ops_the_opset_lacks():
    from jax2onnx.testing import Testcase
    from jax2onnx.testing.runner import Variant

    case = Testcase("g", _f, [(3,)], expected_ops=["Gelu", "Sin", "LayerNormalization"])
    assert Variant(case, False, False, opset=17).fused_ops_unavailable == ["Gelu"]
    assert Variant(case, False, False, opset=20).fused_ops_unavailable == []
    assert Variant(case, False, False).fused_ops_unavailable == []


def test_min_opset_that_is_not_needed_fails_the_variant(mini_registry):
    from jax2onnx.testing import Testcase
    from jax2onnx.testing.runner import Variant, run_variant

    case = Testcase("sin_claims_18", _f, [(3,)], min_opset=18)
    with pytest.raises(AssertionError, match="min_opset=18 says opset 17 cannot express this testcase, but the export succeeded"):
        run_variant(Variant(case, False, False, opset=17))
    run_variant(Variant(case, False, False, opset=18))


def test_an_op_is_available_from_the_first_opset_with_its_meaning():
    assert not op_available("GroupNormalization", 20)  # GroupNormalization-18 scales per group
    assert op_available("GroupNormalization", 21)
    assert not op_available("Gelu", 19) and op_available("Gelu", 20)
    assert not op_available("LayerNormalization", 16)  # legalization forms it there, but no node of it
    assert not op_available("NoSuchOp", max_opset())


def test_an_attribute_value_newer_than_its_op_is_asked_with_it():
    """ScatterElements is 11, its reduction="add" 16 and "max" 18 (legalized into older forms before)."""
    assert op_available("ScatterElements", 13) and not op_available("ScatterElements", 15, reduction="add")
    assert op_available("ScatterElements", 16, reduction="add")
    assert not op_available("ScatterND", 17, reduction="max") and op_available("ScatterND", 18, reduction="max")
    assert op_available("ScatterND", 13, reduction="none")  # a value the table does not list: the op's own opset


def test_no_kernel_answers_for_an_op_before_its_meaning():
    rt = runtime.for_version("1.32")
    assert rt.dtypes("GroupNormalization", 20) == frozenset()  # the schema of -18 takes float32
    assert np.dtype(np.float32) in rt.dtypes("GroupNormalization", 21)
