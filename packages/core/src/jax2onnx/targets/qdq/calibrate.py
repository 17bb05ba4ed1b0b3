"""The activation ranges the QDQ scales come from: min and max of every tensor to quantize, over
every calibration batch, read from one run of the float32 graph per batch in onnxruntime's CPU
provider (:func:`jax2onnx.precision.calibration.cpu_session`).

Data: ``Precision("qdq", calibration=[...])``'s batches, checked against the graph's inputs as
int4's are (:func:`jax2onnx.precision.calibration.checked_feed`); without them the *probe set*
:func:`jax2onnx.precision.accuracy_levels.probe_batches` (16 batches, seed 0: float inputs standard
normal, integer inputs that index a table uniform over its rows). A probe set only stands in for
real data: scales fit to standard-normal inputs clip activations that real inputs push further.

Why min/max (not a percentile): the 16-bit activations NPUs run (the default) have 65536 levels,
so the full range costs little resolution, and a clipped outlier is an error a percentile cannot
bound; at uint8 min/max is onnxruntime's ``quantize_static`` default too, so the anchor the tests
compare against calibrates the same way.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
import onnx
import onnx_ir as ir

from ...precision.accuracy_levels import probe_batches
from ...precision.calibration import checked_feed, cpu_session


def calibration_batches(model: ir.Model, batches: Sequence[tuple[np.ndarray, ...]]) -> tuple[
        Sequence[tuple[np.ndarray, ...]], str]:
    """The batches the ranges come from and how the detail names them."""
    if batches:
        return batches, f"{len(batches)} calibration batch(es)"
    return probe_batches(model), "the probe set (16 standard-normal batches, seed 0)"


def tensor_ranges(model: ir.Model, names: Iterable[str], batches: Sequence[tuple[np.ndarray, ...]]) -> dict[
        str, tuple[float, float]]:
    """``{name: (min, max)}`` of each named float tensor over ``batches`` (a tensor never computed
    by a batch, or only non-finite, is missing)."""
    names = list(dict.fromkeys(names))
    inputs = {v.name for v in model.graph.inputs}
    wanted = [name for name in names if name not in inputs]  # inputs' ranges are read off the feed
    proto = ir.serde.serialize_model(model)
    outputs = {o.name for o in proto.graph.output}
    for name in wanted:
        if name not in outputs:  # the float graph with every tensor to quantize as an output
            proto.graph.output.append(onnx.helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, None))
    session = cpu_session(proto)
    ranges: dict[str, tuple[float, float]] = {}
    for i, batch in enumerate(batches):
        feed = checked_feed(model.graph.inputs, batch, i)
        fed = [(name, feed[name]) for name in names if name in inputs]
        for name, value in [*zip(wanted, session.run(wanted, feed), strict=True), *fed]:
            finite = np.asarray(value)[np.isfinite(value)]
            if finite.size == 0:
                continue
            low, high = float(finite.min()), float(finite.max())
            if name in ranges:
                low, high = min(low, ranges[name][0]), max(high, ranges[name][1])
            ranges[name] = (low, high)
    return ranges


__all__ = ["calibration_batches", "tensor_ranges"]
