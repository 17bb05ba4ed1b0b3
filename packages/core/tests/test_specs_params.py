"""Errors about an ``input_params`` entry name that entry, not a positional input."""

import jax
import numpy as np
import pytest
from jax2onnx import InputSpecError
from jax2onnx.export.specs import parse_inputs


def test_bad_dim_in_an_input_param_names_the_param():
    with pytest.raises(InputSpecError, match=r"input_params\['scale'\]: negative dim -2"):
        parse_inputs(lambda x, scale: x * scale, [("B", 3)], {"scale": jax.ShapeDtypeStruct((-2,), np.float32)}, False)


def test_bad_dim_in_a_positional_input_names_its_index():
    with pytest.raises(InputSpecError, match=r"input 1: negative dim -1"):
        parse_inputs(lambda x, y: x + y, [(3,), (-1,)], None, False)
