"""KerasHub Moonshine (raw audio in) as the graphs of an onnxruntime-genai ``whisper`` folder
(:func:`jax2onnx_llm.multimodal.export_speech_to_text`'s genai target).

genai 0.18's own ``moonshine`` type is the streaming pipeline (chunks, carried convolution buffers,
batch 1), which KerasHub's clip-wide GroupNorm and full-clip attention cannot run in. Its ``whisper``
type (``WhisperState``) runs any encoder/decoder pair that keeps to what it checks and allocates
(``src/models/whisper.h`` / ``whisper.cpp``, ``kv_cache.cpp``'s ``CrossCache``):

- ``audio_features`` must be rank 3 with ``shape[2] == 3000`` (``ValidateWhisperAudioFeaturesShape``);
  ``shape[1]`` (the mel count for Whisper) is not checked. So the audio goes in as rows of 3000
  samples: the library's converter output padded to a multiple of 3000 samples
  (``MoonshineAudioConverter(..., padding="longest", pad_to_multiple_of=3000)``), reshaped
  ``(batch, samples / 3000, 3000)``; the encoder reshapes it back;
- genai allocates the encoder's ``encoder_hidden_states`` as ``(batch, 1500, encoder.hidden_size)`` and
  every cross cache as ``(batch, decoder.num_attention_heads, 1500, decoder.head_size)`` (3000 / 2
  frames), while the self caches take ``decoder.num_key_value_heads``. Moonshine's encoder makes
  about one frame per 384 samples, so up to 192 rows (36 s) fit; its output and the cross keys and
  values are zero-padded to 1500 frames;
- the decoder is given only ``input_ids`` and the caches (no mask), so the padding goes along in the
  cross caches: they hold one head more than the attention has (``num_attention_heads`` = heads + 1
  in ``genai_config.json``); that head's first channel of each layer's keys is 1.0 on a clip's frames
  and 0.0 on its padding's and on the frames added to reach 1500 (the library's encoder padding
  mask: the samples equal to the padding value, through the convolutions' length arithmetic). The
  decoder reads it from the first layer's keys, drops the extra head and masks the cross-attention.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ..errors import OptionError
from ..spec import BATCH

#: samples per row of ``audio_features`` (genai's Whisper frame count, which it checks)
ROW_SAMPLES = 3000
#: the encoder frames genai allocates (its Whisper's 3000 frames / 2)
CROSS_FRAMES = ROW_SAMPLES // 2
#: the rows of ``audio_features``: one symbol, at most :data:`MAX_ROWS`
ROWS = "audio_rows"


def encoder_frames(samples: int) -> int:
    """Moonshine's encoder frames for a clip of ``samples`` (its three convolutions: kernel 127 stride 64,
    7 stride 3, 3 stride 2)."""
    return ((((samples - 127) // 64 + 1) - 7) // 3 + 1 - 3) // 2 + 1


#: the most rows whose frames fit genai's 1500 (192: 576000 samples, 36 s at 16 kHz)
MAX_ROWS = max(r for r in range(1, CROSS_FRAMES) if encoder_frames(r * ROW_SAMPLES) <= CROSS_FRAMES)


def graphs(model: Any, parts: Any, facts: dict[str, Any], tokens: dict[str, Any]) -> tuple[Any, ...]:
    """(encoder, its input specs, decoder, the cross caches' (heads, frames), ``speech.json``) of the
    genai folder (``export_speech_to_text``'s genai target)."""
    heads, layers = facts["num_heads"], facts["num_layers"]
    return (encoder_fn(model, parts), encoder_inputs(), decoder_fn(model, parts, heads, layers),
            (heads + 1, CROSS_FRAMES), {"family": facts["family"], **description(facts), "tokens": tokens})


def encoder_inputs() -> list[Any]:
    batch, rows = jax.export.symbolic_shape(f"{BATCH}, {ROWS}", constraints=(f"{ROWS} <= {MAX_ROWS}",))
    return [jax.ShapeDtypeStruct((batch, rows, ROW_SAMPLES), jnp.float32)]


def encoder_fn(model: Any, parts: Any) -> Any:
    """``audio_features (batch, rows, 3000) -> (encoder_hidden_states (batch, 1500, hidden), *cross)``,
    ``cross`` each decoder layer's ``key, value`` ``(batch, heads + 1, 1500, head_size)`` whose last head
    carries the frame mask (keys) or zeros (values)."""
    encoder, cross = parts.encoder_fn(model), parts.cross_fn(model)

    def run(audio_features: Any) -> tuple[Any, ...]:
        audio = audio_features.reshape(audio_features.shape[0], -1)
        (states,) = encoder(audio)
        frames = states.shape[1]
        mask = parts.frames_mask(model, audio, frames).astype(states.dtype)

        def to_1500(x: Any, axis: int) -> Any:
            # zeros after the frames: 1500 of them appended, then the first 1500 kept (a pad of width
            # 1500 - frames is symbolic, and the converter lowers pads of constant width only)
            zeros = jnp.zeros((*x.shape[:axis], CROSS_FRAMES, *x.shape[axis + 1:]), x.dtype)
            return jax.lax.slice_in_dim(jnp.concatenate([x, zeros], axis=axis), 0, CROSS_FRAMES, axis=axis)

        out = [to_1500(states, 1)]
        for i, kv in enumerate(cross(states)):
            first_channel = (jnp.arange(kv.shape[3]) == 0).astype(kv.dtype) * (1.0 if i % 2 == 0 else 0.0)
            extra = mask[:, None, :, None] * first_channel  # keys: the mask in the extra head's first channel
            out.append(to_1500(jnp.concatenate([kv, extra], axis=1), 2))
        return tuple(out)

    return run


def decoder_fn(model: Any, parts: Any, heads: int, layers: int) -> Any:
    """``(input_ids, *past_self, *past_cross) -> (logits, *present_self)`` (genai Whisper's decoder): the
    front-end's step with the frame mask read from the cross keys' extra head."""
    step = parts.decoder_step_fn(model)

    def run(input_ids: Any, *caches: Any) -> tuple[Any, ...]:
        past_self, past_cross = caches[: 2 * layers], caches[2 * layers:]
        mask = past_cross[0][:, heads, :, 0] > 0.5
        return step(input_ids, mask, *past_self, *(c[:, :heads] for c in past_cross))

    return run


def description(facts: dict[str, Any]) -> dict[str, Any]:
    """``speech.json``'s input entries for a Moonshine folder (read by ``transcribe``)."""
    return {
        "input": "audio",
        "sampling_rate": facts["sampling_rate"],
        "row_samples": ROW_SAMPLES,
        "max_rows": MAX_ROWS,
        "inputs": {
            "audio_features": f"float32 [batch, rows <= {MAX_ROWS}, {ROW_SAMPLES}]: the library's 16 kHz audio (its "
                              f"converter's output with padding='longest', pad_to_multiple_of={ROW_SAMPLES}; padding "
                              f"0.0) reshaped to rows of {ROW_SAMPLES} samples",
            "prompt": "the decoder's start token",
        },
    }


def audio_features(described: dict[str, Any], audio: Any) -> np.ndarray:
    """``audio`` (the converter's ``(batch, samples)`` or ``(batch, samples, 1)``, samples a multiple of
    3000) as ``audio_features`` ``(batch, samples / 3000, 3000)``."""
    audio = np.asarray(audio, np.float32)
    if audio.ndim == 3 and audio.shape[2] == 1:
        audio = audio[..., 0]
    row, most = int(described["row_samples"]), int(described["max_rows"])
    if audio.ndim != 2 or audio.shape[1] % row or not 0 < audio.shape[1] <= most * row:
        raise OptionError(f"audio of shape {audio.shape}: give the library's 16 kHz audio as (batch, samples), samples a "
                          f"multiple of {row} up to {most * row} (MoonshineAudioConverter(..., padding='longest', "
                          f"pad_to_multiple_of={row}) pads a batch so)")
    return np.ascontiguousarray(audio.reshape(audio.shape[0], -1, row))
