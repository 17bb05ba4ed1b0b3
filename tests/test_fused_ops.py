"""Every library function a pack fuses (``Lowerings.register_library``) exports as its op: one row
per registered path, the main graph's ops in order, checked by onnx.checker and run in
onnxruntime against JAX. A fusion that stops firing (the re-trace no longer matching, as
``jnp.clip(x, -0.5, 0.7)`` did when JAX began keeping the bounds' Python numbers) shows here as
the function's own arithmetic instead of its op; a new registration without a row fails
:func:`test_every_library_fusion_has_a_row`."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import jax.scipy.linalg
import numpy as np
import onnx
import pytest
from jax import export
from jax2onnx import allclose, to_onnx
from jax2onnx.lower.registry import get_registry
from jax2onnx.plugin import LIBRARY_PREFIX

flax = pytest.importorskip("flax")
from flax import linen, nnx  # noqa: E402

B = export.symbolic_shape("B")[0]


def f32(*shape):
    return jax.ShapeDtypeStruct(shape, jnp.float32)


def i32(*shape):
    return jax.ShapeDtypeStruct(shape, jnp.int32)


X, IMG, QKV = f32(3, 4), f32(2, 6, 6, 3), f32(2, 5, 2, 4)
ORT = {"target": "onnxruntime"}  # com.microsoft.Inverse for the solves
MAX_POOL = ["Transpose", "MaxPool", "Transpose", "ReduceSum", "IsNaN", "If"]  # NaN guard, past the layout Transposes
ATTENTION = ["Reshape", "Reshape", "Reshape", "Attention", "Reshape"]
#: the NaN check of a fused max/min (onnxruntime's ReduceMax/ReduceMin drop NaN)
NAN_CHECKED = ["IsNaN", "ReduceMax", "Where"]

#: path -> (function, input specs, the main graph's ops in order, to_onnx keywords)
FUSED = {
    "flax.linen.avg_pool": (lambda x: linen.avg_pool(x, (2, 2), (2, 2)), [IMG], ["Transpose", "AveragePool", "Transpose"], {}),
    "flax.nnx.avg_pool": (lambda x: nnx.avg_pool(x, (2, 2), (2, 2)), [IMG], ["Transpose", "AveragePool", "Transpose"], {}),
    "flax.linen.max_pool": (lambda x: linen.max_pool(x, (2, 2), (2, 2)), [IMG], MAX_POOL, {}),
    "flax.nnx.max_pool": (lambda x: nnx.max_pool(x, (2, 2), (2, 2)), [IMG], MAX_POOL, {}),
    "flax.linen.dot_product_attention": (linen.dot_product_attention, [QKV] * 3, ATTENTION, {}),
    "flax.nnx.dot_product_attention": (nnx.dot_product_attention, [QKV] * 3, ATTENTION, {}),
    "jax.nn.dot_product_attention": (jax.nn.dot_product_attention, [QKV] * 3, ATTENTION, {}),
    # negative indices wrap (Less, Where), then one OneHot
    "jax._src.nn.functions:_one_hot": (lambda i: jax.nn.one_hot(i, 5), [i32(3, 4)], ["Cast", "Less", "Where", "OneHot"], {}),
    "jax._src.numpy.indexing:_take": (lambda x: jnp.take(x, jnp.array([2, 0]), axis=1, mode="clip"), [X], ["Gather"], {}),
    "jax._src.numpy.lax_numpy:_pad": (lambda x: jnp.pad(x, ((1, 2), (0, 1)), mode="edge"), [X], ["Pad"], {}),
    "jax._src.numpy.lax_numpy:_roll_static": (lambda x: jnp.roll(x, 1, axis=1), [X], ["Gather"], {}),
    "jax._src.numpy.reductions:_var": (lambda x: jnp.var(x, axis=1), [X], ["ReduceMean", "Sub", "Mul", "ReduceMean"], {}),
    "jax._src.numpy.reductions:_std": (lambda x: jnp.std(x, axis=1), [X],
                                       ["ReduceMean", "Sub", "Mul", "ReduceMean", "Sqrt"], {}),
    "jax._src.numpy.util:_where": (lambda x: jnp.where(x > 0, x, 0.7), [X], ["Greater", "Where"], {}),
    "jax._src.scipy.linalg:_solve": (lambda a, b: jax.scipy.linalg.solve(a, b), [f32(4, 4), f32(4, 2)],
                                     ["Inverse", "MatMul", "MatMul", "Sub", "MatMul", "Add"], ORT),
    "jax.numpy.linalg.solve": (jnp.linalg.solve, [f32(4, 4), f32(4, 2)],
                               ["Inverse", "MatMul", "MatMul", "Sub", "MatMul", "Add"], ORT),
    "jax.numpy.linalg.inv": (jnp.linalg.inv, [f32(4, 4)], ["Inverse", "MatMul", "Sub", "MatMul", "Add"], ORT),
    "jax.nn.celu": (lambda x: jax.nn.celu(x, 0.7), [X], ["Celu"], {}),
    "jax.nn.elu": (lambda x: jax.nn.elu(x, 0.7), [X], ["Elu"], {}),
    "jax.nn.gelu": (lambda x: jax.nn.gelu(x, approximate=False), [X], ["Gelu"], {}),
    "jax.nn.hard_sigmoid": (jax.nn.hard_sigmoid, [X], ["HardSigmoid"], {}),
    "jax.nn.hard_silu": (jax.nn.hard_silu, [X], ["HardSwish"], {}),
    "jax.nn.hard_tanh": (jax.nn.hard_tanh, [X], ["Clip"], {}),
    "jax.nn.leaky_relu": (lambda x: jax.nn.leaky_relu(x, 0.25), [X], ["LeakyRelu"], {}),
    "jax.nn.log_softmax": (lambda x: jax.nn.log_softmax(x, axis=-1), [X], ["LogSoftmax"], {}),
    "jax.nn.logsumexp": (lambda x: jax.nn.logsumexp(x, axis=1), [X], ["ReduceLogSumExp"], {}),
    "jax.nn.mish": (jax.nn.mish, [X], ["Mish"], {}),
    "jax.nn.relu": (jax.nn.relu, [X], ["Relu"], {}),
    "jax.nn.relu6": (jax.nn.relu6, [X], ["Clip"], {}),
    "jax.nn.selu": (jax.nn.selu, [X], ["Selu"], {}),
    "jax.nn.silu": (jax.nn.silu, [X], ["Sigmoid", "Mul"], {}),  # ONNX has no Swish before opset 24
    "jax.nn.softmax": (lambda x: jax.nn.softmax(x, axis=-1), [X], ["Softmax"], {}),
    "jax.nn.softplus": (jax.nn.softplus, [X], ["Softplus"], {}),
    "jax.nn.standardize": (lambda x: jax.nn.standardize(x, axis=-1), [X], ["LayerNormalization"], {}),
    "jax.numpy.arange": (lambda x: jnp.arange(x.shape[0]), [jax.ShapeDtypeStruct((B, 4), jnp.float32)],
                         ["Shape", "Squeeze", "Cast", "Range"], {}),
    "jax.numpy.argsort": (lambda x: jnp.argsort(x, axis=1), [X], ["TopK", "Cast"], {}),
    "jax.numpy.clip": (lambda x: jnp.clip(x, -0.5, 0.7), [X], ["Clip"], {}),
    "jax.numpy.cumsum": (lambda x: jnp.cumsum(x, axis=1), [X], ["CumSum"], {}),
    "jax.numpy.einsum": (lambda a, b: jnp.einsum("ij,jk->ik", a, b), [X, f32(4, 2)], ["Einsum"], {}),
    "jax.numpy.linalg.norm": (lambda x: jnp.linalg.norm(x, axis=1), [X], ["ReduceL2"], {}),
    "jax.numpy.max": (lambda x: jnp.max(x, axis=1, keepdims=True), [X], ["ReduceMax", *NAN_CHECKED], {}),
    "jax.numpy.min": (lambda x: jnp.min(x, axis=1, keepdims=True), [X], ["ReduceMin", *NAN_CHECKED], {}),
    "jax.numpy.mean": (lambda x: jnp.mean(x, axis=1), [X], ["ReduceMean"], {}),
    # the plugin-pack template's library fusion (installed by `nox -s tests`, as a third-party pack)
    "jax2onnx_mypack.example_library.mish": (lambda x: _template_mish()(x), [X], ["Mish"], {}),
    "jax.numpy.prod": (lambda x: jnp.prod(x, axis=1, keepdims=True), [X], ["ReduceProd"], {}),
    "jax.numpy.sum": (lambda x: jnp.sum(x, axis=1, keepdims=True), [X], ["ReduceSum"], {}),
    "jax.numpy.repeat": (lambda x: jnp.repeat(x, 2, axis=1), [X], ["Gather"], {}),
    "jax.numpy.select": (lambda x: jnp.select([x > 0, x < -1], [x, -x], 0.5), [X],
                         ["Greater", "Less", "Neg", "Where", "Where"], {}),
    "jax.numpy.sort": (lambda x: jnp.sort(x, axis=1), [X], ["TopK"], {}),
    # indices clipped into range (Clip), negative ones wrapped (Less, Add, Where), one GatherElements
    "jax.numpy.take_along_axis": (lambda x, i: jnp.take_along_axis(x, i, axis=1, mode="clip"), [X, i32(3, 4)],
                                  ["Cast", "Less", "Add", "Where", "Clip", "GatherElements"], {}),
    "jax.numpy.tile": (lambda x: jnp.tile(x, (2, 1)), [X], ["Tile"], {}),
}


#: sorts whose library code in JAX 0.6 (the floor) orders NaN with extra ops around the fused TopK
NAN_ORDERED_BEFORE_JAX_0_7 = {"jax.numpy.argsort", "jax.numpy.sort"}


def _template_mish():
    from jax2onnx_mypack.example_library import mish

    return mish


def _registered() -> set[str]:
    return {name[len(LIBRARY_PREFIX):] for name in get_registry().lowerings() if name.startswith(LIBRARY_PREFIX)}


def _values(specs, rng):
    """Inputs for ``specs``: integers in [0, 4) (valid indices and one-hot codes), floats normal;
    square matrices well conditioned (the solves); symbolic sizes 3."""
    out = []
    for spec in specs:
        shape = tuple(d if isinstance(d, int) else 3 for d in spec.shape)
        if np.issubdtype(spec.dtype, np.integer):
            out.append(rng.integers(0, 4, shape).astype(spec.dtype))
        elif len(shape) == 2 and shape[0] == shape[1]:
            out.append((rng.standard_normal(shape) + 4 * np.eye(shape[0])).astype(spec.dtype))
        else:
            out.append(rng.standard_normal(shape).astype(spec.dtype))
    return out


def test_every_library_fusion_has_a_row():
    missing = sorted(_registered() - set(FUSED))
    assert not missing, f"library fusions without a row in FUSED (add the call and its op): {missing}"


@pytest.mark.parametrize("path", sorted(FUSED))
def test_fused_function_exports_as_its_op(path):
    if path not in _registered():
        pytest.skip(f"{path}: its pack is not installed")
    fn, specs, expected, options = FUSED[path]
    model = to_onnx(fn, specs, **options)
    ops = [n.op_type for n in model.graph.node]
    if path in NAN_ORDERED_BEFORE_JAX_0_7 and tuple(int(p) for p in jax.__version__.split(".")[:2]) < (0, 7):
        # the floor's JAX (0.6) sorts NaN explicitly in the library code the fusion re-traces: its op is there, with that
        assert set(expected) <= set(ops), ops
    else:
        assert ops == expected
    onnx.checker.check_model(model, full_check=True)
    ok, report = allclose(fn, model, _values(specs, np.random.default_rng(0)))
    assert ok, report


@pytest.mark.parametrize("opset", [13, 17, 23])
@pytest.mark.parametrize(("fn", "bound_inputs"), [
    (lambda x: jnp.clip(x, -0.5, 0.7), 2),  # bounds float32 cannot hold exactly: constants of x's dtype
    (lambda x: jnp.clip(x, max=0.7), 2),  # an absent bound is an empty input
    (lambda x: jnp.clip(x, -3, 5), 2),
], ids=["both", "max-only", "int-literals"])
def test_clip_with_scalar_bounds_is_one_clip(fn, bound_inputs, opset):
    x = np.array([[np.nan, -np.inf, -4.0, -0.5], [0.0, 0.69, 0.71, 6.0], [np.inf, -0.51, 2.0, -1.0]], np.float32)
    model = to_onnx(fn, [X], opset=opset)
    assert [n.op_type for n in model.graph.node] == ["Clip"]
    assert len(model.graph.node[0].input) == 1 + bound_inputs
    ok, report = allclose(fn, model, [x])  # NaN stays NaN, infinities are clipped
    assert ok, report


def test_fused_max_and_min_keep_nan():
    x = np.arange(24, dtype=np.float32).reshape(3, 8)
    x[0, 2] = x[1, 7] = np.nan  # a NaN first, in the middle and last of a row's kernel order
    x[2, 0] = np.nan
    for fn in (lambda v: jnp.max(v, axis=1, keepdims=True), lambda v: jnp.min(v, axis=1, keepdims=True)):
        model = to_onnx(fn, [f32(3, 8)])
        ok, report = allclose(fn, model, [x])
        assert ok, report
        assert np.isnan(np.asarray(fn(x))).all()  # every row holds a NaN: JAX's answer is NaN throughout
