"""A folder's ``tokenizer.json`` rewritten so that onnxruntime-genai splits text as the library does.

onnxruntime-genai's ``Tokenizer`` (onnxruntime-extensions) does not run a ``tokenizer.json``'s pipeline
step by step: it reads a few facts from it (the model, a ``Split`` step's regex, whether the model is
SentencePiece-converted, a dummy prefix) and runs its own code. Two forms users' tokenizers take make it
split text otherwise than the library, and each has an equivalent form (the same tokens in Hugging Face
``tokenizers``) that it runs as written:

- **a ``Split`` on a literal string inside a ``Sequence``**. KerasHub's byte-pair tokenizers give their
  split pattern to ``tokenizers`` as a ``str``, which ``tokenizers`` takes as a literal, not a regex: KerasHub
  runs BPE over the whole text. onnxruntime-extensions reads only regex splits in a ``Sequence`` and
  otherwise splits with its built-in GPT-2 / Llama 3 pattern (``"a  b"`` -> ``a``, ``Ġ``, ``Ġb`` where
  KerasHub gives ``a``, ``ĠĠ``, ``b``). Written as the regex that matches exactly that literal.
- **SentencePiece BPE with no splitting** (no pre-tokenizer, or ``Metaspace(split=False)``: Llama 2, Mistral,
  Phi-3 and the native ``sentencepiece`` library all run BPE over the whole text). onnxruntime-extensions'
  Llama path splits with its built-in Llama pattern, which gives a run of spaces' last space to the next
  word. Written as a top-level ``Split`` whose regex matches the whole text (it runs a top-level regex as
  given), with ``Metaspace``'s space replacement and dummy prefix moved into the normalizer. Gemma is left
  as it is: onnxruntime-extensions runs BPE over the whole text for it whatever the file says.

``Metaspace(prepend_scheme="first")`` adds no prefix to text that already starts with a space, which
onnxruntime-genai cannot express (it prefixes always or never): written as a prefix always, so that only
text starting with a space encodes otherwise (in onnxruntime-genai, and in the written file).

What cannot be written either: onnxruntime-genai strips a dummy prefix's space when decoding only after a special
token, so ids that do not start with one (no BOS) decode with a leading space that the library strips.
"""

from __future__ import annotations

import copy
from typing import Any

SPM_SPACE = "\u2581"  # SentencePiece's visible space
#: a regex that matches any text as one piece, in both regex engines (Oniguruma in ``tokenizers``,
#: ``std::regex`` in onnxruntime-extensions, which runs regexes it does not know on UTF-8 bytes)
WHOLE_TEXT = r"[\s\S]+"
_REGEX_SPECIALS = set("\\^$.|?*+()[]{}")


def literal_regex(text: str) -> str:
    """The regex that matches exactly ``text``: its metacharacters escaped the one way both engines read."""
    return "".join("\\" + ch if ch in _REGEX_SPECIALS else ch for ch in text)


def for_genai(tokenizer_json: dict[str, Any], tokenizer_class: str = "") -> tuple[dict[str, Any], list[str]]:
    """``tokenizer_json`` in the form onnxruntime-genai splits as ``tokenizers`` does, and what was rewritten
    (one line each; empty when the file is already read right)."""
    out = copy.deepcopy(tokenizer_json)
    notes: list[str] = []
    pre = out.get("pre_tokenizer")
    if isinstance(pre, dict) and pre.get("type") == "Sequence":
        for step in pre.get("pretokenizers", []):
            pattern = step.get("pattern") if step.get("type") == "Split" else None
            if isinstance(pattern, dict) and "String" in pattern:
                step["pattern"] = {"Regex": literal_regex(pattern["String"])}
                notes.append("a Split on a literal string written as the regex matching that literal")
    if _sentencepiece_bpe_without_split(out) and not tokenizer_class.startswith("Gemma"):
        normalizers = _normalizers(out.get("normalizer"))
        if isinstance(pre, dict):  # Metaspace(split=False): its replacement and prefix go to the normalizer
            if pre.get("prepend_scheme", "always") != "never" and pre.get("add_prefix_space", True):
                normalizers.append({"type": "Prepend", "prepend": pre.get("replacement", SPM_SPACE)})
            normalizers.append({"type": "Replace", "pattern": {"String": " "}, "content": pre.get("replacement", SPM_SPACE)})
            out["normalizer"] = {"type": "Sequence", "normalizers": normalizers}
        out["pre_tokenizer"] = {"type": "Split", "pattern": {"Regex": WHOLE_TEXT}, "behavior": "Isolated", "invert": False}
        notes.append("SentencePiece BPE over the whole text written as a Split matching the whole text")
    return out, notes


def _normalizers(normalizer: Any) -> list[dict[str, Any]]:
    if normalizer is None:
        return []
    if normalizer.get("type") == "Sequence":
        return list(normalizer.get("normalizers", []))
    return [normalizer]


def _sentencepiece_bpe_without_split(tokenizer_json: dict[str, Any]) -> bool:
    """A SentencePiece-converted BPE (byte fallback or ``▁`` for spaces) whose pre-tokenizer splits nothing."""
    model = tokenizer_json.get("model") or {}
    if model.get("type") != "BPE":
        return False
    pre = tokenizer_json.get("pre_tokenizer")
    if pre is None:
        replaces = [n for n in _normalizers(tokenizer_json.get("normalizer")) if n.get("type") == "Replace"]
        return any(n.get("content") == SPM_SPACE and n.get("pattern", {}).get("String") == " " for n in replaces)
    return pre.get("type") == "Metaspace" and pre.get("split") is False and pre.get("replacement", SPM_SPACE) == SPM_SPACE
