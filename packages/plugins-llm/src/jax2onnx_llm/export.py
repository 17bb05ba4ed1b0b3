"""``export_causal_lm``: a causal LM → an onnxruntime-genai model folder.

The model (whatever its library) is first turned into a :class:`~jax2onnx_llm.spec.DecoderSpec`
by the front-end that claims it (``frontends/``); one export path then serves them all:

1. a flat function ``(input_ids, attention_mask, *past) -> (logits, *present)`` around the spec's
   step, in onnxruntime-genai's names and layout, exported by core's stages (the ones ``to_onnx``
   runs, :class:`jax2onnx.ExportProgram`) with symbolic batch, sequence and past lengths
   (prefill and decode are one graph); its options are checked by the ``ExportProgram``, the RMS norm
   fusion is a pass in the optimize stage's rewrite slot, and the write stage makes the
   external-data decision (``model.onnx.data``);
2. ``genai_config.json`` from the spec's sizes and tokens;
3. the tokenizer's files, when given or carried by the model;

all written into a temp folder beside ``out_dir`` and renamed into place at the end, so a failed
or interrupted export leaves ``out_dir`` as it was (``staging.py``: also what a killed one left).
"""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
from typing import Any

import jax
import jax.numpy as jnp
from jax2onnx import ExportProgram
from jax2onnx import progress as progress_report
from jax2onnx.rewrite import register_rewrite
from jax2onnx.targets import MS_DOMAIN, available_targets, find_target, get_target

from .attention_report import AttentionReportPass, recording
from .calibration import with_calibration_batches
from .errors import CacheLayoutError, MaxLengthError, OptionError
from .frontends import decoder_spec
from .genai_config import FILE as GENAI_CONFIG_FILE
from .genai_config import build as build_genai_config
from .genai_config import check_search
from .genai_targets import GENAI, default_genai_target, genai_targets
from .norm_fusion import NORM_OP, RmsNormFusionPass
from .packed_projections import GQA_OP, PackedProjectionsPass
from .qdq import STATIC_LLM, write_static_folder
from .spec import BATCH, CACHE_LAYOUTS, PAST, SEQUENCE, DecoderSpec, KVCache, extend_to, position_ids_from_mask
from .special_tokens import resolve as resolve_special_tokens
from .staging import staging as staging_folder
from .stateful import StatefulDecoderSpec
from .stateful import flat_step as stateful_flat_step
from .stateful import input_specs as stateful_input_specs
from .stateful import io_names as stateful_io_names
from .tokenizers import resolve as resolve_tokenizer
from .tokenizers import write as write_tokenizer
from .web import REPORT_FILE as WEB_REPORT_FILE
from .web import TRANSFORMERS_JS, web_dtypes, write_web_folder
from .web.dtypes import check_web_options
from .weights import check_has_values, streamed_input

MODEL_FILE = "model.onnx"



