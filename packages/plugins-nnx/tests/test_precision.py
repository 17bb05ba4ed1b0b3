"""to_onnx(..., precision=...) in its onnxruntime forms (target="onnxruntime"; the standard forms:
test_precision_targets.py): each precision on an MLP, a CNN and an NNX transformer block loads in
onnxruntime, keeps float32 inputs and outputs, has no Cast feeding a Cast, matches the float32 JAX
function at the precision's cosine floor, and shrinks the weights as documented.

Core's precision stage, tested here on NNX models (the lax, jnp and nnx packs lower them); its
option checks and errors, which need no pack, are core's (packages/core/tests/test_precision_options.py)."""

from __future__ import annotations

import collections
import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import onnx
import pytest
from flax import nnx
from jax2onnx import Precision, Weights, to_onnx, verify
from jax2onnx.export.weights import leaf_name
from jax2onnx.verification.compare import run_onnx
from jax2onnx.verification.precision import MIN_COSINE, cosine
from jax2onnx_nnx.testcases.models import PreLNTransformerLayer, QuickstartMLP
from precision_checks import cast_feeding_cast, io_types, weight_bytes

PRECISIONS = ["float16", "bfloat16", "int8", "int4"]
#: weights of float32 bytes at most, on models whose weights are mostly matmuls (the issue's targets)
MAX_BYTES_RATIO = {"float16": 0.51, "bfloat16": 0.51, "int8": 0.27, "int4": 0.17}


class MLP512(nnx.Module):
    def __init__(self, rngs: nnx.Rngs):
        layers = [nnx.Linear(512, 512, rngs=rngs) for _ in range(3)]
        self.layers = nnx.List(layers) if hasattr(nnx, "List") else layers  # Flax 0.10 has no nnx.List

    def __call__(self, x):
        for layer in self.layers[:-1]:
            x = nnx.relu(layer(x))
        return self.layers[-1](x)


class CNN(nnx.Module):
    """Convolutions, pooling, a spatial mean (a float32 reduction at low precision), dense layers and a
    log-softmax (float32 at low precision)."""

    def __init__(self, rngs: nnx.Rngs):
        self.conv1 = nnx.Conv(3, 16, kernel_size=(3, 3), rngs=rngs)
        self.conv2 = nnx.Conv(16, 32, kernel_size=(3, 3), rngs=rngs)
        self.fc1 = nnx.Linear(32, 128, rngs=rngs)
        self.fc2 = nnx.Linear(128, 10, rngs=rngs)

    def __call__(self, x):
        x = nnx.max_pool(nnx.relu(self.conv1(x)), (2, 2), (2, 2))
        x = jnp.mean(nnx.relu(self.conv2(x)), axis=(1, 2))
        return jax.nn.log_softmax(self.fc2(nnx.relu(self.fc1(x))))


def _quickstart():
    m = QuickstartMLP(30, 20, 10, rngs=nnx.Rngs(0))
    m.eval()
    return m


MODELS = {
    "quickstart": (_quickstart, [("B", 30)]),
    "mlp512": (lambda: MLP512(nnx.Rngs(0)), [("B", 512)]),
    "cnn": (lambda: CNN(nnx.Rngs(0)), [("B", 12, 12, 3)]),
    "block256": (lambda: PreLNTransformerLayer(256, 4, 1024, rngs=nnx.Rngs(0)), [("B", 16, 256)]),
}
#: models whose weights are mostly matmuls: held to the byte targets
MATMUL_DOMINATED = {"mlp512", "block256"}


