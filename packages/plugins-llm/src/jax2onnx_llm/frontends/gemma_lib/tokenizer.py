"""The ``gemma`` library's tokenizer (``gm.text.Gemma2Tokenizer`` / ``Gemma3Tokenizer``: SentencePiece) as a
transformers fast tokenizer, so onnxruntime-genai encodes as the library does.

The library encodes with the ``sentencepiece`` library on its proto (BPE, byte fallback, spaces as
``▁``, no dummy prefix, no whitespace folding) and puts ``BOS`` first (``add_bos=True``, what its
sampler does). transformers' ``GemmaTokenizerFast`` converts such a proto with exactly those rules
and adds ``<bos>``; a proto with other normalization settings would be converted with Gemma's rules
anyway, so it is refused rather than written wrong. The proto written is the one the library loads
(its custom tokens applied).
"""

from __future__ import annotations

import pathlib
import sys
import tempfile
from typing import Any

from ...errors import TokenizerError
from ...tokenizers import REQUIRED


def tokenizer_class() -> type | None:
    module = sys.modules.get("gemma.gm.text._tokenizer")
    return getattr(module, "Tokenizer", None)


def claims_tokenizer(tokenizer: Any) -> bool:
    base = tokenizer_class()
    return base is not None and isinstance(tokenizer, base)


def from_gemma(tokenizer: Any) -> Any:
    """A library tokenizer as a ``GemmaTokenizerFast`` (what ``tokenizers.write`` saves)."""
    name = type(tokenizer).__name__
    try:
        import transformers
        from sentencepiece import sentencepiece_model_pb2
    except ImportError as exc:
        raise TokenizerError(f"writing the gemma library's {name} as {REQUIRED} needs transformers and "
                             "sentencepiece: pip install transformers sentencepiece, or pass tokenizer=False") from exc
    proto_bytes = tokenizer._sp.serialized_model_proto()  # the proto the library encodes with, custom tokens in
    proto = sentencepiece_model_pb2.ModelProto()
    proto.ParseFromString(proto_bytes)
    spec = proto.normalizer_spec
    unlike = [f"{field}={value!r}" for field, value, gemma in (
        ("add_dummy_prefix", spec.add_dummy_prefix, False),
        ("remove_extra_whitespaces", spec.remove_extra_whitespaces, False),
        ("normalization_rule_name", spec.name, "identity"),
        ("model_type", proto.trainer_spec.model_type, sentencepiece_model_pb2.TrainerSpec.BPE),
    ) if value != gemma]
    if unlike:
        raise TokenizerError(
            f"the gemma library's {name} has a SentencePiece model unlike Gemma's ({', '.join(unlike)}): its "
            f"{REQUIRED} would encode otherwise; pass tokenizer=<a folder with {REQUIRED}> written for it, or "
            "tokenizer=False")
    special = tokenizer.special_tokens
    with tempfile.TemporaryDirectory() as tmp:
        path = pathlib.Path(tmp) / "tokenizer.model"
        path.write_bytes(proto_bytes)
        fast = transformers.GemmaTokenizerFast(vocab_file=str(path), add_bos_token=True, add_eos_token=False)
        fast.vocab_file = None  # the proto is gone with the temporary folder: tokenizer.json holds it all
    for attribute, token_id in (("bos", special.BOS), ("eos", special.EOS), ("pad", special.PAD)):
        if fast.convert_tokens_to_ids(getattr(fast, f"{attribute}_token")) != int(token_id):
            raise TokenizerError(f"the gemma library's {name} has {attribute} id {int(token_id)}, but its SentencePiece "
                                 f"model's {attribute} piece is another id: pass tokenizer=False")
    return fast
