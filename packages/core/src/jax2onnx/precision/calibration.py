"""Calibrated int4 (``Precision("int4", calibration=[...], method="gptq" | "awq")``): the
activations each weight matmul multiplies, gathered by running the float32 export on the
calibration batches, turned into the codes of :mod:`.gptq`.

How the activations are reached: the quantize stage works on the ONNX graph, not on the JAX
function, so a copy of the float32 model (serialized before any weight is rewritten) gets each
calibrated matmul's input as an extra graph output and runs in onnxruntime, one batch at a time;
``X^T X`` of each input (rows = every position of every batch) is accumulated in JAX. Memory: the
float32 model once in onnxruntime, one batch's activations, and one ``[K, K]`` float32 Hessian per
distinct matmul input (weights reading the same input, such as Q/K/V, share it), all held until the
weights are written. Each layer is calibrated on the float32 model's inputs to it (not on the
inputs of the already quantized layers before it, as the GPTQ paper does sequentially).

Reached: weight matmuls of the main graph. Matmuls inside function bodies and control-flow bodies,
and stacked weights a ``Scan``/``Loop`` slices per layer, have no graph value to expose per layer:
they stay round-to-nearest and the precision's detail lists them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import onnx_ir as ir

from .. import progress
from ..errors import RUNTIME_INSTALL_HINT
from .gptq import awq_clip_blocks, gptq_blocks
from .options import Precision, PrecisionError

Blocks = tuple[np.ndarray, np.ndarray, np.ndarray]


def _session(model: ir.Model, taps: Sequence[str]):
    try:
        import onnxruntime as ort
    except ImportError as exc:
        raise PrecisionError(f"calibration runs the float32 export in onnxruntime, which is not installed: "
                             f"{RUNTIME_INSTALL_HINT}") from exc
    import onnx

    proto = ir.serde.serialize_model(model)
    if proto.ByteSize() >= 2**31:  # protobuf's limit; onnxruntime takes the model from memory here
        raise PrecisionError(f"calibration runs the float32 model in onnxruntime from memory, and this one is "
                             f"{proto.ByteSize() / 2**30:.1f} GiB, over protobuf's 2 GiB; calibrate a smaller model, "
                             "or use plain int4 (method='rtn') for this one")
    present = {o.name for o in proto.graph.output}
    proto.graph.output.extend(onnx.ValueInfoProto(name=name) for name in taps if name not in present)
    options = ort.SessionOptions()
    options.log_severity_level = 3
    return ort.InferenceSession(proto.SerializeToString(), options, providers=["CPUExecutionProvider"])


def _feed(session, batch: tuple[np.ndarray, ...], i: int) -> dict[str, np.ndarray]:
    """``batch`` checked against the graph inputs (count, rank, every fixed axis) and cast to their
    dtypes; the first mismatch raises naming what the export expects."""
    inputs = session.get_inputs()
    if len(batch) != len(inputs):
        names = ", ".join(x.name for x in inputs)
        raise PrecisionError(f"calibration batch {i} has {len(batch)} array(s); the export has {len(inputs)} input(s) "
                             f"({names}): give one array per input, in order")
    feed = {}
    for j, (arr, spec) in enumerate(zip(batch, inputs, strict=True)):
        want = [d if isinstance(d, int) else None for d in spec.shape]
        shown = "[" + ", ".join(str(d) if d is not None else "?" for d in spec.shape) + "]"  # symbolic axes by name
        if arr.ndim != len(want):
            raise PrecisionError(f"calibration batch {i}, input {j} ({spec.name!r}) has shape {arr.shape}; the export's "
                                 f"input is {shown}: give arrays of rank {len(want)}")
        for axis, (got, need) in enumerate(zip(arr.shape, want, strict=True)):
            if need is not None and got != need:
                what = "width (last axis)" if axis == arr.ndim - 1 else f"axis {axis}"
                raise PrecisionError(f"calibration batch {i}, input {j} ({spec.name!r}) has shape {arr.shape}; the "
                                     f"export's input is {shown}: its {what} must be {need}, got {got}")
        dtype = {"tensor(float)": np.float32, "tensor(int64)": np.int64, "tensor(int32)": np.int32,
                 "tensor(bool)": np.bool_}.get(spec.type, arr.dtype)
        feed[spec.name] = arr.astype(dtype, copy=False)
    return feed


def input_hessians(model: ir.Model, taps: dict[str, int], batches: Sequence[tuple[np.ndarray, ...]]) -> dict[str, np.ndarray]:
    """``X^T X`` ``[K, K]`` of each value named in ``taps`` (name → K) over every row of every batch."""
    import jax.numpy as jnp

    session = _session(model, list(taps))
    names = list(taps)
    sums = {name: jnp.zeros((k, k), jnp.float32) for name, k in taps.items()}
    reporter = progress.current()
    reporter.steps("calibrating batches", len(batches))
    for i, batch in enumerate(batches):
        outs = session.run(names, _feed(session, batch, i))
        for name, x in zip(names, outs, strict=True):
            rows = jnp.asarray(x, jnp.float32).reshape(-1, taps[name])
            sums[name] = sums[name] + rows.T @ rows
        reporter.step()
    return {name: np.asarray(h) for name, h in sums.items()}


def calibrated_blocks(p: Precision, h: np.ndarray) -> Callable[[np.ndarray], Blocks]:
    """The codes/scales/zero points of a ``[K, N]`` weight under ``p``'s method, for inputs with ``h``."""
    method = p.int4_method()

    def choose(w: np.ndarray) -> Blocks:
        if method == "gptq":
            return gptq_blocks(w, h, p.block_size, p.symmetric)
        return awq_clip_blocks(w, h, p.block_size, p.symmetric)

    return choose


__all__ = ["calibrated_blocks", "input_hessians"]