@pytest.fixture(scope="module")
def built():
    cache = {}

    def get(name):
        if name not in cache:
            make, specs = MODELS[name]
            model = make()
            cache[name] = (model, specs, to_onnx(model, specs))
        return cache[name]

    return get


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("name", list(MODELS))
def test_precision_on_models(built, name, precision):
    fn, specs, reference = built(name)
    model = to_onnx(fn, specs, target="onnxruntime", precision=precision)
    onnx.checker.check_model(model, full_check=True)
    assert io_types(model) == {onnx.TensorProto.FLOAT}
    assert cast_feeding_cast(model) == []
    report = verify(fn, model, specs)  # onnxruntime runs it at two batch sizes
    assert report.precision is not None and report.precision.kind == precision
    worst = min(o.cosine for o in report.precision.outputs)
    assert worst >= MIN_COSINE[precision], report.failures()
    assert report, report.failures()
    ratio = weight_bytes(model) / weight_bytes(reference)
    assert ratio < 1.0
    if name in MATMUL_DOMINATED:
        assert ratio <= MAX_BYTES_RATIO[precision], f"{precision}: {ratio:.3f} of the float32 bytes"
    assert report.precision.bytes_by_dtype and sum(report.precision.bytes_by_dtype.values()) == weight_bytes(model)


def test_low_float_keeps_sensitive_work_in_float32(built):
    fn, specs, _ = built("cnn")
    model = to_onnx(fn, specs, precision="float16")
    types = {v.name: v.type.tensor_type.elem_type for v in model.graph.value_info}
    types.update({v.name: v.type.tensor_type.elem_type for v in model.graph.output})
    ops = {n.op_type: n for n in model.graph.node}
    assert types[ops["Conv"].output[0]] == onnx.TensorProto.FLOAT16
    for op in ("ReduceMean", "LogSoftmax"):
        assert types[ops[op].output[0]] == onnx.TensorProto.FLOAT, op
    assert {t.data_type for t in model.graph.initializer if len(t.dims) >= 2} == {onnx.TensorProto.FLOAT16}


def test_layer_norm_and_attention_statistics_stay_float32(built):
    fn, specs, _ = built("block256")
    model = to_onnx(fn, specs, precision="float16")
    norms = [{a.name: a.i for a in n.attribute} for n in model.graph.node if n.op_type == "LayerNormalization"]
    attention = [{a.name: a.i for a in n.attribute} for n in model.graph.node if n.op_type == "Attention"]
    assert norms and attention, [n.op_type for n in model.graph.node]  # the block has both: else this checks nothing
    assert all(attrs.get("stash_type", 1) == 1 for attrs in norms)
    assert all(attrs["softmax_precision"] == onnx.TensorProto.FLOAT for attrs in attention)


def test_bfloat16_is_carried_in_float32_where_onnxruntime_has_no_kernel(built):
    fn, specs, _ = built("mlp512")
    model = to_onnx(fn, specs, precision="bfloat16")
    detail = {p.key: p.value for p in model.metadata_props}["jax2onnx.precision.detail"]
    assert "carrier" in detail and "float32" in detail
    assert {t.data_type for t in model.graph.initializer if len(t.dims) == 2} == {onnx.TensorProto.BFLOAT16}
    assert all(n.op_type != "Cast" or n.input[0] in {t.name for t in model.graph.initializer} for n in model.graph.node)


def test_keep_io_types_false_gives_16_bit_inputs_and_outputs():
    fn = MLP512(nnx.Rngs(1))
    model = to_onnx(fn, [("B", 512)], precision=Precision("float16", keep_io_types=False))
    assert io_types(model) == {onnx.TensorProto.FLOAT16}
    x = np.random.default_rng(0).standard_normal((3, 512)).astype(np.float32)
    (got,) = run_onnx(model, [x.astype(np.float16)])
    assert got.dtype == np.float16
    assert cosine(np.asarray(fn(x)), got) >= MIN_COSINE["float16"]


