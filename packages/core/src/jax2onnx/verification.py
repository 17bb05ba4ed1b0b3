"""Run the exported model in onnxruntime and JAX side by side."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import numpy as np
import onnx

from . import compat
from .errors import require_onnxruntime


@dataclasses.dataclass
class Comparison:
    """Largest absolute difference per output, and whether all are within tolerance."""

    ok: bool
    max_abs_diff: list[float]
    messages: list[str]

    def __bool__(self) -> bool:
        return self.ok

    def __str__(self) -> str:
        diffs = ", ".join(f"{d:.3g}" for d in self.max_abs_diff)
        status = "match" if self.ok else "MISMATCH"
        return f"{status} (max abs diff per output: {diffs})" + ("" if self.ok else ": " + "; ".join(self.messages))


def run_onnx(model: onnx.ModelProto | str | bytes, inputs: Sequence[Any], params: Mapping[str, Any] | None = None) -> list[np.ndarray]:
    ort = require_onnxruntime("running an exported model")
    data = model.SerializeToString() if isinstance(model, onnx.ModelProto) else model
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    sess = ort.InferenceSession(data, opts, providers=["CPUExecutionProvider"])
    feeds = {}
    graph_inputs = sess.get_inputs()
    values = list(inputs) + [np.asarray(v) for v in (params or {}).values()]
    if len(values) != len(graph_inputs):
        raise ValueError(f"model has {len(graph_inputs)} inputs, got {len(values)} values")
    for gi, v in zip(graph_inputs, values):
        feeds[gi.name] = as_onnx_value(v)
    return sess.run(None, feeds)


def as_onnx_value(value: Any) -> np.ndarray:
    """The array an exported graph takes for ``value``: complex numbers travel as (real, imag)
    pairs on a trailing axis of 2 (complex64 -> float32), the layout of ONNX's DFT."""
    arr = np.asarray(value)
    if arr.dtype.kind == "c":
        part = np.float32 if arr.dtype == np.complex64 else np.float64
        return np.stack([arr.real, arr.imag], axis=-1).astype(part)
    return arr


def allclose(
    fn: Callable[..., Any],
    model: onnx.ModelProto | str,
    inputs: Sequence[Any],
    input_params: Mapping[str, Any] | None = None,
    *,
    rtol: float = 1e-5,
    atol: float = 1e-5,
    enable_double_precision: bool | None = None,
) -> Comparison:
    """Run ``fn`` in JAX and ``model`` in onnxruntime on the same concrete ``inputs`` and compare.

    ``model`` may be a ModelProto or a path. Returns a :class:`Comparison` (truthy when all match).
    """
    if isinstance(model, str):
        model = onnx.load(model)
    arrays = [np.asarray(x) for x in inputs]
    double = enable_double_precision if enable_double_precision is not None else any(a.dtype == np.float64 for a in arrays)
    with compat.x64_enabled(double):
        expected = jax.tree_util.tree_leaves(fn(*arrays, **dict(input_params or {})))
        expected = [as_onnx_value(e) for e in expected]
    got = run_onnx(model, arrays, input_params)
    diffs: list[float] = []
    msgs: list[str] = []
    ok = len(got) == len(expected)
    if not ok:
        msgs.append(f"{len(got)} ONNX outputs vs {len(expected)} JAX outputs")
    for i, (e, g) in enumerate(zip(expected, got)):
        g = np.asarray(g)
        if e.shape != g.shape:
            ok = False
            msgs.append(f"output {i}: shape {g.shape} vs JAX {e.shape}")
            diffs.append(float("inf"))
            continue
        if e.dtype != g.dtype:
            ok = False
            msgs.append(f"output {i}: dtype {g.dtype} vs JAX {e.dtype}")
        if e.size == 0:
            diffs.append(0.0)
            continue
        if e.dtype == bool or g.dtype == bool:
            diff = float(np.max(e != g))
            good = diff == 0
        else:
            ef, gf = e.astype(np.float64), g.astype(np.float64)
            same_special = (np.isnan(ef) & np.isnan(gf)) | (ef == gf)
            d = np.where(same_special, 0.0, np.abs(ef - gf))
            diff = float(np.max(d))
            good = bool(np.all(same_special | (np.abs(ef - gf) <= atol + rtol * np.abs(ef))))
        diffs.append(diff)
        if not good:
            ok = False
            msgs.append(f"output {i}: max abs diff {diff:.3g} exceeds rtol={rtol}, atol={atol}")
    return Comparison(ok, diffs, msgs)
