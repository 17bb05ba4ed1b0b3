"""The decoder graph in optimum's conventions, which transformers.js feeds:

``(input_ids, attention_mask, position_ids, past_key_values.N.key/value) -> (logits, present.N.key/value)``
with int64 ids, mask and positions, and a growing cache (``past`` in, ``past + sequence`` out).

transformers.js passes a real padding mask and the positions it computes from it
(``cumsum(mask) - 1``), so the step here is the plain step, without the pad detection the
onnxruntime-genai graph needs (``export.flat_step``). JAX traces the ids as int32 (64-bit
integers are off by default); :class:`Int64IdsPass` makes the three graph inputs int64 with one
``Cast`` each, in the export's rewrite slot (so validation and the target's final check see it).
``q4f16``'s float16 compute after the int4 form is core's plan in the same slot
(``jax2onnx.rewrite.LowFloatPass``).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import onnx_ir as ir
from jax2onnx.targets.web.folder import Int64InputsPass

from ..spec import DecoderSpec, KVCache

#: the graph inputs transformers.js feeds as int64, in the step's argument order
ID_INPUTS = ("input_ids", "attention_mask", "position_ids")
BATCH, SEQUENCE, PAST = "batch_size", "sequence_length", "past_sequence_length"


def io_names(num_layers: int) -> tuple[list[str], list[str]]:
    inputs, outputs = list(ID_INPUTS), ["logits"]
    for i in range(num_layers):
        inputs += [f"past_key_values.{i}.key", f"past_key_values.{i}.value"]
        outputs += [f"present.{i}.key", f"present.{i}.value"]
    return inputs, outputs


def web_step(spec: DecoderSpec, max_length: int) -> Any:
    """``(input_ids, attention_mask, position_ids, *past) -> (logits, *present)``, past/present
    interleaved per layer as ``key, value``."""

    def run(input_ids: Any, attention_mask: Any, position_ids: Any, *past: Any) -> tuple[Any, ...]:
        mask = attention_mask.astype(jnp.int32)
        kv = KVCache(past[0::2], past[1::2], mask, "concat", max_length=max_length)
        logits, kv = spec.step(spec.params, input_ids, mask, position_ids.astype(jnp.int32), kv)
        present = [t for pair in zip(kv.keys, kv.values) for t in pair]
        return (logits.astype(spec.dtype), *present)

    return run


def web_input_specs(spec: DecoderSpec, max_length: int) -> list[Any]:
    """Symbolic batch, sequence and past lengths (``past + sequence <= max_length``): transformers.js
    starts the cache from the input metadata, its past length (an unknown dim) as 0."""
    batch, seq, past = jax.export.symbolic_shape(
        f"{BATCH}, {SEQUENCE}, {PAST}", constraints=(f"{PAST} + {SEQUENCE} <= {max_length}",))
    ids = jax.ShapeDtypeStruct((batch, seq), jnp.int32)
    mask = jax.ShapeDtypeStruct((batch, past + seq), jnp.int32)
    kv = jax.ShapeDtypeStruct((batch, spec.num_kv_heads, past, spec.head_size), spec.dtype)
    return [ids, mask, ids, *([kv] * (2 * spec.num_layers))]


def Int64IdsPass() -> ir.passes.InPlacePass:
    """The graph's ids, mask and positions (traced int32) as int64, each read through one ``Cast``
    (core's pass for transformers.js folders)."""
    return Int64InputsPass(ID_INPUTS)