def export_causal_lm(
    model: Any,
    out_dir: str | os.PathLike[str],
    *,
    max_length: int,
    precision: Any = "float32",
    cache: str = "concat",
    target: str | None = None,
    tokenizer: Any = None,
    opset: int = 23,
    external_data: bool | None = None,
    search: dict[str, Any] | None = None,
    bos_token_id: int | None = None,
    eos_token_id: int | list[int] | None = None,
    pad_token_id: int | None = None,
    weights: Any = None,
    progress: bool | None = None,
    params: Any = None,
) -> pathlib.Path:
    """Export a causal LM as an onnxruntime-genai model folder and return its path.

    Args:
        model: a Hugging Face transformers Flax causal LM (GPT-2, Llama, Mistral, Gemma, GPT-Neo,
            GPT-J, OPT, Bloom, XGLM), a KerasHub
            ``CausalLM`` under the JAX backend, a ``gemma`` library Gemma 2 / 3 transformer (with
            ``params=``), an object with ``__jax2onnx_decoder__()`` (the
            examples pack's NNX Llama), or a :class:`~jax2onnx_llm.DecoderSpec` (any decoder written
            as a JAX function).
        out_dir: the folder to write (``model.onnx``, its external data when large,
            ``genai_config.json``, tokenizer files). Replaced as a whole; an existing folder must
            be empty or an earlier export (holding ``genai_config.json``; a browser folder:
            ``jax2onnx_web.json``).
        max_length: the most tokens (prompt + generated) a sequence may reach: the context length
            and, with ``cache="shared"``, the cache buffer's length.
        precision: passed to ``jax2onnx.to_onnx``: ``"float32"``, ``"float16"``, ``"bfloat16"``,
            ``"int8"``, ``"int4"`` (the LM head and embedding tables int4 too) or a
            ``jax2onnx.Precision`` (say ``Precision("int4", lm_head="int8", embeddings="int8")`` for
            an int8 head and tables); the graph's inputs and outputs (logits, KV cache) stay float32.
            Calibrated int4: ``Precision("int4", calibration=[...])`` with token-id arrays
            ``[batch, sequence]`` or texts (encoded with the tokenizer), run as prefills. For a browser
            folder (``target="web"``): one value or a tuple of ``"float32"``, ``"float16"``, ``"int8"``,
            ``"int4"``, ``"q4f16"`` (or ``Precision`` objects), one file each (:mod:`jax2onnx_llm.web.dtypes`).
        cache: ``"concat"`` (past and present grow each step) or ``"shared"`` (one static
            ``max_length`` buffer for past and present, ``past_present_share_buffer``).
        target: a target onnxruntime-genai runs (one declaring the ``"genai"`` capability), or one
            whose LLMs are static graphs (``"static-llm"``: ``"qdq"``, the NPU form: prefill and decode
            graphs over a fixed cache, see :mod:`jax2onnx_llm.qdq`; ``cache=`` and
            ``external_data=`` do not apply there: the weights always go to ``model.onnx.data``); None
            (default): the first that runs its fused attention, ``"onnxruntime"``.
            ``"onnxruntime"``: onnxruntime's fused LLM ops (``GroupQueryAttention``,
            ``RotaryEmbedding``, ``SkipSimplifiedLayerNormalization``) for attention written with
            :func:`~jax2onnx_llm.attend` and the Hugging Face / KerasHub attention layers;
            ``"onnx"``: standard ONNX only (opset 23's ``Attention`` and ``RotaryEmbedding``).
            Both generate the same tokens. A target declaring ``"transformers.js"`` (``"web"``) writes
            the folder transformers.js loads in the browser instead (:mod:`jax2onnx_llm.web`:
            ``config.json``, ``generation_config.json``, the tokenizer, ``onnx/model*.onnx`` per dtype;
            ``cache="concat"`` only; docs/guide/web.md).
        tokenizer: a Hugging Face fast tokenizer, a KerasHub tokenizer, or a folder holding
            ``tokenizer.json`` (and its companions) to copy; written so that onnxruntime-genai's
            ``Tokenizer`` loads it. ``None``: the tokenizer the model carries (a KerasHub
            preprocessor's), if any; ``False``: none (onnxruntime-genai then runs on token ids).
        opset: the default-domain opset of the model.
        external_data: weights beside the model (``None``: when they exceed 2 GB).
        search: ``genai_config.json`` search options to override (``{"do_sample": True}``; each
            field's type as :data:`jax2onnx_llm.genai_config.SEARCH_DEFAULTS`'s, ``max_length`` at most
            the export's; ``past_present_share_buffer`` follows ``cache=``).
        bos_token_id: the start token, where the model does not name it (a KerasHub model without
            its preprocessor) or to override it. Each special token is taken from the argument,
            else the model, else the tokenizer; ids outside the vocabulary are refused.
        eos_token_id: the end token(s), likewise; onnxruntime-genai needs one.
        pad_token_id: the pad token, likewise; it falls back to the end token. It marks a batch's
            left padding, for the graph and in ``genai_config.json`` alike (a prompt that itself
            begins with it is read as padded: pick one prompts never begin with).
        weights: stream the weights from here instead of the model's arrays: a ``.safetensors``
            path, an Orbax checkpoint folder (``nnx.state(model)`` saved by Orbax, also from a
            sharded run), a mapping or a callable ``name -> array``. The model then only gives their
            structure (build it under ``nnx.eval_shape``: nothing is allocated), and each weight is
            read when ``model.onnx.data`` is written, one at a time, so a model larger than memory
            exports. Names: :func:`jax2onnx_llm.weights.weight_names` (``save_safetensors``
            writes a model's weights under them).

        params: the weights of a model that holds none itself (the ``gemma`` library's Linen
            transformers), handed to the front-end that claims the model.

    Returns:
        ``out_dir`` as a :class:`pathlib.Path`.
    """
    with progress_report.reporting(progress) as reporter:
        reporter.stage("check")
        return _export(model, pathlib.Path(out_dir), max_length=max_length, precision=precision, cache=cache,
                       target=target, tokenizer=tokenizer, opset=opset, external_data=external_data, search=search,
                       given={k: v for k, v in (("bos_token_id", bos_token_id), ("eos_token_id", eos_token_id),
                                                ("pad_token_id", pad_token_id)) if v is not None},
                       weights=weights, reporter=reporter, params=params)


