"""Run the published jax2onnx 0.17.1's own einsum / eigh / svd testcases with this converter.

    pip download jax2onnx==0.17.1 --no-deps -d /tmp/j017
    python bench/published_testcases.py /tmp/j017/jax2onnx-0.17.1-py3-none-any.whl

Reads the testcase lists (``testcases=[...]`` of plugins/jax/numpy/einsum.py, plugins/jax/lax/eigh.py
and svd.py) from the wheel without importing it (it is also named ``jax2onnx``), exports each
callable with ``to_onnx``, runs ``onnx.checker``'s full check and compares onnxruntime with JAX as
the published tests did (``allclose``, rtol/atol 1e-4; the vectors as they come, no sign fixing),
except where a testcase sets ``skip_numeric_validation``. Prints one line a testcase and exits 1
when any fails. Not a test: it needs the published wheel, which tests must not download.
"""

from __future__ import annotations

import ast
import sys
import zipfile

import jax
import jax.numpy as jnp
import numpy as np
import onnx
from jax2onnx import allclose, to_onnx

FILES = ["jax2onnx/plugins/jax/numpy/einsum.py", "jax2onnx/plugins/jax/lax/eigh.py", "jax2onnx/plugins/jax/lax/svd.py"]


def testcases(source: str, name: str) -> list[dict]:
    """The ``testcases=[...]`` keyword of the file's plugin registration, evaluated (its graph
    checks are the published plugin's structure, not ours: they become no-ops)."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.keyword) and node.arg == "testcases":
            scope = {"jax": jax, "jnp": jnp, "np": np, "EG": lambda *a, **k: None}
            return eval(compile(ast.Expression(node.value), name, "eval"), scope)  # noqa: S307 - the wheel's own literal
    raise SystemExit(f"{name}: no testcases found")


def run(case: dict) -> str:
    fn = case["callable"]
    if "input_values" in case:
        xs = [np.asarray(v) for v in case["input_values"]]
        specs = [jax.ShapeDtypeStruct(x.shape, x.dtype) for x in xs]
    else:
        specs = case["input_shapes"]
        dtypes = case.get("input_dtypes") or [np.float32] * len(specs)
        rng = np.random.default_rng(0)
        xs = [rng.standard_normal([3 if isinstance(d, str) else d for d in s]).astype(dt) for s, dt in zip(specs, dtypes)]
    model = to_onnx(fn, specs)
    onnx.checker.check_model(model, full_check=True)
    if case.get("skip_numeric_validation"):
        return "exported (the published testcase skips the numeric check)"
    ok, message = allclose(fn, model, xs, rtol=1e-4, atol=1e-4)
    if not ok:
        raise AssertionError(message)
    return message


def main(wheel: str) -> int:
    failed = 0
    with zipfile.ZipFile(wheel) as whl:
        for name in FILES:
            for case in testcases(whl.read(name).decode("utf-8"), name):
                try:
                    result = run(case)
                except Exception as exc:  # noqa: BLE001 - report every testcase, failing or not
                    failed += 1
                    result = f"FAILED: {type(exc).__name__}: {str(exc)[:300]}"
                print(f"{name.rsplit('/', 1)[-1]:10} {case['testcase']:50} {result}")
    print(f"{failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    sys.exit(main(sys.argv[1]))
