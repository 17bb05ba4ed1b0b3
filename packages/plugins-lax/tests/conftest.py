"""JAX's outputs of a testcase variant, computed once per test process and reused by the tests that
run the same variant again under other lowering settings (panel widths, block sizes, unroll caps).
Those settings change the export only, never what JAX computes, so the outputs are the same ones,
as the opsets of one variant share them inside ``run_variant``; jitting the testcase in JAX was a
third of such a test's CPU."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from jax2onnx.testing import runner

_OUTPUTS: dict[tuple, Any] = {}


def _array_key(value: Any) -> tuple:
    array = np.asarray(value)
    return array.shape, array.dtype.str, array.tobytes()


@pytest.fixture
def share_jax_outputs(monkeypatch):
    """``share_jax_outputs(variant)``: for the rest of the test, ``run_variant(variant)`` computes
    JAX's outputs of an input set only if no earlier test of this process computed them for the
    same variant (component and id: the testcase, its dtype and dims), inputs, parameters and
    keywords."""

    def share(variant: runner.Variant) -> None:
        compute = runner.jax_expected

        def shared(fn, arrays, input_params=None, **kwargs):
            params = sorted((k, _array_key(v)) for k, v in (input_params or {}).items())
            key = (variant.component, variant.id, tuple(_array_key(a) for a in arrays), tuple(params),
                   tuple(sorted(kwargs.items())))
            if key not in _OUTPUTS:
                _OUTPUTS[key] = compute(fn, arrays, input_params, **kwargs)
            return _OUTPUTS[key]

        monkeypatch.setattr(runner, "jax_expected", shared)

    return share
