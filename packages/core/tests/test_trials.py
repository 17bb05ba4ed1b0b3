"""One verification engine: ``jax2onnx.verify`` and the testcase runner get their trial inputs from
``verification/trials.py``, and dim expressions are evaluated by JAX, never by Python's ``eval``."""

from __future__ import annotations

import ast
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax2onnx.testing import runner
from jax2onnx.verification import report, trials

PACKAGES = pathlib.Path(__file__).resolve().parents[2]


def test_dim_expressions_are_evaluated_as_jax_parses_them():
    sizes = {"B": 5, "T": 7}
    assert trials.dim_value("2*B", sizes) == 10
    assert trials.dim_value("floordiv(B, 2) + max(T, 3)", sizes) == 9
    (b,) = jax.export.symbolic_shape("B")
    assert trials.dim_value(3 * b - 1, sizes) == 14
    assert trials.symbols([("B", "floordiv(T, 2)"), np.ones(3)]) == ["B", "T"]


@pytest.mark.parametrize("bad", ["__import__('os').getcwd()", "B; 1", "B if B else 2"])
def test_anything_but_a_dim_expression_is_refused(bad):
    with pytest.raises(ValueError, match="cannot evaluate the dim"):
        trials.dim_value(bad, {"B": 2})


def test_a_symbol_without_a_size_is_named():
    with pytest.raises(ValueError, match=r"no size for \['T'\]"):
        trials.dim_value("B*T", {"B": 2})


def test_report_and_runner_share_the_sizes_and_the_engine():
    assert runner.DYNAMIC_SIZES is report.TRIAL_SIZES is trials.TRIAL_SIZES
    assert report.trial_inputs is trials.trial_inputs
    runs = trials.trial_arrays([("B", "2*B"), jax.ShapeDtypeStruct(("B",), jnp.int32)], [np.float32, np.int32],
                               trials.size_assignments(["B"]))
    assert [[a.shape for a in run] for run in runs] == [[(2, 4), (2,)], [(5, 10), (5,)]]
    assert runs[0][1].dtype == np.int32 and runs[0][1].min() >= 0 and runs[0][1].max() < 4


def test_no_eval_in_the_packages():
    calls = []
    for path in PACKAGES.glob("*/src/**/*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("eval", "exec"):
                calls.append(f"{path.relative_to(PACKAGES)}:{node.lineno}")
    assert not calls, calls
