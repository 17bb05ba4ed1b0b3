"""A KerasHub tokenizer as a transformers fast tokenizer that tokenizes as KerasHub does.

KerasHub's tokenizers run (under the JAX backend, outside ``tf.data``) on Python libraries, and what
those run is the truth this module writes down:

- **byte-pair** tokenizers (GPT-2, GPT-NeoX, OPT, Bloom, Falcon, Llama 3, Qwen, SmolLM, GPT-OSS...) run a
  Hugging Face ``tokenizers.Tokenizer`` they build themselves: its vocabulary, merges, special tokens,
  normalizer and pre-tokenizer are written as they are. (KerasHub's Hugging Face exporter writes Llama 3's
  regex as a regex and adds NFC for Qwen; the tokenizer KerasHub runs has the regex as a literal, so it
  runs BPE over the whole text, and no normalizer: that is what it encodes, so that is written.) Where
  KerasHub's exporter knows the class, its ``tokenizer_config.json`` (special tokens, template) is kept.
- **SentencePiece** tokenizers (Llama 2, Mistral, Mixtral, Phi-3) run the ``sentencepiece`` library on their
  proto: BPE over the whole text, spaces as ``▁``, the proto's dummy prefix. Written from the proto with
  transformers' converter for the vocabulary and merges and a normalizer / decoder read from the proto's
  own normalization settings. Gemma's go through KerasHub's exporter (onnxruntime-genai has its own Gemma
  path, tested equal).
"""

from __future__ import annotations

import os
import tempfile
import warnings
from typing import Any

from ...errors import TokenizerError
from ...tokenizers import REQUIRED


def from_keras_hub(tokenizer: Any) -> Any:
    """A KerasHub tokenizer as a transformers fast tokenizer (what ``tokenizers.write`` saves)."""
    name = type(tokenizer).__name__
    bases = {cls.__name__ for cls in type(tokenizer).__mro__}
    transformers = _transformers(name)
    if "SentencePieceTokenizer" in bases and not name.startswith("Gemma"):
        return _sentencepiece(tokenizer, transformers)
    fast = _through_keras_hub_exporter(tokenizer, transformers) if name in _exporter_classes() else None
    if "BytePairTokenizer" in bases:
        return _byte_pair(tokenizer, transformers, fast)
    if fast is None:
        raise TokenizerError(
            f"KerasHub {name} cannot be written as {REQUIRED}: it is neither a byte-pair nor a SentencePiece "
            f"tokenizer, and KerasHub's Hugging Face exporter does not know it; pass tokenizer=<a folder with "
            f"{REQUIRED}>, or tokenizer=False to export without one"
        )
    return fast


def _transformers(name: str) -> Any:
    try:
        import transformers
    except ImportError as exc:
        raise TokenizerError(
            f"writing KerasHub {name} as {REQUIRED} needs transformers (its fast tokenizer writes the file): "
            "pip install transformers, or pass tokenizer=<a folder with tokenizer.json>"
        ) from exc
    return transformers


def _exporter_classes() -> set[str]:
    try:
        from keras_hub.src.utils.transformers.export.hf_exporter import MODEL_TOKENIZER_CONFIGS
    except ImportError:  # an older KerasHub without the exporter
        return set()
    return set(MODEL_TOKENIZER_CONFIGS)


def _special_tokens(tokenizer: Any) -> dict[str, str]:
    """bos / eos / pad / unk as KerasHub names them (``start_token``, ``end_token``, ...)."""
    found = {}
    for hf, keras in (("bos_token", "start_token"), ("eos_token", "end_token"), ("pad_token", "pad_token"),
                      ("unk_token", "unk_token")):
        value = getattr(tokenizer, keras, None)
        if isinstance(value, str) and value:
            found[hf] = value
    return found


# --- byte-pair -------------------------------------------------------------------------------------------


def _byte_pair(tokenizer: Any, transformers: Any, fast: Any) -> Any:
    backend = _keras_hub_backend(tokenizer)
    if backend is None:
        if fast is not None:  # a TensorFlow-only tokenizer: what KerasHub's exporter writes is all there is
            return fast
        raise TokenizerError(
            f"KerasHub {type(tokenizer).__name__} runs only its TensorFlow path here (no Python tokenizer to "
            f"write down); build it with the default _allow_python_workflow=True, or pass tokenizer=<a folder "
            f"with {REQUIRED}>"
        )
    import tokenizers

    if fast is not None:  # the exporter's vocabulary and config; KerasHub's own splitting and normalizer
        fast.backend_tokenizer.normalizer = backend.normalizer
        fast.backend_tokenizer.pre_tokenizer = backend.pre_tokenizer
        fast.backend_tokenizer.decoder = backend.decoder
        return fast
    own = tokenizers.Tokenizer.from_str(backend.to_str())
    return transformers.PreTrainedTokenizerFast(tokenizer_object=own, clean_up_tokenization_spaces=False,
                                                **_special_tokens(tokenizer))


def _keras_hub_backend(tokenizer: Any) -> Any:
    """The ``tokenizers.Tokenizer`` KerasHub's Python path runs, or None where it runs TensorFlow only."""
    if not getattr(tokenizer, "_allow_python_workflow", True):
        return None
    init = getattr(tokenizer, "_maybe_initialized_tokenizers", None)
    if init is not None:
        init()
    return getattr(tokenizer, "_tokenizer", None)