def _export(model: Any, out: pathlib.Path, *, max_length: int, precision: Any, cache: str, target: str, tokenizer: Any,
            opset: int, external_data: bool | None, search: dict[str, Any] | None, given: dict[str, Any], weights: Any,
            reporter: Any, params: Any = None) -> pathlib.Path:
    target = check_options(max_length, precision, cache, target)
    web = find_target(target).can(TRANSFORMERS_JS)
    dtypes = _check_web_options(precision, cache, search, weights, external_data) if web else None
    check_search(search, max_length=max_length)  # before the export, not after it
    spec = decoder_spec(model, params=params)
    tokenizer = spec.tokenizer if tokenizer is None else tokenizer
    # resolved (checked, its files parsed, converted) before minutes of export, and before its
    # special tokens are read from it; False: no tokenizer files at all
    tok_source = resolve_tokenizer(tokenizer) if tokenizer is not None and tokenizer is not False else None
    # one pad id for the graph's padding detection and genai_config.json (special_tokens.py)
    spec = resolve_special_tokens(spec, tokenizer, given)
    check_spec(spec, max_length, cache)
    if isinstance(spec, StatefulDecoderSpec):
        _check_stateful(spec, target, weights, precision)
    streamed = streamed_input(spec, weights) if weights is not None else None  # checked up front too
    if streamed is None:
        check_has_values(spec)
    if web:  # the folder transformers.js loads, one file per dtype (web/)
        with staging_folder(out, marker=WEB_REPORT_FILE) as staging:
            write_web_folder(spec, staging, dtypes=dtypes, max_length=max_length, target=target, opset=opset,
                             tok_source=tok_source, reporter=reporter)
        return out
    if find_target(target).can(STATIC_LLM):  # static prefill + decode graphs (qdq/)
        with staging_folder(out) as staging:
            write_static_folder(spec, staging, max_length=max_length, precision=precision, target=target, opset=opset,
                                tokenizer=tokenizer, search=search)
            if tok_source is not None:
                reporter.stage("tokenizer")
                write_tokenizer(tok_source, staging)
        return out
    # calibrated int4: token ids / text as prefill batches of the step's inputs, checked before the export
    precision = with_calibration_batches(precision, spec, tokenizer, cache, max_length)
    with staging_folder(out) as staging:
        _write_model(spec, staging / MODEL_FILE, max_length=max_length, precision=precision, cache=cache,
                     target=target, opset=opset, external_data=external_data, streamed=streamed)
        reporter.stage(GENAI_CONFIG_FILE)
        config = build_genai_config(spec, filename=MODEL_FILE, max_length=max_length, cache=cache, search=search)
        (staging / GENAI_CONFIG_FILE).write_text(json.dumps(config, indent=4) + "\n")
        if tok_source is not None:
            reporter.stage("tokenizer")
            write_tokenizer(tok_source, staging)
    return out


