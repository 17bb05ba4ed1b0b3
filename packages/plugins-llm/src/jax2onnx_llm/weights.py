"""Streamed weights for ``export_causal_lm(..., weights=source)``: a decoder bigger than memory.

The spec's ``params`` then give only the structure (shapes and dtypes: a model built under
``nnx.eval_shape``, or ``jax.ShapeDtypeStruct`` leaves; real arrays work too and are not read), and
each weight's values come from ``source`` when ``model.onnx.data`` is written, one tensor at a time
(core's :class:`jax2onnx.Weights`). A weight is named by its pytree path joined with dots, as core
names ``Weights`` leaves (``blocks.0.q.kernel.value`` for the NNX Llama):
:func:`weight_names` lists them, :func:`save_safetensors` writes a model's own weights under them.

Sources: a ``.safetensors`` path, an Orbax checkpoint folder (``nnx.state(model)`` saved by
``ocp.StandardCheckpointer``, also from a sharded run: read array by array, core's ``OrbaxSource``),
a mapping ``name -> array`` or a callable ``name -> array`` (a checkpoint with other names or
layouts is read through a callable).
"""

from __future__ import annotations

import json
import os
import struct
from collections.abc import Iterable
from typing import Any

import jax
import numpy as np
from jax2onnx import Weights
from jax2onnx.frontend import as_source, leaf_name, source_problems

from .errors import WeightsError
from .frontends import decoder_spec
from .spec import DecoderSpec


def abstract_params(spec: DecoderSpec) -> Any:
    """The spec's parameter tree with ``ShapeDtypeStruct`` leaves (nothing is read or allocated)."""
    if spec.params is None:
        raise WeightsError(
            f"this {spec.family} model keeps its weights inside its layers (DecoderSpec.params is None), so they "
            "cannot come from weights=; export it without weights=, or wrap its step in a DecoderSpec whose params "
            "are the weights"
        )
    return jax.tree_util.tree_map(lambda x: jax.ShapeDtypeStruct(tuple(x.shape), x.dtype), spec.params)


def check_has_values(spec: DecoderSpec) -> None:
    """A model built without arrays (``nnx.eval_shape``, transformers' ``_do_init=False``) exports
    only with ``weights=``: say so before the trace fails on an abstract value."""
    leaves = jax.tree_util.tree_leaves(spec.params) if spec.params is not None else []
    if any(isinstance(leaf, jax.ShapeDtypeStruct) for leaf in leaves):
        raise WeightsError(
            f"this {spec.family} model has shapes but no weight values (built under eval_shape or with "
            "_do_init=False); pass weights=<.safetensors file, Orbax checkpoint folder, mapping or callable name -> array>"
        )


def weight_names(model: Any) -> dict[str, jax.ShapeDtypeStruct]:
    """``name -> shape/dtype`` of every weight of ``model`` (anything ``export_causal_lm`` takes), in
    the names ``weights=`` sources are asked for."""
    flat, _ = jax.tree_util.tree_flatten_with_path(abstract_params(decoder_spec(model)))
    return {leaf_name(path): leaf for path, leaf in flat}


def streamed_input(spec: DecoderSpec, source: Any) -> Weights:
    """The ``Weights`` input spec of the export, checked up front against a source that lists its
    tensors (a safetensors file, an Orbax checkpoint: every name there, every shape and dtype as
    the model's), so a wrong source fails before the trace rather than minutes later while writing."""
    try:
        resolved = as_source(source)
    except Exception as exc:  # core's InputSpecError: say which option it was
        raise WeightsError(f"weights={source!r}: {exc}") from exc
    _check_catalog(resolved, source, weight_names(spec))
    return Weights(abstract_params(spec), resolved)


def _check_catalog(resolved: Any, given: Any, wanted: dict[str, jax.ShapeDtypeStruct]) -> None:
    missing, wrong = source_problems(resolved, wanted)
    where = f"weights={os.fspath(given)!r}" if isinstance(given, (str, os.PathLike)) else f"weights ({resolved.describe()})"
    if missing:
        raise WeightsError(
            f"{where} lacks {len(missing)} of the model's {len(wanted)} weights (first: "
            f"{missing[0]!r}); write them under jax2onnx_llm.weights.weight_names(spec)'s names "
            "(save_safetensors does; Orbax does for nnx.state(model)), or pass a callable name -> array that maps the names"
        )
    if wrong:
        name, found, want = wrong[0]
        raise WeightsError(
            f"{where}: {name!r} is {np.dtype(found.dtype).name}{list(found.shape)} there but the model's is "
            f"{np.dtype(want.dtype).name}{list(want.shape)}"
            + (f" ({len(wrong)} weights differ: {', '.join(n for n, _, _ in wrong[:8])})" if len(wrong) > 1 else "")
            + "; write the model's shapes and dtypes"
        )


_CODES = {np.dtype(np.float32): "F32", np.dtype(np.float16): "F16", np.dtype(np.float64): "F64",
          np.dtype(np.int32): "I32", np.dtype(np.int64): "I64", np.dtype(np.int8): "I8", np.dtype(np.uint8): "U8"}


def write_safetensors(path: str | os.PathLike[str], tensors: Iterable[tuple[str, tuple[int, ...], Any, Any]]) -> None:
    """Write a ``.safetensors`` file one tensor at a time: ``tensors`` yields ``(name, shape, dtype,
    make)`` and ``make()`` is called only when that tensor's bytes are written, so a file larger
    than memory can be produced (the header is computed from shapes first)."""
    items = list(tensors)
    header: dict[str, Any] = {}
    offset = 0
    for name, shape, dtype, _ in items:
        dt = np.dtype(dtype)
        if dt.name == "bfloat16":
            code = "BF16"
        elif dt in _CODES:
            code = _CODES[dt]
        else:
            raise WeightsError(f"weight {name!r}: dtype {dt} has no safetensors code here")
        size = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
        header[name] = {"dtype": code, "shape": list(shape), "data_offsets": [offset, offset + size]}
        offset += size
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)  # the format aligns the data to 8 bytes
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw)))
        f.write(raw)
        for name, shape, dtype, make in items:
            array = np.ascontiguousarray(np.asarray(make(), dtype=dtype))
            if array.shape != tuple(shape):
                raise WeightsError(f"weight {name!r}: made {array.shape}, declared {tuple(shape)}")
            f.write(array.tobytes())


def save_safetensors(model: Any, path: str | os.PathLike[str]) -> None:
    """Write ``model``'s own (in-memory) weights under the names ``weights=`` reads."""
    spec = decoder_spec(model)
    abstract_params(spec)  # the clear error for a model without a params tree
    flat, _ = jax.tree_util.tree_flatten_with_path(spec.params)
    write_safetensors(path, [(leaf_name(p), tuple(x.shape), np.dtype(x.dtype), (lambda x=x: np.asarray(x)))
                             for p, x in flat])
