"""The precision section of the export report: what the model stores, how far its outputs are
from the float32 JAX function, and for an LM how many greedy tokens stay the same
(:mod:`jax2onnx.verification.greedy`).

``jax2onnx.verify`` reads the precision an export recorded in its metadata (``jax2onnx.precision``)
and, for a reduced precision, judges each output by its cosine similarity with the float32
reference (:data:`MIN_COSINE`) instead of float32's element tolerances, which a float16 or int4
model cannot meet by design. Element errors are still measured and shown (max and mean absolute
error, and the elements outside :data:`TOLERANCES`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import onnx

from ..precision import META_ACTIVATIONS, META_DETAIL, META_KIND

#: The cosine floor per precision: a reduced-precision output below it fails verification.
#: Measured on random MLPs, CNNs and transformer blocks (packages/plugins-nnx/tests/test_precision.py and
#: test_precision_bodies.py); int4 is block-32 round-to-nearest (numpy RTN of the same random weights gives
#: about 0.978). int8 (weight-only) measured 0.99986 at worst (one weight applied three times in a loop;
#: 0.99996 on a transformer block); ``"int8 dynamic"`` (``activations="dynamic"``, per-tensor) 0.9914 at
#: worst (a 30-wide MLP; 0.9978 on a transformer block).
#: ``"qdq <activations>"`` (target="qdq"): the tiny MLP and CNN of packages/plugins-nnx/tests/test_target_qdq.py
#: measured 0.99995 at worst with 8-bit weights, 0.994 with int4 weights, and 0.983 with uint8 activations and int8
#: weights where onnxruntime's fused u8s8 CPU kernel saturates (AVX2 without VNNI; 0.99992 with its graph
#: optimizations off): bench/results/qdq_accuracy.md.
MIN_COSINE = {"float16": 0.9999, "bfloat16": 0.999, "int8": 0.9998, "int8 dynamic": 0.99, "int4": 0.97,
              "qdq uint16": 0.98, "qdq uint8": 0.97}
#: (rtol, atol) the element mismatch count uses for a reduced precision: shown, not judged.
TOLERANCES = {"float16": (1e-2, 1e-2), "bfloat16": (5e-2, 5e-2), "int8": (5e-2, 5e-2), "int8 dynamic": (5e-2, 5e-2),
              "int4": (0.2, 0.2), "qdq uint16": (0.1, 0.1), "qdq uint8": (0.2, 0.2)}


def recorded_precision(model: onnx.ModelProto) -> tuple[str, str] | None:
    """(kind, detail) an export recorded in ``model``'s metadata; None for float32 and older files."""
    props = {p.key: p.value for p in model.metadata_props}
    kind = props.get(META_KIND)
    if kind is None or kind == "float32":
        return None
    return kind, props.get(META_DETAIL, kind)


def judged_as(model: onnx.ModelProto, kind: str) -> str:
    """The key of :data:`MIN_COSINE` and :data:`TOLERANCES` an export of ``kind`` is judged by:
    ``"int8 dynamic"`` for int8 whose matmuls quantize their activations at run time, ``"qdq
    uint8"`` for the QDQ form with uint8 activations."""
    props = {p.key: p.value for p in model.metadata_props}
    keyed = f"{kind} {props.get(META_ACTIVATIONS)}"  # "int8 dynamic", "qdq uint16": a floor of their own
    return keyed if keyed in MIN_COSINE else kind


def cosine(expected: np.ndarray, got: np.ndarray) -> float:
    """Cosine similarity of the flattened outputs (1.0 when both are zero)."""
    e = np.asarray(expected, dtype=np.float64).ravel()
    g = np.asarray(got, dtype=np.float64).ravel()
    ne, ng = float(np.linalg.norm(e)), float(np.linalg.norm(g))
    if ne == 0.0 and ng == 0.0:
        return 1.0
    if ne == 0.0 or ng == 0.0 or not (np.isfinite(ne) and np.isfinite(ng)):
        return 0.0
    return float(np.dot(e, g) / (ne * ng))


@dataclasses.dataclass
class PrecisionOutput:
    """One output's distance from the float32 reference, worst over the trials."""

    name: str
    max_abs_error: float
    mean_abs_error: float
    cosine: float
    min_cosine: float

    @property
    def ok(self) -> bool:
        return self.cosine >= self.min_cosine


@dataclasses.dataclass
class PrecisionSection:
    kind: str
    detail: str
    bytes_by_dtype: dict[str, int]
    outputs: list[PrecisionOutput]
    #: an LM's greedy tokens vs float32's (``verify(..., greedy=...)``), judged by its floor
    greedy: Any = None  # jax2onnx.verification.greedy.GreedyAgreement

    @property
    def ok(self) -> bool:
        return all(o.ok for o in self.outputs) and (self.greedy is None or self.greedy.ok)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "detail": self.detail, "bytes_by_dtype": dict(self.bytes_by_dtype), "ok": self.ok,
                "outputs": [{**dataclasses.asdict(o), "ok": o.ok} for o in self.outputs],
                **({"greedy": {**dataclasses.asdict(self.greedy), "ok": self.greedy.ok}} if self.greedy is not None else {})}

    def rows(self, human_bytes: Any) -> list[list[str]]:
        """Rows of the report's model table; ``human_bytes`` formats a byte count."""
        rows = [["precision", self.detail],
                ["bytes by dtype", ", ".join(f"{k} {human_bytes(v)}" for k, v in self.bytes_by_dtype.items())]]
        for o in self.outputs:
            rows.append([f"vs float32: {o.name}", f"max abs err {o.max_abs_error:.3g}, mean abs err {o.mean_abs_error:.3g}, "
                         f"cosine {o.cosine:.6f} (floor {o.min_cosine:g}) {'ok' if o.ok else 'FAIL'}"])
        if self.greedy is not None:
            rows.append(self.greedy.row())
        return rows


def merge(outputs: dict[str, PrecisionOutput], name: str, expected: np.ndarray, got: np.ndarray, kind: str) -> None:
    """Fold one trial's output into the worst-so-far figures of ``name``."""
    e = np.asarray(expected, dtype=np.float64)
    g = np.asarray(got, dtype=np.float64)
    if e.shape != g.shape or e.size == 0:
        return
    diff = np.abs(e - g)
    cur = PrecisionOutput(name, float(diff.max()), float(diff.mean()), cosine(e, g), MIN_COSINE[kind])
    old = outputs.get(name)
    if old is None:
        outputs[name] = cur
        return
    outputs[name] = PrecisionOutput(name, max(old.max_abs_error, cur.max_abs_error), max(old.mean_abs_error, cur.mean_abs_error),
                                    min(old.cosine, cur.cosine), cur.min_cosine)


__all__ = ["MIN_COSINE", "PrecisionOutput", "PrecisionSection", "TOLERANCES", "cosine", "judged_as",
           "recorded_precision"]