def check_options(max_length: Any, precision: Any, cache: Any, target: Any) -> str:
    """Checks the options; returns the target's name (None: the default, see ``export_causal_lm``); the
    multimodal exports check theirs with it too."""
    if cache not in CACHE_LAYOUTS:
        raise OptionError(f"cache={cache!r}: use 'concat' (growing past/present) or 'shared' (one max_length buffer)")
    choices = genai_targets()
    if target is None:
        target = default_genai_target()
    resolved = find_target(target)
    if resolved is None or not any(resolved.can(c) for c in (GENAI, STATIC_LLM, TRANSFORMERS_JS)):
        names = " or ".join(f"{t.name!r} ({t.summary})" for t in choices)
        static = " or ".join(repr(t.name) for t in available_targets() if t.can(STATIC_LLM))
        browser = " or ".join(repr(t.name) for t in available_targets() if t.can(TRANSFORMERS_JS))
        raise OptionError(f"target={target!r}: onnxruntime-genai runs {names}; static NPU graphs: {static}; "
                          f"transformers.js in the browser: {browser}; use one of them")
    if isinstance(max_length, bool) or not isinstance(max_length, int) or max_length < 2:
        raise MaxLengthError(f"max_length={max_length!r}: give the most tokens a sequence may reach, an int >= 2")
    return target


def _check_web_options(precision: Any, cache: str, search: Any, weights: Any, external_data: Any) -> list[Any]:
    """A browser folder's options: its dtypes (``precision=``, one or several), the growing cache."""
    check_web_options(cache, search, external_data)
    if weights is not None:
        raise OptionError("weights= (streamed weights) is not supported for a browser folder; load the weights into "
                          "the model and drop weights=")
    return web_dtypes(precision)


def _check_stateful(spec: StatefulDecoderSpec, target: str, weights: Any, precision: Any) -> None:
    """What a decoder with conv / recurrent state does not (yet) export with, refused before the export."""
    genai = " or ".join(repr(t.name) for t in genai_targets())
    if find_target(target).can(STATIC_LLM):
        raise OptionError(f"target={target!r}: the static NPU graphs hold attention caches only; this {spec.family} "
                          f"model's layers carry recurrent state: pass target={genai} (onnxruntime-genai folders)")
    if find_target(target).can(TRANSFORMERS_JS):
        raise OptionError(f"target={target!r}: the browser folder feeds attention caches only (optimum's "
                          f"past_key_values); this {spec.family} model's layers carry recurrent state: pass "
                          f"target={genai} for an onnxruntime-genai folder")
    if weights is not None:
        raise OptionError(f"weights=: streamed weights are not supported for the {spec.family} model's stateful "
                          "layers; export the model with its weights loaded (weights=None)")
    if getattr(precision, "calibration", None):
        raise OptionError(f"calibrated precision is not supported for the {spec.family} model's stateful layers; "
                          "pass the precision without calibration=")


def check_spec(spec: DecoderSpec, max_length: int, cache: str) -> None:
    if cache not in spec.cache_layouts:
        raise CacheLayoutError(
            f"cache={cache!r}: this {spec.family} model can only run with cache={spec.cache_layouts[0]!r}; pass that"
        )
    if spec.max_positions is not None and max_length > spec.max_positions:
        raise MaxLengthError(
            f"max_length={max_length} is beyond the {spec.max_positions} positions this {spec.family} model encodes; "
            f"pass max_length <= {spec.max_positions}"
        )


def streamed_step(spec: DecoderSpec, cache: str, max_length: int | None = None) -> Any:
    """:func:`flat_step` with the parameters as its first argument (a ``Weights`` input spec):
    ``(params, input_ids, attention_mask, *past) -> (logits, *present)``."""

    def run(params: Any, *args: Any) -> tuple[Any, ...]:
        return flat_step(dataclasses.replace(spec, params=params), cache, max_length)(*args)

    return run


