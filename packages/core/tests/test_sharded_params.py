"""Parameters that live on devices (sharded over a mesh, replicated, bfloat16) export without being
gathered whole on the host: each is copied to the host when the weights file is written, one at a
time, and the model equals the one exported from the same values held as numpy arrays.

The cases run in a fresh interpreter with 8 simulated CPU devices (XLA reads ``XLA_FLAGS`` once,
before JAX's first use), so this test process keeps its own devices."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("jax2onnx_lax", reason="the MLP needs dot_general, tanh and add lowerings")


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict:
    """Both cases in one fresh interpreter (each fresh one importing jax costs seconds of CPU): the
    streamed export first (on Linux, where its peak RSS is read), so its measurement starts from a
    process that has exported nothing yet, then the sharded MLP. One JSON line per case. Run once
    per session (``built_once``): under pytest-xdist the two tests may land on different workers,
    and the first to ask runs the interpreter for both."""
    from jax2onnx.testing import built_once, xdist_session_folder

    def run(work) -> dict:
        script = (STREAMED_RSS if sys.platform == "linux" else "") + SHARDED_MLP
        env = {**os.environ, "XLA_FLAGS": os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8",
               "JAX_PLATFORMS": "cpu", "WORK": str(work)}
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=600)
        assert done.returncode == 0, done.stderr[-4000:]
        out: dict = {}
        for line in done.stdout.splitlines():
            if line.startswith("{"):
                out.update(json.loads(line))
        return out

    return built_once("sharded-params-runs", run, xdist_session_folder(tmp_path_factory))[1]


SHARDED_MLP = r"""
import json, os
import jax, jax.numpy as jnp, ml_dtypes, numpy as np, onnx, onnxruntime as ort
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
from jax2onnx import to_onnx
from jax2onnx.export.weights import is_lazy

work = os.path.join(os.environ["WORK"], "sharded")
os.makedirs(work)
assert len(jax.devices()) == 8
mesh = Mesh(np.array(jax.devices()).reshape(2, 4), ("a", "b"))
rng = np.random.default_rng(0)
d = 256  # 256 KiB float32, 128 KiB bfloat16 kernels: over jax2onnx.ir.builder.DEVICE_LAZY_BYTES (lazy)
kernel_specs = [P("a", "b"), P("b", None), P(None, "a"), P(), P(None, None), P(("a", "b"), None), None]
bias_specs = [P("a"), P(), P("b"), None, P(("a", "b")), P(), P("a")]
host, placed = [], []
for i, (ks, bs) in enumerate(zip(kernel_specs, bias_specs)):
    dtype = ml_dtypes.bfloat16 if i == 3 else np.float32  # one bfloat16 layer
    w = (rng.standard_normal((d, d)) / np.sqrt(d)).astype(dtype)
    b = rng.standard_normal(d).astype(np.float32)
    host.append((w, b))
    # None: committed to one device, not sharded (device_put without a sharding)
    placed.append(tuple(jax.device_put(a, jax.devices()[5] if s is None else NamedSharding(mesh, s))
                        for a, s in ((w, ks), (b, bs))))
kinds = sorted({len({str(s.index) for s in w.addressable_shards}) for w, _ in placed})  # distinct blocks

def mlp(params):
    def f(x):
        for w, b in params:
            x = jnp.tanh((x.astype(w.dtype) @ w).astype(jnp.float32) + b)
        return x
    return f

x = rng.standard_normal((4, d)).astype(np.float32)
out = {"kinds": kinds}
for name, params in (("sharded", placed), ("host", host)):
    path = os.path.join(work, name + ".onnx")
    model = to_onnx(mlp(params), [(4, d)], output_path=path, external_data=True, return_mode="ir")
    out[name + "_lazy"] = sum(is_lazy(v) for v in model.graph.initializers.values())
    onnx.checker.check_model(path, full_check=True)
    proto = onnx.load(path, load_external_data=False)
    out[name + "_external"] = sorted(t.name for t in proto.graph.initializer if t.data_location == onnx.TensorProto.EXTERNAL)
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    y = sess.run(None, {sess.get_inputs()[0].name: x})[0]
    out[name] = y.tolist()
    out[name + "_bytes"] = y.tobytes().hex()
