"""The front-end registry: which front-end turns a model into a :class:`~jax2onnx_llm.spec.DecoderSpec`.

A front-end is a :class:`Frontend`: its name, what models it takes (said in the error for a model
nobody claims), ``claims(model)`` and ``decoder_spec(model)``. The pack's own front-ends are the
folders beside this module, each registering itself as its package's ``frontend``; other
distributions register theirs in the entry-point group :data:`ENTRY_POINT_GROUP` (the same way packs
register with core). Nothing here knows a model library: the front-ends' ``claims`` decide, and
exactly one may claim a model (among those of the highest ``precedence`` that claim it).
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.metadata
import inspect
import pkgutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import LlmExportError, UnsupportedModelError
from ..spec import DecoderSpec

#: The entry-point group a distribution names its :class:`Frontend` objects in.
ENTRY_POINT_GROUP = "jax2onnx_llm.frontends"


@dataclasses.dataclass(frozen=True)
class Frontend:
    """One source of causal LMs (a model library, or a protocol a model follows).

    Attributes:
        name: the front-end's name (unique among the registered ones).
        takes: what models it takes, in words (the error for an unclaimed model lists it).
        claims: ``claims(model) -> bool``: whether the model is this front-end's (by its library's
            classes or protocol; it must not import a library the model cannot come from).
        decoder_spec: ``decoder_spec(model) -> DecoderSpec``; may refuse a claimed model with an
            :class:`~jax2onnx_llm.UnsupportedModelError` naming what it supports. A front-end whose
            models hold no weights (Linen modules) takes them as ``decoder_spec(model, params=...)``.
        lowerings: modules (dotted names) holding the front-end's attention / state lowerings and
            patches (``lowerings``, ``patches``), which the pack's plugin registers with core. A
            front-end from another distribution registers its own with core's ``jax2onnx`` group.
        claims_tokenizer, tokenizer: a tokenizer object of the library that the front-end writes:
            ``claims_tokenizer(tokenizer) -> bool`` and ``tokenizer(tokenizer) ->`` an object with
            ``save_pretrained(folder)`` writing ``tokenizer.json`` (what ``tokenizers.write`` saves).
        precedence: claims are asked from the highest; a model says itself what decoder it is
            (``__jax2onnx_decoder__``) before its library's class is asked.
        vision_language: ``vision_language(model) ->`` the parts of a vision-language model that
            :func:`jax2onnx_llm.multimodal.export_multimodal_lm` exports (a module or object with
            ``check``, ``vision_fn``, ``embedding_fn``, ``decoder_spec``, ``image_converter``,
            ``image_facts``, ``processor_config``), or None for a model that is none.
        speech_to_text: ``speech_to_text(model) ->`` the parts of an encoder-decoder speech model that
            :func:`jax2onnx_llm.multimodal.export_speech_to_text` exports (a module or object with
            ``check``, ``facts``, ``encoder_fn``, ``decoder_fn``, ``cross_fn`` (the decoder's cross-attention
            keys and values of the encoder's output), ``tokens`` (the start, end and prompt ids from the
            model's tokenizer) and the model-type constant of the browser folder it is written
            as; ``"moonshine"``, a raw-audio model, also adds ``frames_mask`` and ``decoder_step_fn`` for the
            genai folder: :mod:`jax2onnx_llm.multimodal.moonshine_genai`), or None for a model that is none.
    """

    name: str
    takes: str
    claims: Callable[[Any], bool]
    decoder_spec: Callable[[Any], DecoderSpec]
    lowerings: tuple[str, ...] = ()
    claims_tokenizer: Callable[[Any], bool] | None = None
    tokenizer: Callable[[Any], Any] | None = None
    precedence: int = 0
    vision_language: Callable[[Any], Any] | None = None
    speech_to_text: Callable[[Any], Any] | None = None


def builtin_frontends() -> list[Frontend]:
    """The pack's own front-ends: every folder beside this module, by name, each its ``frontend``."""
    found = []
    for info in sorted(pkgutil.iter_modules([str(Path(__file__).parent)]), key=lambda i: i.name):
        if info.ispkg:
            module = importlib.import_module(f"{__package__}.{info.name}")
            found.append(_checked(getattr(module, "frontend", None), f"{module.__name__}.frontend"))
    return found


def builtin_lowerings() -> list[str]:
    """The built-in front-ends' lowering modules, relative to the pack (``PackModules`` names)."""
    pack = __package__.rpartition(".")[0]
    return [name.removeprefix(f"{pack}.") for frontend in builtin_frontends() for name in frontend.lowerings]


def registered() -> list[Frontend]:
    """Every front-end: the pack's own, then those other distributions register (entry points, read
    on each call: an installed front-end is seen without restarting anything)."""
    frontends = builtin_frontends()
    for point in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        where = f"entry point {point.name!r} ({point.value}) of group {ENTRY_POINT_GROUP!r}"
        try:
            loaded = point.load()
        except Exception as exc:  # noqa: BLE001 - whatever its import raised, named with its source
            raise LlmExportError(f"the {where} does not load ({type(exc).__name__}: {exc}); fix or uninstall "
                                 "the distribution that declares it") from exc
        frontends.append(_checked(loaded, where))
    names = [f.name for f in frontends]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise LlmExportError(f"front-end name(s) {twice} registered more than once: give each front-end its own name")
    return frontends


def claiming(model: Any, frontends: list[Frontend] | None = None) -> Frontend | None:
    """The front-end that claims ``model`` (None: none does); two of one precedence claiming it is refused."""
    frontends = registered() if frontends is None else frontends
    for precedence in sorted({f.precedence for f in frontends}, reverse=True):
        claimants = [f for f in frontends if f.precedence == precedence and f.claims(model)]
        if len(claimants) > 1:
            raise UnsupportedModelError(
                f"{_named(model)} is claimed by the front-ends {[f.name for f in claimants]}: give one of them a "
                "higher precedence, or wrap the decoder in a jax2onnx_llm.DecoderSpec"
            )
        if claimants:
            return claimants[0]
    return None


def decoder_spec(model: Any, params: Any = None) -> DecoderSpec:
    """``model`` as a :class:`DecoderSpec`, by the front-end that claims it. ``params``: the weights of a
    model that holds none (a Linen module), passed on as ``decoder_spec(model, params)`` to a front-end
    whose ``decoder_spec`` takes them."""
    frontends = registered()
    frontend = claiming(model, frontends)
    if frontend is None:
        takes = "; ".join(f"{f.name}: {f.takes}" for f in frontends)
        raise UnsupportedModelError(
            f"{_named(model)} is no causal LM a registered front-end takes ({takes}): pass one of those, or wrap your "
            f"decoder in a jax2onnx_llm.DecoderSpec (or register a front-end in the {ENTRY_POINT_GROUP!r} entry-point "
            "group)"
        )
    if params is None:
        spec = frontend.decoder_spec(model)
    elif "params" in inspect.signature(frontend.decoder_spec).parameters:
        spec = frontend.decoder_spec(model, params=params)
    else:
        raise UnsupportedModelError(f"{_named(model)} ({frontend.name} front-end) carries its own weights: drop "
                                    "params=")
    if not isinstance(spec, DecoderSpec):
        raise UnsupportedModelError(
            f"the {frontend.name!r} front-end returned {type(spec).__name__} for {_named(model)}, not a DecoderSpec"
        )
    return spec


def _first_found(hook: str, model: Any) -> Any | None:
    """What the first registered front-end whose ``hook`` finds parts in ``model`` returns, or None."""
    for frontend in registered():
        find = getattr(frontend, hook)
        parts = find(model) if find is not None else None
        if parts is not None:
            return parts
    return None


def vision_language(model: Any) -> Any | None:
    """The vision-language parts a registered front-end finds in ``model`` (``Frontend.vision_language``), or None."""
    return _first_found("vision_language", model)


def speech_to_text(model: Any) -> Any | None:
    """The speech-to-text parts a registered front-end finds in ``model`` (``Frontend.speech_to_text``), or None."""
    return _first_found("speech_to_text", model)


def tokenizer_source(tokenizer: Any) -> Any | None:
    """What a front-end writes for a tokenizer object of its library (see :attr:`Frontend.tokenizer`),
    or None when no front-end claims it."""
    for frontend in registered():
        if frontend.claims_tokenizer is not None and frontend.claims_tokenizer(tokenizer):
            return frontend.tokenizer(tokenizer)
    return None


def _checked(obj: Any, where: str) -> Frontend:
    if not isinstance(obj, Frontend):
        raise LlmExportError(f"{where} is {type(obj).__name__}, not a jax2onnx_llm.frontends.Frontend: register a "
                             "Frontend(name=..., takes=..., claims=..., decoder_spec=...)")
    if (obj.claims_tokenizer is None) != (obj.tokenizer is None):
        raise LlmExportError(f"{where} ({obj.name!r}) gives only one of claims_tokenizer and tokenizer: give both "
                             "or neither")
    return obj


def _named(model: Any) -> str:
    cls = type(model)
    return f"{cls.__module__}.{cls.__qualname__}"