def flat_step(spec: DecoderSpec, cache: str, max_length: int | None = None) -> Any:
    """The step as onnxruntime-genai calls it: ``(input_ids, attention_mask, *past) -> (logits, *present)``
    with past/present interleaved per layer as ``key, value``.

    Padding. onnxruntime-genai 0.18 passes an all-ones ``attention_mask`` for a left-padded batch
    (it does not mask pad tokens), so the graph finds padding itself: at prefill, the pad tokens
    before a row's first real token; in later steps, from the cache, where a padding slot's key in
    layer 0 is written as NaN (a value no real key has). The step sees the combined mask and a cache
    with those slots zeroed, so it is the plain math; a runtime that does send a padding mask
    works the same. Padding tokens' own keys/values in the other layers are finite (computed from
    the pad token), and masked. The pad id is the one ``genai_config.json`` names: ``spec``'s,
    resolved by :func:`jax2onnx_llm.special_tokens.resolve`.
    """
    pad_id = spec.pad_token_id
    if pad_id is None:
        raise OptionError("flat_step needs the spec's pad_token_id (special_tokens.resolve sets it): "
                          "give the DecoderSpec a pad_token_id")

    def run(input_ids: Any, attention_mask: Any, *past: Any) -> tuple[Any, ...]:
        seq = input_ids.shape[1]
        total = attention_mask.shape[1]
        mask = attention_mask.astype(jnp.int32)
        first_key = past[0]
        # (batch, past): padding slots so far (a gather: the shared buffer's length is static, past is
        # not; its indices 0..past-1 are in bounds, which spares the graph jnp.take's index checks)
        past_pad = jnp.isnan(first_key[:, 0, :, 0].at[:, jnp.arange(total - seq)].get(mode="promise_in_bounds"))
        seen_real = jnp.any(~past_pad & (mask[:, : total - seq] > 0), axis=1, keepdims=True)
        is_pad = input_ids == pad_id
        leading_pad = (jnp.cumsum(~is_pad, axis=1) == 0) & ~seen_real
        pad_slots = jnp.concatenate([past_pad, leading_pad], axis=1)  # (batch, total)
        mask = jnp.where(pad_slots, 0, mask)
        # Only layer 0's keys carry the marker: the other layers' past goes to the step untouched
        # (no copy per token, and a fused attention writes the shared buffer in place). A marked
        # slot is NaN throughout, so the slot flags above say where to zero it: a broadcast
        # (batch, 1, slots, 1) condition, not an elementwise NaN test of the whole buffer (which
        # cost two more passes over it per step). The shared buffer outlasts this step's tokens:
        # its flags cover the first `total` slots, and zeroing this step's own slots (written by
        # the step before attention reads them) changes nothing.
        slots = extend_to(pad_slots, past[0].shape[2]) if cache == "shared" else pad_slots
        marker = slots[:, None, :, None]
        past_marker = marker if cache == "shared" else past_pad[:, None, :, None]
        clean = [jnp.where(past_marker, jnp.zeros((), past[0].dtype), past[0]), *past[1:]]
        position_ids = position_ids_from_mask(mask, seq)
        kv = KVCache(clean[0::2], clean[1::2], mask, cache, max_length=max_length)
        logits, kv = spec.step(spec.params, input_ids, mask, position_ids, kv)
        keys = list(kv.keys)
        keys[0] = jnp.where(marker, jnp.asarray(jnp.nan, keys[0].dtype), keys[0])
        present = [t for pair in zip(keys, kv.values) for t in pair]
        return (logits.astype(spec.dtype), *present)

    return run


def io_names(num_layers: int) -> tuple[list[str], list[str]]:
    inputs = ["input_ids", "attention_mask"]
    outputs = ["logits"]
    for i in range(num_layers):
        inputs += [f"past_key_values.{i}.key", f"past_key_values.{i}.value"]
        outputs += [f"present.{i}.key", f"present.{i}.value"]
    return inputs, outputs


