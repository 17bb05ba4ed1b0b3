"""eig/schur accuracy against JAX (LAPACK) through onnxruntime, and the inputs they decline.

Residuals (relative, Frobenius): ``||A V - V diag(w)|| / (||A|| ||V||)`` for eig,
``||Z T Z^T - A|| / ||A||`` and ``||Z^T Z - I||`` for schur. Each must stay within 10x of JAX's own
residual on the same matrix (JAX's floored at eps^2 so an exact zero cannot divide), on well-conditioned random matrices, matrices with an ill-conditioned eigenvector basis and badly
scaled (graded) ones, in float32 and float64.
"""

import jax
import jax.numpy as jnp
import numpy as np
import onnxruntime as ort
import pytest
from jax import lax
from jax2onnx import compat, to_onnx

N = 6


def _both(x):
    w, v = jnp.linalg.eig(x)
    t, z = lax.linalg.schur(x)
    return w.real, w.imag, v.real, v.imag, t, z


def _inputs(dtype):
    rng = np.random.default_rng(7)
    cases = {"random": rng.standard_normal((3, N, N))}
    cond = 1e2 if dtype == np.float32 else 1e4
    mats = []
    for _ in range(3):  # S diag(w) S^-1 with cond(S) ~ cond: eigenvalues sensitive, eigenvectors nearly parallel
        u, _, vt = np.linalg.svd(rng.standard_normal((N, N)))
        s = u @ np.diag(np.logspace(0, -np.log10(cond), N)) @ vt
        mats.append(s @ np.diag(rng.standard_normal(N)) @ np.linalg.inv(s))
    cases["ill_conditioned"] = np.stack(mats)
    d = np.logspace(-3, 3, N)
    cases["graded"] = rng.standard_normal((3, N, N)) * d[:, None] / d[None, :]
    return {k: v.astype(dtype) for k, v in cases.items()}


def _residuals(a, outs):
    a = a.astype(np.float64)
    wr, wi, vr, vi, t, z = (np.asarray(o, np.float64) for o in outs)
    w, v = wr + 1j * wi, vr + 1j * vi
    eig = np.linalg.norm(a @ v - v * w[..., None, :], axis=(-2, -1)) / (
        np.linalg.norm(a, axis=(-2, -1)) * np.linalg.norm(v, axis=(-2, -1)))
    zt = np.swapaxes(z, -1, -2)
    rec = np.linalg.norm(z @ t @ zt - a, axis=(-2, -1)) / np.linalg.norm(a, axis=(-2, -1))
    orth = np.linalg.norm(zt @ z - np.eye(a.shape[-1]), axis=(-2, -1))
    return {"eig": eig, "schur": rec, "orthogonality": orth}


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_residuals_within_10x_of_jax(dtype):
    double = dtype == np.float64
    eps = float(np.finfo(dtype).eps)
    model = to_onnx(_both, [jax.ShapeDtypeStruct((3, N, N), dtype)], enable_double_precision=double)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    worst = {}
    for kind, a in _inputs(dtype).items():
        ours = _residuals(a, sess.run(None, {sess.get_inputs()[0].name: a}))
        with compat.x64_enabled(double):
            ref = _residuals(a, jax.jit(_both)(jnp.asarray(a)))
        for name in ours:
            ratio = ours[name] / np.maximum(ref[name], eps * eps)
            worst[(kind, name)] = float(ratio.max())
            assert np.all(ratio <= 10.0), (kind, name, ours[name], ref[name])
    assert {kind for kind, _ in worst} == set(_inputs(dtype)), worst  # every input was checked
    print(dtype.__name__, {f"{k}/{n}": round(r, 2) for (k, n), r in worst.items()})


def _message(fn, specs):
    with pytest.raises(Exception) as info:  # the NotImplementedError, wrapped in a LoweringError
        to_onnx(fn, specs)
    return str(info.value)


def test_complex_input_names_the_real_form():
    spec = [jax.ShapeDtypeStruct((3, 3), jnp.complex64)]
    msg = _message(lambda a: jnp.linalg.eigvals(a), spec)
    assert "eig" in msg and "complex" in msg and "float32/float64" in msg and "[[Re, -Im], [Im, Re]]" in msg
    msg = _message(lambda a: lax.linalg.schur(a)[0], spec)
    assert "schur" in msg and "complex" in msg and "output='real'" in msg


def test_sorted_schur_names_the_parameter():
    msg = _message(lambda a: lax.linalg.schur(a, sort_eig_vals=True, select_callable=lambda r, i: r > 0)[0],
                   [(4, 4)])
    assert "sort_eig_vals" in msg and "sort_eig_vals=False" in msg