@pytest.mark.parametrize("block_size", [32, 64, 128])
@pytest.mark.parametrize("symmetric", [True, False])
def test_int4_block_sizes_and_zero_points(built, block_size, symmetric):
    fn, specs, reference = built("mlp512")
    model = to_onnx(fn, specs, target="onnxruntime", precision=Precision("int4", block_size=block_size, symmetric=symmetric))
    nodes = [n for n in model.graph.node if n.op_type == "MatMulNBits"]
    assert len(nodes) == 3
    assert all((len(n.input) > 3 and n.input[3] != "") == (not symmetric) for n in nodes)  # zero points
    assert all({a.name: a.i for a in n.attribute}["block_size"] == block_size for n in nodes)
    report = verify(fn, model, specs)
    assert report, report.failures()
    if block_size == 32:
        assert min(o.cosine for o in report.precision.outputs) >= 0.97


@pytest.mark.parametrize(("kernels", "floor"), [(("MatMulNBits", "DequantizeLinear"), "int8"),
                                                 (("DynamicQuantizeMatMul", "MatMulInteger"), "int8 dynamic")],
                         ids=["weight-only", "dynamic"])
def test_int8_kernels_agree(built, kernels, floor):
    """Each int8 kernel named under target="onnxruntime" is written and meets its floor: the
    weight-only ones int8's, the dynamic ones (activations quantized per tensor) their own."""
    fn, specs, _ = built("block256")
    x = np.random.default_rng(0).standard_normal((2, 16, 256)).astype(np.float32)
    outs = {}
    for kernel in kernels:
        model = to_onnx(fn, specs, target="onnxruntime", precision=Precision("int8", int8_kernel=kernel))
        assert any(n.op_type == kernel for n in model.graph.node)
        assert cast_feeding_cast(model) == []
        (outs[kernel],) = run_onnx(model, [x])
    ref = np.asarray(fn(x))
    assert kernels and sorted(outs) == sorted(kernels)  # every kernel named was exported and run
    for got in outs.values():
        assert cosine(ref, got) >= MIN_COSINE[floor]


class TinyLM(nnx.Module):
    def __init__(self, rngs: nnx.Rngs, vocab: int = 512, dim: int = 128):
        self.embed = nnx.Embed(vocab, dim, rngs=rngs)
        self.block = PreLNTransformerLayer(dim, 4, 4 * dim, rngs=rngs)
        self.head = nnx.Linear(dim, vocab, rngs=rngs)

    def __call__(self, ids):
        return self.head(self.block(self.embed(ids)))


def named_values(module):
    """The module's parameters by the names a Weights spec gives them (pytree paths)."""
    flat = jax.tree_util.tree_flatten_with_path(nnx.state(module))[0]
    return {leaf_name(path): np.asarray(v) for path, v in flat}


