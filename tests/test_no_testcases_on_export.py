"""An export imports no testcase code: every pack keeps its testcases and their helpers in its
``testcases/`` subpackage, which only the pytest plugin and the coverage command load (through the
``jax2onnx_components`` hook).

A fresh interpreter exports an NNX model, a lax/jnp function, a Linen, an Equinox and a Keras
model (each through its pack's fused lowering, so every pack's lowering modules are loaded), then
lists the testcase modules in ``sys.modules``. Asking for the components afterwards must load them:
that shows the check looks for the right names.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

for _module in ("flax.nnx", "flax.linen", "equinox", "keras", "jax2onnx_nnx", "jax2onnx_linen", "jax2onnx_eqx",
                "jax2onnx_keras"):
    pytest.importorskip(_module)

CODE = r"""
import sys

import equinox as eqx
import flax.linen as nn
import jax
import jax.numpy as jnp
import keras
import numpy as np
from flax import nnx

from jax2onnx import to_onnx

PACKS = ("jax2onnx_lax", "jax2onnx_jnp", "jax2onnx_nnx", "jax2onnx_linen", "jax2onnx_eqx", "jax2onnx_keras",
         "jax2onnx_examples")
# The test-only modules by their names before the move too (cases/, _testing, _testdata, ...), so a
# module that comes back under its old name is caught as well.
OLD_NAMES = (".cases", "._testing", "._testdata", ".complex_cases", ".physics_cases")


def testcase_modules():
    return sorted(
        m for m in sys.modules
        if m.split(".")[0] in PACKS and (".testcases" in m or any(m.endswith(o) or o + "." in m for o in OLD_NAMES))
    )


def ops(model):
    return {n.op_type for n in model.graph.node}


class NnxModel(nnx.Module):
    def __init__(self, rngs):
        self.linear = nnx.Linear(4, 3, rngs=rngs)
        self.norm = nnx.LayerNorm(3, rngs=rngs)

    def __call__(self, x):
        return self.norm(self.linear(x))


exported = {
    "nnx": to_onnx(NnxModel(nnx.Rngs(0)), [("B", 4)]),
    "lax": to_onnx(lambda x: jax.lax.cumsum(jnp.sin(x), axis=1), [("B", 4)]),
}
dense = nn.Dense(3)
variables = dense.init(jax.random.PRNGKey(0), jnp.ones((1, 4)))
exported["linen"] = to_onnx(lambda x: dense.apply(variables, x), [("B", 4)])
layer = eqx.nn.Linear(4, 3, key=jax.random.PRNGKey(0))
exported["eqx"] = to_onnx(jax.vmap(layer), [("B", 4)])
kmodel = keras.Sequential([keras.layers.Dense(3), keras.layers.LayerNormalization()])
kmodel(np.zeros((1, 4), np.float32))
exported["keras"] = to_onnx(lambda x: kmodel(x, training=False), [("B", 4)])

# Each pack did the export (its fused ops are there), so its lowering modules were imported.
assert "LayerNormalization" in ops(exported["nnx"]), ops(exported["nnx"])
assert {"Sin", "CumSum"} <= ops(exported["lax"]), ops(exported["lax"])
for name in ("linen", "eqx", "keras"):
    assert ops(exported[name]) & {"Gemm", "MatMul"}, (name, ops(exported[name]))
assert "LayerNormalization" in ops(exported["keras"]), ops(exported["keras"])
for module in ("jax2onnx_lax.elementwise", "jax2onnx_nnx.linear", "jax2onnx_linen.linear", "jax2onnx_eqx.linear",
               "jax2onnx_keras.core"):
    assert module in sys.modules, module

loaded = testcase_modules()
assert not loaded, f"an export imported testcase modules: {loaded}"
assert "jax2onnx.testing" not in sys.modules, "an export imported the testcase framework (jax2onnx.testing)"

# The components hook is what loads them.
from jax2onnx.lower.registry import get_registry

names = {c.name for _, c in get_registry().components()}
assert {"nnx.linear", "lax.sin"} <= names, sorted(names)[:20]
loaded = testcase_modules()
for pack in PACKS:
    assert f"{pack}.testcases" in loaded, (pack, loaded)
print("ok")
"""


def test_an_export_imports_no_testcase_module():
    env = {**os.environ, "KERAS_BACKEND": "jax"}
    out = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, timeout=600, env=env)
    assert out.returncode == 0 and out.stdout.strip().endswith("ok"), out.stderr[-3000:]
