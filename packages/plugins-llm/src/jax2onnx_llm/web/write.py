"""A model file as transformers.js loads it: self-contained below the 2 GB a browser reads in one
piece, else its weights in external-data chunks of at most that size, named ``<file>_data``,
``<file>_data_1``, ... (the names transformers.js fetches; their count goes to ``config.json``).
onnx_ir's own sharded save names shards otherwise, so the chunks are written here, tensor by
tensor, in the graph's initializer order."""

from __future__ import annotations

import pathlib

import onnx_ir as ir

from ..errors import OptionError
from .limits import FILE_LIMIT

#: what the graph itself (nodes, names, small constants) is allowed beside the weights in one file
GRAPH_MARGIN = 64 * 2**20
#: initializers this small stay in the model file (shapes, scalars)
INLINE_BYTES = 1024


def chunk_name(filename: str, index: int) -> str:
    return f"{filename}_data" + (f"_{index}" if index else "")


def save(model: ir.Model, path: pathlib.Path, limit: int = FILE_LIMIT) -> int:
    """Write ``model`` at ``path``; returns the number of external-data chunks (0: one file).
    ``limit``: the most bytes a file may take (2 GB)."""
    weights = [v for v in model.graph.initializers.values() if v.const_value is not None]
    total = sum(v.const_value.nbytes for v in weights)
    if total + GRAPH_MARGIN <= limit:
        ir.save(model, path)
        return 0
    big = [v for v in weights if v.const_value.nbytes > INLINE_BYTES]
    oversized = next((v for v in big if v.const_value.nbytes > limit), None)
    if oversized is not None:
        raise OptionError(f"weight {oversized.name!r} takes {oversized.const_value.nbytes / 2**30:.2f} GiB, over the "
                          f"{limit / 2**30:.2f} GiB one browser file holds, and one tensor cannot be split; "
                          "use a smaller precision (int4) so that it fits")
    index, offset = 0, 0
    handle = open(path.parent / chunk_name(path.name, 0), "wb")
    try:
        for value in big:
            tensor = value.const_value
            data = tensor.tobytes()
            if offset and offset + len(data) > limit:
                handle.close()
                index, offset = index + 1, 0
                handle = open(path.parent / chunk_name(path.name, index), "wb")
            handle.write(data)
            value.const_value = ir.ExternalTensor(chunk_name(path.name, index), offset, len(data), tensor.dtype,
                                                  shape=tensor.shape, name=value.name, base_dir=path.parent)
            offset += len(data)
    finally:
        handle.close()
    ir.save(model, path)
    return index + 1
