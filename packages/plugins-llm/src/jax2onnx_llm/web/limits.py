"""The browser's limits, checked before a folder is written.

- **4 GB of wasm memory** (wasm32's address space): onnxruntime-web holds the weights in it, so a model
  whose weights exceed it in a dtype is refused before the export, naming the dtypes that fit.
- **2 GB per file**: an ``ArrayBuffer`` and a protobuf message stop there. Weights go to external
  data once the file would pass it, split into chunks of at most ``FILE_LIMIT`` bytes named as
  transformers.js fetches them (``model.onnx_data``, ``model.onnx_data_1``, ...; ``write.py``); one
  tensor over the limit cannot be split and is refused.
- **Ops**: the ``web`` target's final check (its op list) runs in the export itself.
- **WebGPU's default binding size** (``maxStorageBufferBindingSize``, 128 MiB unless the page asks the
  adapter for more): the largest initializer and the largest activation (at batch 1, a prefill of
  ``max_length`` tokens) are reported against it; over it, WebGPU needs the page to request a larger
  limit (wasm does not care).
"""

from __future__ import annotations

import math
from typing import Any

import jax
import numpy as np
import onnx_ir as ir

from ..errors import OptionError
from ..spec import DecoderSpec
from .dtypes import DTYPES, WebDtype
from .graph import BATCH, PAST, SEQUENCE

FILE_LIMIT = 2**31 - 1
WASM_MEMORY = 4 * 2**30
WEBGPU_DEFAULT_BINDING = 128 * 2**20


def weight_count(spec: DecoderSpec) -> int:
    """The number of floating-point weights in the spec's parameters."""
    leaves = jax.tree_util.tree_leaves(spec.params)
    return sum(math.prod(np.shape(x)) for x in leaves if np.issubdtype(getattr(x, "dtype", np.int32), np.floating))


def estimated_bytes(weights: int, dtype: WebDtype) -> float:
    """The bytes ``weights`` float weights take in ``dtype`` (an int4 embedding table in the
    matmuls' blocks too: ``GatherBlockQuantized``)."""
    return weights * dtype.bytes_per_weight


def check_memory(spec: DecoderSpec, dtypes: list[WebDtype]) -> dict[str, float]:
    """Each dtype's estimated weight bytes; refuses one over wasm's 4 GB, naming those that fit."""
    count = weight_count(spec)
    sizes = {d.name: estimated_bytes(count, d) for d in dtypes}
    over = [name for name, size in sizes.items() if size > WASM_MEMORY]
    if over:
        fits = [d.name for d in sorted(DTYPES.values(), key=lambda d: -estimated_bytes(count, d))
                if estimated_bytes(count, d) <= WASM_MEMORY]
        name = over[0]
        fix = (f"use precision={fits[0]!r}" + (f" (or one of {fits[1:]})" if fits[1:] else "")) if fits else \
            "no dtype fits: the model is too large for a browser"
        raise OptionError(f"precision={name!r}: the weights take about {sizes[name] / 2**30:.2f} GiB, over the 4 GiB a "
                          f"browser's wasm memory holds; {fix}")
    return sizes


def binding_report(model: ir.Model, max_length: int) -> dict[str, Any]:
    """The largest initializer and activation against WebGPU's default binding size."""
    name, size = max(((v.name, v.const_value.nbytes) for v in model.graph.initializers.values()
                      if v.const_value is not None), key=lambda item: item[1], default=("", 0))
    symbols = {BATCH: 1, SEQUENCE: max_length, PAST: 0}
    act_name, act_shape, act_size = "", [], 0
    for node in model.graph:
        for value in node.outputs:
            if value.shape is None or value.dtype is None:
                continue
            shape = [_dim_size(d, symbols, max_length) for d in value.shape]
            nbytes = math.ceil(math.prod(shape) * value.dtype.itemsize)  # itemsize 0.5 for 4-bit types
            if nbytes > act_size:
                act_name, act_shape, act_size = value.name, shape, nbytes
    return {
        "largest_initializer": {"name": name, "bytes": size},
        "largest_activation": {"name": act_name, "shape": act_shape, "bytes": act_size,
                               "at": f"batch 1, a prefill of {max_length} tokens"},
        "webgpu_default_binding_bytes": WEBGPU_DEFAULT_BINDING,
        "over_webgpu_default_binding": [what for what, n in (("initializer", size), ("activation", act_size))
                                        if n > WEBGPU_DEFAULT_BINDING],
    }


def _dim_size(dim: Any, symbols: dict[str, int], max_length: int) -> int:
    """A dim's size at the report's point: an int, a named symbol, a sum of them; any other symbol
    (one shape inference made up) at its bound, ``max_length``."""
    if isinstance(dim, int):
        return dim
    text = str(dim)
    total = 0
    for term in text.replace(" ", "").split("+"):
        if term.isdigit():
            total += int(term)
        elif term in symbols:
            total += symbols[term]
        else:
            return max_length
    return total
