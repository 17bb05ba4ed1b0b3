"""Smoke test of ONE installed wheel in a fresh venv holding only it and its declared dependencies
(``nox -s build`` runs this once per distribution): it imports, converts, and states what it needs.

    python tests/smoke_wheel.py jax2onnx-core
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import numpy as np


def _onnxruntime_present() -> bool:
    return importlib.util.find_spec("onnxruntime") is not None


def core() -> None:
    import onnx
    from jax2onnx import MissingDependencyError, allclose, to_onnx

    assert not _onnxruntime_present(), "jax2onnx-core must not pull onnxruntime (it is the [runtime] extra)"
    out = subprocess.run(["jax2onnx", "--version"], capture_output=True, text=True, check=True).stdout
    assert out.startswith("jax2onnx-core ") and "packs: none installed" in out, out
    model = to_onnx(lambda x: x, [("B", 3)])  # no primitive: core alone converts it
    onnx.checker.check_model(model, full_check=True)
    # Core alone names the pack to install (its catalog of the published packs), and `packs` says
    # the install lacks it, with exit status 1.
    import jax.numpy as jnp
    from jax2onnx import UnsupportedPrimitiveError

    try:
        to_onnx(lambda x: jnp.sin(x), [("B", 3)])
    except UnsupportedPrimitiveError as exc:
        assert "(pip install jax2onnx-lax)" in str(exc), exc
    else:
        raise AssertionError("core alone has no lowering for sin")
    packs = subprocess.run(["jax2onnx", "packs"], capture_output=True, text=True)
    assert packs.returncode == 1 and "problem: jax2onnx-lax is not installed" in packs.stdout, packs
    try:
        allclose(lambda x: x, model, [np.ones((2, 3), np.float32)])
    except MissingDependencyError as exc:
        assert "jax2onnx-core[runtime]" in str(exc), exc
    else:
        raise AssertionError("allclose without onnxruntime must say what to install")


def lax() -> None:
    import jax.numpy as jnp
    import onnx
    from jax2onnx import to_onnx

    assert not _onnxruntime_present(), "converting must not need onnxruntime"
    model = to_onnx(lambda x, y: jnp.tanh(x @ y).sum(axis=-1), [("B", 8), (8, 4)])
    onnx.checker.check_model(model, full_check=True)
    assert {"MatMul", "Tanh", "ReduceSum"} <= {n.op_type for n in model.graph.node}
    # The CLI from a user's file: converts; --verify says what to install instead of a traceback.
    import os
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, "user_model.py")
        with open(src, "w") as f:
            f.write("import jax.numpy as jnp\ndef fn(x):\n    return jnp.sin(x) * 2.0\n")
        out = os.path.join(d, "m.onnx")
        subprocess.run(["jax2onnx", "convert", f"{src}:fn", "-i", "B,3", "-o", out, "-q"], check=True)
        assert os.path.exists(out)
        r = subprocess.run(["jax2onnx", "convert", f"{src}:fn", "-i", "B,3", "-o", out, "-q", "--verify"],
                           capture_output=True, text=True)
        assert r.returncode == 4 and "jax2onnx-core[runtime]" in r.stderr and "Traceback" not in r.stderr, r


def jnp_pack() -> None:
    import jax.numpy as jnp
    from jax2onnx import to_onnx

    model = to_onnx(lambda a, b: jnp.einsum("bij,bjk->bik", a, b), [("B", 2, 3), ("B", 3, 4)])
    assert [n.op_type for n in model.graph.node] == ["Einsum"], [n.op_type for n in model.graph.node]


def nnx_pack() -> None:
    from flax import nnx
    from jax2onnx import to_onnx

    model = to_onnx(nnx.Linear(4, 2, rngs=nnx.Rngs(0)), [("B", 4)])
    assert [n.op_type for n in model.graph.node] == ["Gemm"], [n.op_type for n in model.graph.node]


def examples() -> None:
    import os
    import tempfile

    from jax2onnx_examples.quickstart import main

    assert _onnxruntime_present(), "the examples pack pulls jax2onnx-core[runtime]"
    with tempfile.TemporaryDirectory() as d:
        assert main(os.path.join(d, "quickstart.onnx")) == 0


def meta() -> None:
    """The `jax2onnx` meta package: 0.17's surface (lax, jnp, nnx packs) and 0.17's allclose."""
    import importlib.metadata

    from jax2onnx.lower.registry import get_registry

    packs = {p.name for p in get_registry().describe() if p.error is None}
    assert {"jax2onnx-lax", "jax2onnx-jnp", "jax2onnx-nnx"} <= packs, packs
    import jax2onnx

    for version in (importlib.metadata.version("jax2onnx"), jax2onnx.__version__):
        assert tuple(int(p) for p in version.split(".")[:2]) > (0, 17), f"{version} must sort above the published 0.17.1"
    packs = subprocess.run(["jax2onnx", "packs"], capture_output=True, text=True)
    assert packs.returncode == 0 and "problem:" not in packs.stdout, packs
    nnx_pack()


CHECKS = {
    "jax2onnx": meta,
    "jax2onnx-core": core,
    "jax2onnx-lax": lax,
    "jax2onnx-jnp": jnp_pack,
    "jax2onnx-nnx": nnx_pack,
    "jax2onnx-examples": examples,
}

def any_pack(name: str) -> None:
    """A pack without its own check: it loads, registers, and reports no error."""
    from jax2onnx.lower.registry import get_registry

    infos = {p.name: p for p in get_registry().describe()}
    assert name in infos, f"{name} is not discovered through the jax2onnx entry points: {sorted(infos)}"
    assert infos[name].error is None, infos[name].error


if __name__ == "__main__":
    name = sys.argv[1]
    CHECKS[name]() if name in CHECKS else any_pack(name)
    print(f"{name}: wheel smoke test passed")
