"""Complex numbers at the model's boundary: ``(real, imag)`` pairs on a trailing axis of 2.

onnxruntime has no complex tensors (feeding one fails with "Numpy_type 14 can't be converted"), so
every complex value of an exported graph is a real tensor with a trailing axis of 2 (complex64 ->
float32, complex128 -> float64; the layout of ONNX's DFT), its graph inputs and outputs included.
The export records which inputs and outputs those are, by position, in the model's metadata
(:data:`COMPLEX_PAIRS_KEY`) and in each one's ``doc_string``, so the report, the CLI and the
helpers that run a model can convert complex arrays to pairs and name the layout in their errors.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

#: model metadata: ``{"inputs": {"0": "complex64"}, "outputs": {"1": "complex128"}}`` (positions)
COMPLEX_PAIRS_KEY = "jax2onnx:complex_pairs"


def is_complex(dtype: Any) -> bool:
    if dtype is None:
        return False
    try:
        return np.dtype(dtype).kind == "c"
    except TypeError:  # a typed PRNG key's dtype (key<fry>), which older JAX gives numpy no dtype for
        return False


def part_dtype(dtype: Any) -> np.dtype:
    """The real dtype of a complex dtype's parts: float32 for complex64, float64 for complex128."""
    return np.dtype(np.float32 if np.dtype(dtype) == np.complex64 else np.float64)


def to_pairs(value: Any) -> np.ndarray:
    """A complex array as the ``[..., 2]`` real pairs an exported graph takes; others unchanged."""
    arr = np.asarray(value)
    if arr.dtype.kind == "c":
        return np.stack([arr.real, arr.imag], axis=-1).astype(part_dtype(arr.dtype))
    return arr


def from_pairs(pairs: Any, dtype: Any = None) -> np.ndarray:
    """``[..., 2]`` real pairs read back as a complex array (complex64 from float32 pairs, unless
    ``dtype`` says otherwise)."""
    arr = np.asarray(pairs)
    if arr.ndim == 0 or arr.shape[-1] != 2:
        raise ValueError(f"complex values travel as (real, imag) pairs on a trailing axis of 2; got shape {list(arr.shape)}")
    out = np.dtype(dtype) if dtype is not None else np.dtype(np.complex64 if arr.dtype == np.float32 else np.complex128)
    return (arr[..., 0] + 1j * arr[..., 1]).astype(out)


def describe(dtype: Any, shape: Sequence[Any]) -> str:
    """``complex64[3, 4] as (real, imag) pairs float32[3, 4, 2]``: what a marked value holds."""
    dims = [str(d) for d in shape]
    return (f"{np.dtype(dtype).name}[{', '.join(dims)}] as (real, imag) pairs "
            f"{part_dtype(dtype).name}[{', '.join([*dims, '2'])}]")


def record(model: Any, input_avals: Sequence[Any], output_avals: Sequence[Any]) -> None:
    """Mark the complex inputs and outputs of ``model`` (an ``onnx_ir.Model``) from the JAX avals
    they were built from: metadata by position, and a ``doc_string`` on each value."""
    marks: dict[str, dict[str, str]] = {"inputs": {}, "outputs": {}}
    graph = model.graph
    for kind, values, avals in (("inputs", graph.inputs, input_avals), ("outputs", graph.outputs, output_avals)):
        for i, (value, aval) in enumerate(zip(values, avals)):
            dtype = getattr(aval, "dtype", None)
            if is_complex(dtype):
                marks[kind][str(i)] = np.dtype(dtype).name
                value.doc_string = describe(dtype, getattr(aval, "shape", ())) + " on the trailing axis"
    if marks["inputs"] or marks["outputs"]:
        model.metadata_props[COMPLEX_PAIRS_KEY] = json.dumps(marks)


def read(metadata: Mapping[str, str]) -> tuple[dict[int, str], dict[int, str]]:
    """The complex inputs and outputs recorded in a model's metadata (``{position: dtype name}``
    each); empty for a model without complex values or not written by jax2onnx."""
    try:
        marks = json.loads(metadata.get(COMPLEX_PAIRS_KEY, "{}"))
        return ({int(k): str(v) for k, v in marks.get("inputs", {}).items()},
                {int(k): str(v) for k, v in marks.get("outputs", {}).items()})
    except (ValueError, TypeError, AttributeError):  # metadata written by someone else: not ours to read
        return {}, {}


__all__ = ["COMPLEX_PAIRS_KEY", "describe", "from_pairs", "is_complex", "part_dtype", "read", "record", "to_pairs"]