def test_streamed_weights_are_quantized_once_each_with_exclusions_and_int8_embeddings(tmp_path):
    """Weights(...) export: every weight is read from its source once, quantized on the way out; the
    excluded weight stays float32, the head pattern is int8 and the embedding table int8."""
    abstract = nnx.eval_shape(lambda: TinyLM(nnx.Rngs(0)))
    graphdef, state = nnx.split(abstract)
    real = TinyLM(nnx.Rngs(0))
    values = named_values(real)
    reads: list[str] = []

    def source(name):
        reads.append(name)
        return values[name]

    def forward(params, ids):
        return nnx.merge(graphdef, params)(ids)

    # a fixed accuracy level: "auto" (the default) runs the quantized layers to choose it, reading the
    # int4 weights once more per run (below)
    p = Precision("int4", exclude=["block.fc2.*"], int8=["head.*"], embeddings="int8", accuracy_level=1)
    spec = jax.ShapeDtypeStruct((2, 8), jnp.int32)
    path = tmp_path / "lm.onnx"
    to_onnx(forward, [Weights(state, source), spec], output_path=path, external_data=True, target="onnxruntime", precision=p)
    # every matrix is read once, when it is quantized and written (small vectors are also read by
    # shape inference, which keeps tensors under 1 KiB attached)
    big = [n for n in reads if values[n].nbytes >= 4096]
    assert big and sorted(big) == sorted(set(big)), "a weight was read from its source twice"
    reads.clear()
    auto = dataclasses.replace(p, accuracy_level="auto")
    to_onnx(forward, [Weights(state, source), spec], output_path=tmp_path / "auto.onnx", external_data=True,
            target="onnxruntime", precision=auto)
    counts = collections.Counter(n for n in reads if values[n].nbytes >= 4096)
    # the check runs the int4 layers and what feeds them (the embedding): those weights are read again
    rerun = [n for n in counts if n.startswith(("embed", "block.attn", "block.fc1"))]
    assert len(rerun) == 6 and all(counts[n] > 1 for n in rerun), counts
    assert all(counts[n] == 1 for n in counts if n not in rerun), counts  # the int8 head, the float32 fc2
    model = onnx.load(path, load_external_data=False)
    ops = [n.op_type for n in model.graph.node]
    # q|k|v (a Concat of Reshapes of three streamed kernels), out, fc1: int4; head int8 (8-bit MatMulNBits); fc2 excluded
    bits = sorted({a.name: a.i for a in n.attribute}["bits"] for n in model.graph.node if n.op_type == "MatMulNBits")
    assert bits == [4, 4, 4, 8] and ops.count("MatMul") == 1
    inits = {t.name: t.data_type for t in model.graph.initializer}
    assert inits["block.fc2.kernel.value"] == onnx.TensorProto.FLOAT
    assert any(n.startswith("embed.embedding") and t == onnx.TensorProto.INT8 for n, t in inits.items())
    ids = np.random.default_rng(0).integers(0, 512, (2, 8)).astype(np.int32)
    (got,) = run_onnx(str(path), [ids])
    ref = np.asarray(real(ids))
    assert cosine(ref, got) >= MIN_COSINE["int4"]


def test_streamed_float16_converts_each_weight_when_written(tmp_path):
    abstract = nnx.eval_shape(lambda: MLP512(nnx.Rngs(0)))
    graphdef, state = nnx.split(abstract)
    real = MLP512(nnx.Rngs(0))
    values = named_values(real)

    def forward(params, x):
        return nnx.merge(graphdef, params)(x)

    path = tmp_path / "mlp.onnx"
    to_onnx(forward, [Weights(state, values), ("B", 512)], output_path=path, external_data=True, precision="float16")
    model = onnx.load(path, load_external_data=False)
    assert {t.data_type for t in model.graph.initializer if len(t.dims) == 2} == {onnx.TensorProto.FLOAT16}
    x = np.random.default_rng(0).standard_normal((4, 512)).astype(np.float32)
    (got,) = run_onnx(str(path), [x])
    assert cosine(np.asarray(real(x)), got) >= MIN_COSINE["float16"]


def test_model_traced_in_bfloat16_exports_as_is():
    """flax dtype=/param_dtype=bfloat16: exported without a float32 detour, and it loads."""
    class Net(nnx.Module):
        def __init__(self, rngs):
            self.l1 = nnx.Linear(64, 64, dtype=jnp.bfloat16, param_dtype=jnp.bfloat16, rngs=rngs)

        def __call__(self, x):
            return nnx.relu(self.l1(x))

    net = Net(nnx.Rngs(0))

    def fn(x):  # float32 in and out (numpy cannot feed onnxruntime bfloat16), bfloat16 inside
        return net(x.astype(jnp.bfloat16)).astype(jnp.float32)

    x = np.random.default_rng(0).standard_normal((2, 64)).astype(np.float32)
    for precision in ("float32", "bfloat16"):
        model = to_onnx(fn, [(2, 64)], target="onnxruntime", precision=precision)
        assert {t.data_type for t in model.graph.initializer if len(t.dims) == 2} == {onnx.TensorProto.BFLOAT16}
        (got,) = run_onnx(model, [x])  # loads: ops without a bfloat16 kernel run on a float32 carrier
        assert cosine(np.asarray(fn(x)), got) >= 0.999