def input_specs(spec: DecoderSpec, cache: str, max_length: int) -> list[Any]:
    """Symbolic batch, sequence and past lengths, constrained to ``past + sequence <= max_length``
    so that library code slicing its tables (causal masks, position tables) by them traces."""
    batch, seq, past = jax.export.symbolic_shape(
        f"{BATCH}, {SEQUENCE}, {PAST}", constraints=(f"{PAST} + {SEQUENCE} <= {max_length}",)
    )
    ids = jax.ShapeDtypeStruct((batch, seq), jnp.int32)
    # past + sequence for both layouts: with the shared buffer `past` is known only through the mask.
    mask = jax.ShapeDtypeStruct((batch, past + seq), jnp.int32)
    kv_len: Any = past if cache == "concat" else max_length
    kv = jax.ShapeDtypeStruct((batch, spec.num_kv_heads, kv_len, spec.head_size), spec.dtype)
    return [ids, mask, *([kv] * (2 * spec.num_layers))]


def export_keywords(spec: DecoderSpec, path: pathlib.Path, *, precision: Any, target: str, opset: int,
                    external_data: bool | None) -> dict[str, Any]:
    """The core export's options for the model file at ``path`` (``to_onnx``'s keywords, checked by the
    :class:`jax2onnx.ExportProgram` like any ``to_onnx`` call's). Two front-end options: the RMS norm
    fusion and the projections' packing as rewrite-slot passes (where the target runs onnxruntime's
    norm ops and fused attention), and the weights file
    named ``model.onnx.data``, which onnxruntime-genai folders conventionally hold (the staging
    folder's rename keeps it paired)."""
    in_names, out_names = stateful_io_names(spec) if isinstance(spec, StatefulDecoderSpec) else io_names(spec.num_layers)
    return dict(
        model_name="causal_lm", opset=opset, input_names=in_names, output_names=out_names,
        return_mode="file", output_path=path, external_data=external_data, precision=precision, target=target,
        # the RMS norms as onnxruntime's norm ops and the packed projections, where the target holds
        # the rewrites (it runs the ops they write)
        rewrite_passes=get_target(target).requested_rewrites([RmsNormFusionPass.name, PackedProjectionsPass.name]),
        external_data_file=f"{path.name}.data",
    )


def _norm_fusion(options: Any) -> RmsNormFusionPass:
    return RmsNormFusionPass()


# the RMS norm fusion, held by every target that runs the op it writes (jax2onnx.rewrite)
register_rewrite(RmsNormFusionPass.name, _norm_fusion, op=NORM_OP, domain=MS_DOMAIN)
# a layer's projections of one input as one matmul, where the target runs the fused attention whose
# packed-QKV form it writes (packed_projections.py)
register_rewrite(PackedProjectionsPass.name, lambda options: PackedProjectionsPass(), op=GQA_OP, domain=MS_DOMAIN)


def _write_model(spec: DecoderSpec, path: pathlib.Path, *, max_length: int, precision: Any, cache: str, target: str,
                 opset: int, external_data: bool | None, streamed: Any = None) -> None:
    """The core export's stages (trace, lower, optimize, write) on the flat step: ``model.onnx`` at ``path``.
    ``streamed``: a ``Weights`` spec; the parameters become lazy initializers read at write time."""
    inputs = input_specs(spec, cache, max_length)
    fn = flat_step(spec, cache, max_length)
    if isinstance(spec, StatefulDecoderSpec):  # attention caches and conv / recurrent states (stateful.py)
        inputs, fn = stateful_input_specs(spec, max_length), stateful_flat_step(spec, max_length)
    if streamed is not None:
        inputs, fn = [streamed, *inputs], streamed_step(spec, cache, max_length)
    keywords = export_keywords(spec, path, precision=precision, target=target, opset=opset,
                               external_data=external_data)
    # attend() regions read the target from the program's options when they are lowered (fused.py);
    # the regions and adapters note per decoder layer what fused, and the report pass writes it down
    with recording() as record:
        record.num_layers = spec.num_layers
        keywords["rewrite_passes"] = (*keywords["rewrite_passes"],
                                      lambda options: AttentionReportPass(record))
        ExportProgram(fn, inputs, **keywords).write()
