"""An export changes no library object: a fresh process snapshots the libraries' public attributes
and their classes' own attributes (``__call__``, ``call``, ...) before any export, from a second
thread while NNX, Linen, Equinox, Keras and jnp exports run (one of them failing, one interrupted
with KeyboardInterrupt), and after them, and compares identities.

Both parts hold: the packs' ModulePatch overrides are scoped to the exported instances
(``jax2onnx.lower.scoped``), and library functions are found in the trace, never replaced
(``jax2onnx.lower.library``: jit equations, traceback frames, graph rules; issue #33).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("flax.nnx")
pytest.importorskip("jax2onnx_nnx")

_SCRIPT = textwrap.dedent(
    r'''
    import importlib, json, os, sys, threading, time
    os.environ.setdefault("KERAS_BACKEND", "jax")
    import jax, jax.numpy as jnp, numpy as np
    from flax import linen as nn, nnx

    MODULES = ["jax.numpy", "jax.nn", "jax.lax", "jax.random", "flax.nnx", "flax.linen"]
    for optional in ("equinox", "equinox.nn", "keras", "keras.layers"):
        try:
            importlib.import_module(optional)
            MODULES.append(optional)
        except Exception:
            pass
    mods = [importlib.import_module(m) for m in MODULES]

    def snapshot():
        functions, classes = {}, {}
        for name, mod in zip(MODULES, mods):
            for attr in dir(mod):
                if attr.startswith("_"):
                    continue
                value = getattr(mod, attr, None)
                if isinstance(value, type):
                    for k, v in list(vars(value).items()):
                        classes[f"{name}.{attr}.{k}"] = id(v)
                else:
                    functions[f"{name}.{attr}"] = id(value)
        return functions, classes

    before = snapshot()
    import jax2onnx
    from jax2onnx.lower.registry import get_registry
    get_registry()  # the packs load (before issue #33 the function dispatchers went in here)

    class Net(nnx.Module):
        def __init__(self, rngs):
            self.l = nnx.Linear(4, 8, rngs=rngs)
            self.n = nnx.LayerNorm(8, rngs=rngs)
        def __call__(self, x):
            return jax.nn.relu(self.n(self.l(x)))

    class LNet(nn.Module):
        @nn.compact
        def __call__(self, x):
            return nn.LayerNorm()(nn.Dense(8)(x))

    class Fails(nnx.Module):
        def __init__(self, rngs, exc):
            self.l = nnx.Linear(4, 8, rngs=rngs)
            self.exc = exc
        def __call__(self, x):
            self.l(x)
            raise self.exc

    spec = [jax.ShapeDtypeStruct((2, 4), jnp.float32)]
    net = Net(nnx.Rngs(0))
    lnet = LNet()
    lvars = lnet.init(jax.random.PRNGKey(0), jnp.ones((2, 4)))
    jobs = [
        ("nnx", lambda: jax2onnx.to_onnx(net, spec)),
        ("linen", lambda: jax2onnx.to_onnx(lambda x: lnet.apply(lvars, x), spec)),
        ("jnp", lambda: jax2onnx.to_onnx(lambda x: jnp.clip(jax.nn.softmax(x), 0.1, 0.9), spec)),
    ]
    if "equinox" in MODULES:
        import equinox as eqx
        mlp = eqx.nn.MLP(4, 3, 8, 2, key=jax.random.PRNGKey(0))
        jobs.append(("eqx", lambda: jax2onnx.to_onnx(jax.vmap(mlp), spec)))
    if "keras" in MODULES:
        import keras
        kmodel = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8), keras.layers.LayerNormalization()])
        jobs.append(("keras", lambda: jax2onnx.to_onnx(kmodel, spec)))

    samples, differ = [0], {"functions": set(), "classes": set()}
    done = threading.Event()

    def watch():
        while not done.is_set():
            now = snapshot()
            for part, b, n in (("functions", before[0], now[0]), ("classes", before[1], now[1])):
                differ[part].update(k for k in b if n.get(k) != b[k])
            samples[0] += 1
            time.sleep(0.001)

    watcher = threading.Thread(target=watch)
    watcher.start()
    ops = {}
    for name, job in jobs:
        ops[name] = sorted({n.op_type for n in job().graph.node})
    outcomes = []
    for exc in (ValueError("the model fails"), KeyboardInterrupt()):
        failing = Fails(nnx.Rngs(0), exc)
        try:
            jax2onnx.to_onnx(failing, spec)
        except BaseException as raised:
            outcomes.append(type(raised).__name__ + ":" + type(failing.l).__name__)
    done.set()
    watcher.join()
    after = snapshot()
    for part, b, n in (("functions", before[0], after[0]), ("classes", before[1], after[1])):
        differ[part].update(k for k in b if n.get(k) != b[k])
    print(json.dumps({
        "samples": samples[0], "ops": ops, "outcomes": outcomes,
        "types": [type(net.l).__name__ , type(net).__name__],
        "functions": sorted(differ["functions"]), "classes": sorted(differ["classes"]),
    }))
    '''
)


@pytest.fixture(scope="module")
def observed():
    env = dict(os.environ, KERAS_BACKEND="jax")
    proc = subprocess.run([sys.executable, "-c", _SCRIPT], capture_output=True, text=True, env=env, timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_exports_ran_fused_and_failed_exports_raised(observed):
    assert observed["samples"] > 0
    assert "Gemm" in observed["ops"]["nnx"] and "LayerNormalization" in observed["ops"]["nnx"]
    assert "Gemm" in observed["ops"]["linen"] and "LayerNormalization" in observed["ops"]["linen"]
    assert "Softmax" in observed["ops"]["jnp"]
    if "eqx" in observed["ops"]:
        assert "Gemm" in observed["ops"]["eqx"]
    if "keras" in observed["ops"]:
        assert "Gemm" in observed["ops"]["keras"] and "LayerNormalization" in observed["ops"]["keras"]
    # the error and the interrupt reach the caller, and the instances have their own class back
    assert observed["outcomes"] == ["UserFunctionError:Linear", "KeyboardInterrupt:Linear"]
    assert observed["types"] == ["Linear", "Net"]


def test_no_library_class_attribute_changes_before_during_or_after_exports(observed):
    assert observed["classes"] == []


def test_no_library_function_changes_before_during_or_after_exports(observed):
    assert observed["functions"] == []
