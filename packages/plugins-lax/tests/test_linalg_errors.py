"""Linear-algebra inputs the lowerings cannot take fail with an error that names the problem and the fix."""

import jax
import jax.numpy as jnp
import pytest
from jax2onnx import to_onnx


def _message(fn, specs):
    with pytest.raises(Exception) as info:
        to_onnx(fn, specs)
    return str(info.value)


def test_symbolic_matrix_size_names_static_dims():
    msg = _message(jnp.linalg.cholesky, [("N", "N")])
    assert "cholesky" in msg and "static" in msg and "batch dims may be symbolic" in msg


def test_complex_matrix_names_real_dtypes():
    msg = _message(jnp.linalg.solve, [jax.ShapeDtypeStruct((3, 3), jnp.complex64),
                                      jax.ShapeDtypeStruct((3, 1), jnp.complex64)])
    assert "complex" in msg and "float32/float64" in msg


def test_pivoted_qr_names_the_alternative():
    msg = _message(lambda a: jax.scipy.linalg.qr(a, pivoting=True), [(4, 3)])
    assert "pivoting" in msg
