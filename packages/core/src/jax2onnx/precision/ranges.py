"""Static quantization's calibration runner: min and max of named tensors over every calibration
batch, read from one run of the float32 graph per batch in onnxruntime's CPU provider
(:func:`.calibration.cpu_session`). A target's own precision form gets it from the precision stage
(``PrecisionForm.apply(model, precision, ranges)``): ``target="qdq"``'s scales come from it.

Data: the precision's ``calibration=`` batches, checked against the graph's inputs as int4's are
(:func:`.calibration.checked_feed`); without them the *probe set*
:func:`.accuracy_levels.probe_batches` (16 batches, seed 0: float inputs standard normal, integer
inputs that index a table uniform over its rows). A probe set only stands in for real data: scales
fit to standard-normal inputs clip activations that real inputs push further.

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

from .accuracy_levels import PROBE_BATCHES, probe_batches
from .calibration import checked_feed, cpu_session


def tensor_ranges(model: ir.Model, names: Iterable[str], batches: Sequence[tuple[np.ndarray, ...]]) -> tuple[
        dict[str, tuple[float, float]], str]:
    """``({name: (min, max)}, data)``: the range of each named float tensor of ``model`` over
    ``batches`` (the probe set when empty; a tensor only non-finite on every batch is missing),
    and how the detail names the data."""
    if batches:
        data = f"{len(batches)} calibration batch(es)"
    else:
        batches, data = probe_batches(model), f"the probe set ({PROBE_BATCHES} standard-normal batches, seed 0)"
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
        computed = session.run(wanted, feed) if wanted else []
        for name, value in [*zip(wanted, computed, strict=True), *fed]:
            finite = np.asarray(value)[np.isfinite(value)]
            if finite.size == 0:
                continue
            low, high = float(finite.min()), float(finite.max())
            if name in ranges:
                low, high = min(low, ranges[name][0]), max(high, ranges[name][1])
            ranges[name] = (low, high)
    return ranges, data


__all__ = ["tensor_ranges"]