def _through_keras_hub_exporter(tokenizer: Any, transformers: Any) -> Any:
    name = type(tokenizer).__name__
    with tempfile.TemporaryDirectory(prefix="jax2onnx-keras-tokenizer-") as tmp:
        tokenizer.export_to_transformers(tmp)
        _add_merges_header(os.path.join(tmp, "merges.txt"))
        if os.path.isfile(os.path.join(tmp, REQUIRED)):
            return transformers.PreTrainedTokenizerFast.from_pretrained(tmp)
        fast = getattr(transformers, _KERAS_HUB_FAST.get(name, ""), None)
        if fast is None:
            raise TokenizerError(
                f"KerasHub {name}: no transformers fast tokenizer reads its files here; pass tokenizer=<a folder "
                f"with {REQUIRED}>, or tokenizer=False"
            )
        return fast.from_pretrained(tmp)


# KerasHub tokenizer class -> the transformers fast tokenizer that reads what KerasHub's exporter writes
# (vocab.json + merges.txt for byte-level BPE, tokenizer.model for SentencePiece); a tokenizer.json the
# exporter writes itself (Llama 3) is read as it is.
_KERAS_HUB_FAST = {
    "GPT2Tokenizer": "GPT2TokenizerFast",
    "QwenTokenizer": "Qwen2TokenizerFast",
    "GemmaTokenizer": "GemmaTokenizerFast",
    "Gemma3Tokenizer": "GemmaTokenizerFast",
    "Gemma4Tokenizer": "GemmaTokenizerFast",
}


def _add_merges_header(path: str) -> None:
    """transformers' BPE readers skip the first line of ``merges.txt`` (GPT-2's ``#version`` header);
    KerasHub writes the merges without one, so its first merge would be lost and words tokenized
    differently. Put the header in where it is missing."""
    if not os.path.isfile(path):
        return
    with open(path, encoding="utf-8") as f:
        text = f.read()
    if not text.startswith("#version"):
        with open(path, "w", encoding="utf-8") as f:
            f.write("#version: 0.2\n" + text)


# --- SentencePiece ---------------------------------------------------------------------------------------


def _sentencepiece(tokenizer: Any, transformers: Any) -> Any:
    """A SentencePiece BPE proto as a Llama-style fast tokenizer that runs what ``sentencepiece`` runs."""
    name = type(tokenizer).__name__
    proto = tokenizer.proto
    if isinstance(proto, str):  # a path, as KerasHub also accepts
        with open(proto, "rb") as f:
            proto = f.read()
    try:
        from sentencepiece import sentencepiece_model_pb2
    except ImportError as exc:
        raise TokenizerError(f"writing KerasHub {name} as {REQUIRED} needs sentencepiece: pip install sentencepiece") from exc
    model = sentencepiece_model_pb2.ModelProto()
    model.ParseFromString(bytes(proto))
    if model.trainer_spec.model_type != model.trainer_spec.BPE:
        raise TokenizerError(
            f"KerasHub {name} holds a SentencePiece {model.trainer_spec.ModelType.Name(model.trainer_spec.model_type)} "
            f"model: only SentencePiece BPE (Llama, Mistral, Phi-3, Gemma) is written as {REQUIRED}; pass "
            f"tokenizer=<a folder with {REQUIRED}>, or tokenizer=False"
        )
    spec = model.normalizer_spec
    if spec.remove_extra_whitespaces or spec.precompiled_charsmap:
        warnings.warn(
            f"KerasHub {name}: its SentencePiece model normalizes text (remove_extra_whitespaces="
            f"{spec.remove_extra_whitespaces}, normalization rule {spec.name!r}); the written tokenizer.json does "
            "too, but onnxruntime-genai's tokenizer ignores normalizers, so texts that normalization changes "
            "(runs of spaces, compatibility characters) encode otherwise in onnxruntime-genai",
            UserWarning, stacklevel=4)
    with tempfile.TemporaryDirectory(prefix="jax2onnx-keras-tokenizer-") as tmp:
        path = os.path.join(tmp, "tokenizer.model")
        with open(path, "wb") as f:
            f.write(bytes(proto))
        fast = transformers.LlamaTokenizerFast(vocab_file=path, legacy=False, add_bos_token=True, add_eos_token=False,
                                               clean_up_tokenization_spaces=False, from_slow=True,
                                               **_special_tokens(tokenizer))
    import tokenizers

    space = "\u2581"
    prefix = [tokenizers.normalizers.Prepend(space)] if spec.add_dummy_prefix else []
    fast.backend_tokenizer.normalizer = tokenizers.normalizers.Sequence(
        [*prefix, tokenizers.normalizers.Replace(" ", space)])
    fast.backend_tokenizer.pre_tokenizer = None  # sentencepiece runs BPE over the whole text
    strip = [tokenizers.decoders.Strip(" ", 1, 0)] if spec.add_dummy_prefix else []
    fast.backend_tokenizer.decoder = tokenizers.decoders.Sequence(
        [tokenizers.decoders.Replace(space, " "), tokenizers.decoders.ByteFallback(), tokenizers.decoders.Fuse(), *strip])
    return fast
