"""Calibrated int4 (issue #35): round-to-nearest, GPTQ and activation-aware clipping side by side.

1. An MLP (128 → 256 → 128, GELU) whose inputs are correlated (``x = z @ M + noise``, ``z`` of
   rank 16): held-out relative output error of the exported model in onnxruntime against JAX, per
   method and per amount of calibration data, with the export time and the model's bytes.
2. The tiny causal LM of packages/examples/tests/trained_lm.py (trained here in JAX on its counting
   language; nothing downloaded): perplexity on held-out sequences and its gap to float32, and
   greedy-token agreement with float32, per method.

Both int4 forms are measured (target="onnx": uint4 + blocked DequantizeLinear; "onnxruntime":
MatMulNBits). Writes bench/results/int4_calibration.md. Run: ``python bench/int4_calibration.py``.
"""

from __future__ import annotations

import os
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
import onnxruntime as ort
from jax2onnx import Precision, to_onnx

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "packages", "examples", "tests"))
import trained_lm as lm  # noqa: E402

METHODS = ("rtn", "gptq", "awq")
TARGETS = ("onnx", "onnxruntime")


def session(model):
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


def export(fn, spec, method: str, calibration, target: str):
    precision = Precision("int4", method=method, calibration=calibration if method != "rtn" else ())
    t = time.perf_counter()
    model = to_onnx(fn, spec, precision=precision, target=target)
    return model, time.perf_counter() - t


def mlp_rows() -> list[str]:
    rng = np.random.default_rng(0)
    D, H, R = 128, 256, 16
    mixing = rng.normal(size=(R, D)) / np.sqrt(R)

    def data(n: int) -> np.ndarray:
        return (rng.normal(size=(n, R)) @ mixing + 0.05 * rng.normal(size=(n, D))).astype(np.float32)

    w1 = (rng.normal(size=(D, H)) / np.sqrt(D)).astype(np.float32)
    w2 = (rng.normal(size=(H, D)) / np.sqrt(H)).astype(np.float32)

    def mlp(x):
        return jax.nn.gelu(x @ w1) @ w2

    held_out = data(2048)
    reference = np.asarray(mlp(held_out))
    spec = [jax.ShapeDtypeStruct(("B", D), jnp.float32)]
    rows = ["| target | method | calibration rows | held-out rel. error | vs RTN | export s | bytes |",
            "|---|---|---|---|---|---|---|"]
    for target in TARGETS:
        rtn_err = None
        for method in METHODS:
            for n in ((0,) if method == "rtn" else (64, 256, 1024, 4096)):
                calibration = [(data(256),) for _ in range(max(n // 256, 1))] if n >= 256 else [(data(n),)]
                model, seconds = export(mlp, spec, method, calibration, target)
                s = session(model)
                y = s.run(None, {s.get_inputs()[0].name: held_out})[0]
                err = float(np.linalg.norm(y - reference) / np.linalg.norm(reference))
                rtn_err = err if method == "rtn" else rtn_err
                rows.append(f"| {target} | {method} | {n} | {err:.4f} | {err / rtn_err:.2f}× | {seconds:.2f} | "
                            f"{model.ByteSize()} |")
                print(rows[-1], flush=True)
    return rows


def lm_rows() -> list[str]:
    t = time.perf_counter()
    model_f, loss = lm.train()
    print(f"trained the tiny LM in {time.perf_counter() - t:.1f}s, last loss {loss:.4f}", flush=True)
    rng = np.random.default_rng(1)
    calibration = [(lm._batch(rng, 1),) for _ in range(32)]  # 32 sequences of CONTEXT tokens
    held_out = lm._batch(np.random.default_rng(2), 64)

    def perplexity(logits_of) -> float:
        return lm.perplexity(logits_of, held_out)

    jitted = jax.jit(lambda ids: model_f(ids))

    def jax_logits(ids):
        return np.asarray(jitted(jnp.asarray(ids)))

    ppl_f = perplexity(jax_logits)
    reference = [lm.greedy(jax_logits, s, k) for s, k in lm.PROMPTS]
    rows = [f"float32 perplexity {ppl_f:.4f} on {len(held_out)} held-out sequences of {lm.CONTEXT} tokens; "
            f"calibration: {len(calibration)} sequences ({len(calibration) * lm.CONTEXT} tokens).", "",
            "| target | method | perplexity | gap to float32 | vs RTN gap | greedy agreement | export s | weights calibrated (of 9 int4 matmuls) |",
            "|---|---|---|---|---|---|---|---|"]
    for target in TARGETS:
        rtn_gap = None
        for method in METHODS:
            model, seconds = export(model_f, [lm.SPEC], method, calibration, target)
            s = session(model)
            name = s.get_inputs()[0].name

            def logits_of(ids, s=s, name=name):
                return s.run(None, {name: ids.astype(np.int32)})[0]

            ppl = perplexity(logits_of)
            gap = ppl - ppl_f
            rtn_gap = gap if method == "rtn" else rtn_gap
            agree = lm.greedy_agreement(logits_of, reference)
            detail = next(p.value for p in model.metadata_props if p.key.endswith("detail"))
            calibrated = detail.split("calibrated (")[0].rsplit("; ", 1)[-1].strip() if "calibrated (" in detail else "-"
            rows.append(f"| {target} | {method} | {ppl:.4f} | {gap:+.4f} | {gap / rtn_gap:.2f}× | {agree:.3f} | "
                        f"{seconds:.2f} | {calibrated} |")
            print(rows[-1], flush=True)
    return rows


def main() -> None:
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    mlp = mlp_rows()
    lms = lm_rows()
    text = "\n".join([
        "# Calibrated int4: round-to-nearest vs GPTQ vs activation-aware clipping",
        "",
        f"`python bench/int4_calibration.py`, {started}, CPU ({os.cpu_count()} cores, shared), "
        f"jax {jax.__version__}, onnxruntime {ort.__version__}. Block 32, asymmetric. Export time includes "
        "tracing, the onnxruntime calibration runs and the JAX compile of the method (a few seconds the first time).",
        "",
        "## MLP with correlated inputs (128 → 256 → 128)",
        "",
        *mlp,
        "",
        "## Tiny trained LM (packages/examples/tests/trained_lm.py)",
        "",
        *lms,
        "",
    ])
    path = os.path.join(HERE, "results", "int4_calibration.md")
    with open(path, "w") as f:
        f.write(text)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
