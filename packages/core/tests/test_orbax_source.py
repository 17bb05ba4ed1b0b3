"""An Orbax checkpoint folder as a Weights source: read array by array (the metadata up front, each
array when the weights file is written), also when the checkpoint was saved from parameters sharded
over a mesh this process does not have; a checkpoint that lacks a weight or holds one of another
shape or dtype is refused before anything is written."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import onnx
import pytest
from jax2onnx import InputSpecError, Weights, to_onnx
from jax2onnx.export.weights import OrbaxSource

ocp = pytest.importorskip("orbax.checkpoint", reason="orbax-checkpoint writes the checkpoints (jax2onnx-core[orbax])")
pytest.importorskip("jax2onnx_lax", reason="the MLP needs dot_general, sin and add lowerings")

# Saved by a process with 8 simulated devices: kernels sharded over a 2x4 mesh (several
# PartitionSpecs), biases replicated, one bfloat16 kernel; the values also go to an .npz.
SAVE_SHARDED = r"""
import os
import jax, ml_dtypes, numpy as np, orbax.checkpoint as ocp
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
assert len(jax.devices()) == 8
mesh = Mesh(np.array(jax.devices()).reshape(2, 4), ("a", "b"))
rng = np.random.default_rng(0)
sizes, specs = [16, 32, 64, 8], [P("a", "b"), P("b", None), P(None, "a")]
host = {"layers": [{"w": (rng.standard_normal((m, n)) / np.sqrt(m)).astype(ml_dtypes.bfloat16 if i == 1 else np.float32),
                    "b": rng.standard_normal(n).astype(np.float32)} for i, (m, n) in enumerate(zip(sizes, sizes[1:]))]}
placed = {"layers": [{"w": jax.device_put(l["w"], NamedSharding(mesh, s)), "b": jax.device_put(l["b"], NamedSharding(mesh, P()))}
                     for l, s in zip(host["layers"], specs)]}
checkpointer = ocp.StandardCheckpointer()
checkpointer.save(os.path.join(os.environ["WORK"], "ckpt"), placed)
checkpointer.wait_until_finished()
np.savez(os.path.join(os.environ["WORK"], "values.npz"),
         **{f"layers.{i}.{k}": np.asarray(v).view(np.uint16) if v.dtype.name == "bfloat16" else v
            for i, l in enumerate(host["layers"]) for k, v in l.items()})
print(json.dumps({"shards": [len({str(s.index) for s in l["w"].addressable_shards}) for l in placed["layers"]]}))
""".replace("import os\n", "import json, os\n", 1)


def mlp(params, x):
    for layer in params["layers"]:
        x = jnp.sin((x.astype(layer["w"].dtype) @ layer["w"]).astype(jnp.float32) + layer["b"])
    return x


@pytest.fixture(scope="module")
def sharded_checkpoint(tmp_path_factory):
    work = tmp_path_factory.mktemp("orbax")
    env = {**os.environ, "XLA_FLAGS": os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8", "JAX_PLATFORMS": "cpu",
           "WORK": str(work)}
    done = subprocess.run([sys.executable, "-c", SAVE_SHARDED], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    assert json.loads(done.stdout.strip().splitlines()[-1])["shards"] == [8, 4, 2]
    import ml_dtypes

    raw = np.load(work / "values.npz")
    values = {k: raw[k].view(ml_dtypes.bfloat16) if k == "layers.1.w" else raw[k] for k in raw.files}
    return work / "ckpt", values


def _params(values):
    return {"layers": [{"w": values[f"layers.{i}.w"], "b": values[f"layers.{i}.b"]} for i in range(3)]}


def _abstract(values):
    return jax.tree_util.tree_map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype), _params(values))


def test_checkpoint_saved_sharded_exports_array_by_array(sharded_checkpoint, tmp_path):
    ckpt, values = sharded_checkpoint
    source = OrbaxSource(ckpt)
    assert source.catalog() == {k: jax.ShapeDtypeStruct(v.shape, v.dtype) for k, v in values.items()}
    reads: list[str] = []
    load = source.load
    source.load = lambda name: reads.append(name) or load(name)  # count the reads of this export
    out = tmp_path / "m.onnx"
    to_onnx(mlp, [Weights(_abstract(values), source), ("B", 16)], output_path=str(out), external_data=True)
    # every array read when the model is written; each kernel (external data) exactly once (the
    # biases, under the 1 KB external-data threshold, are read again to go inline into the model)
    assert set(reads) == set(values), reads
    assert all(reads.count(f"layers.{i}.w") == 1 for i in range(3)), reads
    onnx.checker.check_model(str(out), full_check=True)
    model = onnx.load(str(out))  # the external data loaded: each weight is the saved array, bit for bit
    written = {t.name: onnx.numpy_helper.to_array(t) for t in model.graph.initializer}
    for name in ("layers.0.w", "layers.2.w", "layers.1.b"):
        np.testing.assert_array_equal(written[name], values[name])
    assert written["layers.1.w"].tobytes() == values["layers.1.w"].tobytes()  # bfloat16 (stored as its bits)
    import onnxruntime as ort

    x = np.random.default_rng(1).standard_normal((3, 16)).astype(np.float32)
    sess = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    got = sess.run(None, {sess.get_inputs()[0].name: x})[0]
    want = np.asarray(jax.jit(mlp)(_params(values), x))
    np.testing.assert_allclose(got, want, atol=2**-6)  # the bfloat16 layer rounds its product


def test_a_step_folder_is_read_and_a_manager_root_names_its_steps(tmp_path):
    values = {"w": np.arange(6, dtype=np.float32).reshape(2, 3)}
    manager = ocp.CheckpointManager(str(tmp_path / "run"))
    manager.save(7, args=ocp.args.StandardSave(values))
    manager.wait_until_finished()
    np.testing.assert_array_equal(OrbaxSource(tmp_path / "run" / "7").load("w"), values["w"])
    with pytest.raises(InputSpecError, match=r"CheckpointManager steps 7: pass one step's folder, e.g. '.*run/7'"):
        OrbaxSource(tmp_path / "run")
    with pytest.raises(InputSpecError, match="is not an Orbax checkpoint folder"):
        Weights({"w": jax.ShapeDtypeStruct((2, 3), np.float32)}, str(tmp_path))


def test_missing_and_mismatched_arrays_are_refused_before_writing(sharded_checkpoint, tmp_path):
    ckpt, values = sharded_checkpoint
    abstract = _abstract(values)
    abstract["layers"][0]["w"] = jax.ShapeDtypeStruct((16, 33), np.float32)  # another shape
    abstract["layers"][2]["b"] = jax.ShapeDtypeStruct((8,), np.float16)  # another dtype
    abstract["layers"].append({"w": jax.ShapeDtypeStruct((8, 8), np.float32), "b": jax.ShapeDtypeStruct((8,), np.float32)})
    out = tmp_path / "bad.onnx"
    with pytest.raises(InputSpecError) as info:
        to_onnx(lambda p, x: x, [Weights(abstract, str(ckpt)), ("B", 16)], output_path=str(out), external_data=True)
    message = str(info.value)
    assert "has no tensor 'layers.3.b'" in message and "2 of the 8 weights are missing: layers.3.b, layers.3.w" in message
    assert "'layers.0.w' is float32[16, 32] in the Orbax checkpoint" in message and "is float32[16, 33]" in message
    assert "'layers.2.b' is float32[8]" in message and "float16[8]" in message
    assert not out.exists() and not any(p.name.endswith(".data") for p in tmp_path.iterdir()), "nothing is written"
