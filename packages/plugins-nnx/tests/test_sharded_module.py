"""An NNX module whose parameters are sharded over a mesh exports as it is (``to_onnx(model, ...)``):
its kernels stay on their devices until the weights file is written, and the model matches JAX.

Runs in a fresh interpreter with 8 simulated CPU devices (XLA reads ``XLA_FLAGS`` once)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

SCRIPT = r"""
import json, os
import jax, numpy as np, onnx
from flax import nnx
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
from jax2onnx import allclose, to_onnx
from jax2onnx.export.weights import is_lazy

mesh = Mesh(np.array(jax.devices()).reshape(2, 4), ("a", "b"))

class MLP(nnx.Module):
    def __init__(self, rngs):
        self.up = nnx.Linear(256, 512, rngs=rngs)
        self.down = nnx.Linear(512, 256, rngs=rngs)

    def __call__(self, x):
        return self.down(nnx.gelu(self.up(x)))

model = MLP(nnx.Rngs(0))
# kernels over both mesh axes, biases over the first: how a training run would lay them out
placed = jax.tree_util.tree_map(lambda x: jax.device_put(x, NamedSharding(mesh, P(*("a", "b")[:x.ndim]))), nnx.state(model))
nnx.update(model, placed)
path = os.path.join(os.environ["WORK"], "mlp.onnx")
exported = to_onnx(model, [("B", 256)], output_path=path, external_data=True, return_mode="ir")
onnx.checker.check_model(path, full_check=True)
x = np.random.default_rng(0).standard_normal((3, 256)).astype(np.float32)
ok, message = allclose(model, path, [x], rtol=1e-5, atol=1e-5)
print(json.dumps({"lazy": sorted(v.const_value.shape.dims for v in exported.graph.initializers.values() if is_lazy(v)),
                  "sharded": list(model.up.kernel.value.sharding.spec), "ok": bool(ok), "message": message}))
"""


def test_sharded_nnx_module_exports_with_its_kernels_left_on_the_devices(tmp_path):
    env = {**os.environ, "XLA_FLAGS": os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8",
           "JAX_PLATFORMS": "cpu", "WORK": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["sharded"] == ["a", "b"]
    assert got["lazy"] == [[256, 512], [512, 256]], got  # the two kernels; the 2 KiB biases are copied at once
    assert got["ok"], got["message"]