ref = np.asarray(jax.jit(mlp([tuple(jnp.asarray(a) for a in p) for p in host]))(x))
out["jax_max_abs"] = float(np.max(np.abs(np.asarray(out["sharded"], np.float32) - ref)))
out["jax_scale"] = float(np.max(np.abs(ref)))
print(json.dumps({"sharded": out}))
"""


def test_sharded_and_replicated_parameters_export_like_host_arrays(runs):
    got = runs["sharded"]
    assert got["kinds"] == [1, 2, 4, 8], "the kernels are whole (replicated, one device) and in 2, 4 and 8 blocks"
    # the 6 kernels on several devices stayed there until written (the one on a single CPU device is
    # read in place, the small biases at once); all 7 went to the weights file
    assert (got["sharded_lazy"], got["host_lazy"]) == (6, 0)
    assert len(got["sharded_external"]) >= 7, got["sharded_external"]
    # the same graph over the same values: onnxruntime computes bit-identical outputs
    assert got["sharded_bytes"] == got["host_bytes"]
    # and JAX agrees to the bfloat16 layer's rounding (its product is rounded to bfloat16, 2**-8
    # relative, where onnxruntime may round a float32 accumulation of another order)
    assert got["jax_max_abs"] <= 2**-6 * max(1.0, got["jax_scale"]), got["jax_max_abs"]


STREAMED_RSS = r"""
import json, os
import jax, jax.numpy as jnp, numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
from jax2onnx import to_onnx

def status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    raise KeyError(key)

work = os.path.join(os.environ["WORK"], "streamed")
os.makedirs(work)
mesh = Mesh(np.array(jax.devices()).reshape(2, 4), ("a", "b"))
n_layers, d, h = 24, 2048, 2048  # 24 float32 kernels of 16 MiB: 384 MiB on the devices
shapes = [(d, h) if i % 2 == 0 else (h, d) for i in range(n_layers)]
specs = [P("a", "b"), P("b", "a"), P(None, ("a", "b")), P()]  # P(): replicated on all 8 devices

def fill(i, shape):
    # values in [-0.02, 0.02) from a hash of the position and the layer (every layer's differ), not
    # jax.random: threefry over the 768 MiB the devices hold (P() copies included) was 90% of the
    # test's CPU, and the values only need to be distinct, on the devices
    rows = jax.lax.broadcasted_iota(jnp.uint32, shape, 0)
    cols = jax.lax.broadcasted_iota(jnp.uint32, shape, 1)
    return ((rows * jnp.uint32(2654435761) + cols * jnp.uint32(40503) + i) % 4001).astype(jnp.float32) * 1e-5 - 0.02

params = []
for i, shape in enumerate(shapes):
    sharding = NamedSharding(mesh, specs[i % len(specs)])
    # made on the devices: no host copy exists before the export
    make = jax.jit(fill, static_argnums=1, out_shardings=sharding)
    params.append(make(jnp.uint32(i), shape))
jax.block_until_ready(params)
largest = max(int(p.nbytes) for p in params)
total = sum(int(p.nbytes) for p in params)  # counted once, though P() holds 8 copies

def f(x):
    for w in params:
        x = jnp.tanh(x @ w)
    return x

try:
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")  # resets VmHWM, the peak RSS, to the current RSS
except OSError as exc:  # a sandbox without it: the peak cannot be measured from here
    streamed = {"unmeasurable": str(exc)}
else:
    before = status("VmRSS")
    to_onnx(f, [(1, d)], output_path=os.path.join(work, "big.onnx"), external_data=True)
    peak = status("VmHWM")
    data = [n for n in os.listdir(work) if n.endswith(".data")]
    streamed = {"rise": peak - before, "largest": largest, "total": total,
                "data_bytes": sum(os.path.getsize(os.path.join(work, n)) for n in data)}
del params, f  # the devices' 768 MiB, before the sharded MLP runs in this interpreter
print(json.dumps({"streamed": streamed}))
"""


@pytest.mark.skipif(sys.platform != "linux", reason="resets the peak RSS through /proc/self/clear_refs (Linux)")
def test_streamed_writing_gathers_one_tensor_at_a_time(runs):
    got = runs["streamed"]
    if "unmeasurable" in got:
        pytest.skip(f"this kernel cannot reset the peak RSS (/proc/self/clear_refs: {got['unmeasurable']})")
    assert got["data_bytes"] >= got["total"], "every kernel is in the weights file"
    print(f"peak RSS rise {got['rise'] / 2**20:.0f} MiB, weights {got['total'] / 2**20:.0f} MiB")
    bound = 2 * got["largest"] + 256 * 2**20
    assert got["rise"] <= bound < got["total"], (
        f"peak RSS rose {got['rise'] / 2**20:.0f} MiB during the export of {got['total'] / 2**20:.0f} MiB of "
        f"sharded weights (bound: two tensors + 256 MiB = {bound / 2**20:.0f} MiB)")
