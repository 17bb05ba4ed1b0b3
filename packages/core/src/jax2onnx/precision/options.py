"""What ``to_onnx(..., precision=...)`` accepts: a name or a :class:`Precision`, checked up front
(before minutes of tracing) with one clear line per mistake."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from ..errors import PrecisionError
from ..targets.base import available_targets
from ..targets.precision_forms import PrecisionForm, kernel_names, weight_form

#: The precisions, in the order the guide lists them.
KINDS = ("float32", "float16", "bfloat16", "int8", "int4")
FLOAT_KINDS = ("float16", "bfloat16")
QUANT_KINDS = ("int8", "int4")
BLOCK_SIZES = (16, 32, 64, 128, 256)
#: what ``activations=`` takes: None (weight-only int8 matmuls) or "dynamic"
ACTIVATIONS = (None, "dynamic")
#: how int4 codes are chosen: round to nearest, or from calibration data (see .calibration)
INT4_METHODS = ("rtn", "gptq", "awq")


def kernels(kind: str, activations: Any = ...) -> tuple[str, ...]:
    """The kernels ``Precision.<kind>_kernel`` takes: those of every target's precision forms
    (:mod:`jax2onnx.targets.precision_forms`; ``activations="dynamic"``: the int8 forms that quantize
    activations at run time), in the order the forms are defined."""
    available_targets()  # a registered target's folder may define forms of its own
    return kernel_names(kind, activations)




@dataclasses.dataclass(frozen=True)
class Precision:
    """How the exported model stores and computes its float32 work.

    Args:
        kind: ``"float32"`` (as traced), ``"float16"``, ``"bfloat16"`` (weights stored and
            computed in the 16-bit type; normalization statistics, softmax, sum reductions, exp/log
            stay float32), ``"int8"`` (weight-only: int8 weights with a scale per column or per
            block, float32 activations in the graph; ``activations="dynamic"`` quantizes them
            too), ``"int4"`` (weight-only ``com.microsoft.MatMulNBits``, block-wise RTN), ``"qdq"``
            (a target's own form, :class:`~jax2onnx.targets.precision_forms.PrecisionForm`:
            ``target="qdq"``'s static QDQ, every
            compute op between ``DequantizeLinear`` and ``QuantizeLinear`` with calibrated scales;
            its fields are ``activations``, ``weights``, ``calibration``, ``block_size`` and
            ``dims``, checked by :mod:`jax2onnx.targets.qdq.precision`).
        keep_io_types: graph inputs and outputs stay float32 (default); ``False``: the 16-bit type
            (float16/bfloat16 only).
        block_size: int4 quantization block along K (16..256, a power of two; 32 by default).
        symmetric: int4 blocks with a zero point each (``False``, default: the 16 levels span each
            block's own min..max) or without (``True``: half a byte less per block).
        exclude: name patterns (``fnmatch``) of weights to leave in float32 (int8/int4). A weight
            is named by its initializer: the :class:`~jax2onnx.Weights` leaf path for streamed
            exports (``"lm_head.kernel"``), ``"const_<shape>"`` for weights closed over by the function.
        int8: name patterns of weights quantized to int8 instead of int4.
        embeddings: embedding tables (``Gather`` of a 2-D float32 weight), int8/int4 only.
            ``"auto"`` (default): the precision's own width, int4 tables under ``"int4"`` and int8
            under ``"int8"``; ``"int4"``: 4-bit blocks of ``block_size`` along each row with a
            scale and zero point each (``com.microsoft.GatherBlockQuantized``; a table whose width
            is not a multiple of the block is stored int8 instead); ``"int8"``: int8 with a scale
            per row (the option for an int4 model whose tables should stay closer to float32);
            ``None``: float32.
        lm_head: under int4, the LM head (a weight matmul writing a graph output of a model with an
            embedding table): ``"int4"`` (default) like the other matmuls; ``"int8"``: int8, which
            keeps its logits' order closer to float32 where int4 blocks of a wide head would flip
            near ties (every generated token is its argmax). int8 quantizes it int8 either way.
        conv: ``"int8"`` (default, int8/int4): convolution kernels (and large constants added to
            activations, such as position embeddings) stored as int8 with one scale per output
            channel, widened by a ``DequantizeLinear``; ``None``: left in float32.
        int8_kernel: the int8 matmul: ``None`` (default) the export target's form
            (:mod:`jax2onnx.targets`; weight-only: ``"MatMulNBits"`` under ``target="onnxruntime"``,
            ``"DequantizeLinear"`` elsewhere; with ``activations="dynamic"``:
            ``"DynamicQuantizeMatMul"`` under ``target="onnxruntime"``, ``"MatMulInteger"``
            elsewhere), or one named: ``"MatMulNBits"`` (com.microsoft, ``bits=8``: int8 codes in
            blocks of up to 128 along K with a scale each, ``accuracy_level=4``: onnxruntime's CPU
            kernel rounds the activations to int8 per block inside, as it does for the fused
            standard form; its float32-compute path is 16-32x slower for one token),
            ``"DequantizeLinear"`` (standard ONNX: int8 codes with a scale per column widened by
            ``DequantizeLinear`` before the ``MatMul``, which onnxruntime fuses into its 8-bit
            MatMulNBits when the session starts),
            ``"DynamicQuantizeMatMul"`` (com.microsoft) or ``"MatMulInteger"`` (standard ONNX:
            ``DynamicQuantizeLinear`` + ``MatMulInteger``); the last two quantize the activations
            too, so naming one implies ``activations="dynamic"``.
        int4_kernel: the int4 matmul: ``None`` (default) the export target's form
            (:mod:`jax2onnx.targets`: ``"MatMulNBits"`` under ``target="onnxruntime"``,
            ``"DequantizeLinear"`` under ``target="onnx"``), or one named: ``"MatMulNBits"``
            (com.microsoft) or ``"DequantizeLinear"`` (standard ONNX from opset 21: 4-bit weights in
            blocks of ``block_size`` along K widened by one blocked ``DequantizeLinear`` before the
            ``MatMul``, which onnxruntime fuses into MatMulNBits when the session starts). Under the
            standard form embedding tables (``"auto"``) and stacked layer weights a ``Scan``/``Loop``
            slices are int8 (4-bit tables need GatherBlockQuantized; onnxruntime's Scan and Gather
            take no 4-bit tensors).
        accuracy_level: MatMulNBits' ``accuracy_level``: ``"auto"`` (default) 4 where a check
            allows it, else 1: each layer runs alone in onnxruntime at both levels on its real
            inputs (from the calibration data, or a probe set the export draws) and keeps 1 where
            level 4's error exceeds a bound (:mod:`jax2onnx.precision.accuracy_levels`; the
            precision's detail lists the layers kept); 1 computes in float32 from the int4
            weights; 4 quantizes the activations to int8 per block, several times faster on
            onnxruntime's CPU at a small accuracy cost that outlier activations make large;
            ``None`` leaves the attribute out (onnxruntime's choice). Read by the MatMulNBits
            form only.
        calibration: int4 only: input batches to choose the codes from (each batch one array per
            input of ``to_onnx``'s ``inputs``, in order, or one array for a one-input function),
            run through the export in onnxruntime layer by layer (each layer's inputs through the
            already quantized layers before it) to collect each weight matmul's inputs; batches
            may differ in the axes the export leaves symbolic. ``export_causal_lm`` takes token-id
            arrays or texts here. The graph is the same as plain int4's; only codes, scales and
            zero points differ.
        method: int4 only: ``"rtn"`` (round to nearest, default without calibration),
            ``"gptq"`` (default with calibration: error-compensating rounding with the Hessian of
            each weight's inputs) or ``"awq"`` (activation-aware clipping of each block's range);
            see :mod:`jax2onnx.precision.calibration`.
        weights: ``"qdq"`` only: how weights are stored: ``"int8"`` (default: symmetric, one scale per
            output channel), ``"uint8"`` (asymmetric, a scale and zero point per output channel) or
            ``"int4"`` (symmetric blocks of ``block_size`` along K, opset 21's blocked
            ``DequantizeLinear``; convolution kernels stay int8 per channel).
        dims: ``"qdq"`` only: a size for each symbolic axis of the inputs (``{"B": 1}``): the
            graph is static-shaped, and a symbolic axis left without a size is refused.
        activations: under ``"qdq"``: ``"uint16"`` (default) or ``"uint8"``, the type every
            quantized activation takes (asymmetric, one calibrated scale and zero point per tensor).
            Otherwise the int8 weight matmuls' activations (every matmul under int8; ``int8=``
            patterns and ``lm_head="int8"`` under int4): ``None`` (default) float32, weight-only;
            ``"dynamic"``: quantized to 8 bits at run time with one scale per tensor
            (``DynamicQuantizeMatMul`` / ``DynamicQuantizeLinear`` + ``MatMulInteger``), faster at
            many tokens on onnxruntime's CPU but further from float32 (bench/results/precision.md).
    """

    kind: str = "float32"
    keep_io_types: bool = True
    block_size: int = 32
    symmetric: bool = False
    exclude: Sequence[str] = ()
    int8: Sequence[str] = ()
    embeddings: str | None = "auto"
    lm_head: str = "int4"
    conv: str | None = "int8"
    int8_kernel: str | None = None
    accuracy_level: int | str | None = "auto"
    int4_kernel: str | None = None
    #: batches of arrays: not compared or hashed (two Precisions differing only in data are alike)
    calibration: Sequence[Any] = dataclasses.field(default=(), compare=False, repr=False)
    method: str | None = None
    activations: str | None = None
    weights: str | None = None
    #: (symbol, size) pairs, sorted; given as a mapping
    dims: Any = ()

    def int4_method(self) -> str:
        """The int4 rounding: ``method`` or, unset, ``"gptq"`` with calibration data, else ``"rtn"``."""
        return self.method or ("gptq" if self.calibration else "rtn")

    def embedding_kind(self) -> str | None:
        """How embedding tables are stored: ``"int8"``, ``"int4"`` or None (float32); ``"auto"``
        resolved by the precision (int4 tables under int4, int8 under int8, None otherwise)."""
        if self.kind not in QUANT_KINDS:
            return None
        if self.embeddings == "auto":  # int4 tables where the int4 form has them
            return "int4" if self.kind == "int4" and weight_form("int4", self.int4_kernel).int4_embeddings else "int8"
        return self.embeddings

    def describe(self) -> str:
        """One line for the report and the model's metadata."""
        own = {form.kind: form for form in stage_forms()}
        if self.kind in own:
            return own[self.kind].describe(self)
        if self.kind in QUANT_KINDS:
            parts = [self.kind]
            if self.kind == "int4":
                method = self.int4_method().upper()
                if self.calibration:
                    method += f" calibrated on {len(self.calibration)} batch(es)"
                parts.append(f"block {self.block_size} {'symmetric' if self.symmetric else 'asymmetric'} {method}")
                if self.accuracy_level is not None and weight_form("int4", self.int4_kernel).accuracy_levels:
                    parts.append(f"accuracy_level {self.accuracy_level}")
            else:
                form = "dynamic activations" if self.activations == "dynamic" else "weight-only"
                parts.append(f"{form} ({self.int8_kernel or 'the target form'})")
            if self.exclude:
                parts.append("excluding " + ", ".join(self.exclude))
            if self.int8 and self.kind == "int4":
                parts.append("int8 for " + ", ".join(self.int8))
            if self.kind == "int4" and self.lm_head == "int8":
                parts.append("int8 LM head")
            if self.embedding_kind():
                parts.append(f"{self.embedding_kind()} embeddings")
            if self.conv:
                parts.append(f"{self.conv} convolutions and added constants")
            return "; ".join(parts)
        if self.kind in FLOAT_KINDS and not self.keep_io_types:
            return f"{self.kind} (inputs and outputs {self.kind})"
        return self.kind


def precision_kinds() -> tuple[str, ...]:
    """The built-in kinds, then those the targets' folders add (a form with a stage of its own,
    :meth:`jax2onnx.targets.precision_forms.PrecisionForm.apply`: ``"qdq"``)."""
    available_targets()  # a registered target's folder may define forms of its own
    return (*KINDS, *(form.kind for form in stage_forms()))


def stage_forms() -> list[PrecisionForm]:
    """The forms of the registered targets that are a precision stage of their own."""
    return list(dict.fromkeys(f for t in available_targets() for f in t.precision_forms if f.own_stage))


def parse_precision(precision: Any, *, enable_double_precision: bool = False) -> Precision:
    """``precision=`` as given to ``to_onnx`` → a checked :class:`Precision`."""
    if isinstance(precision, str):
        if precision not in precision_kinds():
            raise PrecisionError(f"precision={precision!r} is unknown; use one of {', '.join(map(repr, precision_kinds()))}")
        p = Precision(precision)
    elif isinstance(precision, Precision):
        p = precision
    else:
        raise PrecisionError(f"precision must be a name ({', '.join(map(repr, precision_kinds()))}) or jax2onnx.Precision(...), "
                             f"got {type(precision).__name__} {precision!r}")
    if p.kind not in precision_kinds():
        raise PrecisionError(f"Precision(kind={p.kind!r}) is unknown; use one of {', '.join(map(repr, precision_kinds()))}")
    own = {form.kind: form for form in stage_forms()}
    if p.kind in own:  # a target's own form checks its fields (the batches as every kind's)
        batches = p.calibration
        given = not (batches is None or (isinstance(batches, (list, tuple)) and not batches))
        return own[p.kind].check(dataclasses.replace(p, calibration=checked_batches(batches) if given else ()),
                                 enable_double_precision)
    for field in ("weights", "dims"):
        if getattr(p, field):
            raise PrecisionError(f"{field}= is read by a target's own precision form ({', '.join(map(repr, own))}); "
                                 f"precision {p.kind!r} takes none (drop {field}=)")
    if not isinstance(p.keep_io_types, bool):
        raise PrecisionError(f"keep_io_types must be True or False, got {p.keep_io_types!r}")
    if not p.keep_io_types and p.kind not in FLOAT_KINDS:
        raise PrecisionError(f"keep_io_types=False changes the inputs and outputs to float16/bfloat16; precision {p.kind!r} "
                             "keeps them float32 (drop keep_io_types)")
    if p.block_size not in BLOCK_SIZES:
        raise PrecisionError(f"block_size={p.block_size!r} is not supported by MatMulNBits; use one of "
                             f"{', '.join(map(str, BLOCK_SIZES))} (32, 64 or 128 are the usual)")
    for field in ("exclude", "int8"):
        patterns = getattr(p, field)
        if isinstance(patterns, str) or not all(isinstance(s, str) for s in patterns):
            raise PrecisionError(f"{field} takes a list of name patterns, got {patterns!r} (write [{patterns!r}] for one)")
    if p.embeddings not in ("auto", None, "int8", "int4"):
        raise PrecisionError(f"embeddings={p.embeddings!r}: use 'auto' (the precision's own: int4 or int8), 'int8' (int8 "
                             "table, one scale per row), 'int4' (4-bit blocks of block_size along each row) or None (float32)")
    if p.lm_head not in ("int8", "int4"):
        raise PrecisionError(f"lm_head={p.lm_head!r}: use 'int4' (the default under int4) or 'int8' (the LM head int8)")
    if p.conv not in (None, "int8"):
        raise PrecisionError(f"conv={p.conv!r}: use 'int8' (int8 kernels, one scale per output channel) or None (float32)")
    for kind in QUANT_KINDS:
        named, known = getattr(p, f"{kind}_kernel"), kernels(kind)
        if named is not None and named not in known:
            raise PrecisionError(f"{kind}_kernel={named!r} is unknown; use one of {', '.join(map(repr, known))}")
    if p.embeddings == "int4" and p.int4_kernel is not None and not weight_form("int4", p.int4_kernel).int4_embeddings:
        raise PrecisionError(f"embeddings='int4' gathers 4-bit rows with com.microsoft.GatherBlockQuantized; under "
                             f"int4_kernel={p.int4_kernel!r} ({weight_form('int4', p.int4_kernel).about}) use "
                             "embeddings='int8' or 'auto'")
    if isinstance(p.accuracy_level, bool) or p.accuracy_level not in (None, "auto", 0, 1, 2, 3, 4):
        raise PrecisionError(f"accuracy_level={p.accuracy_level!r}: MatMulNBits takes 0 to 4, 'auto' (4 where a check "
                             "of each layer's error allows it, else 1) or None (leave it out)")
    p = _checked_activations(p)
    p = _checked_calibration(p)
    if enable_double_precision and p.kind != "float32":
        raise PrecisionError(f"precision={p.kind!r} converts a float32 export; drop enable_double_precision=True "
                             "(float64 weights have nothing to gain from it)")
    return p


def _checked_activations(p: Precision) -> Precision:
    """``activations`` checked against the kind and a named ``int8_kernel``; a dynamic kernel named
    alone implies ``activations="dynamic"`` (it quantizes them whatever the field says)."""
    if p.activations not in ACTIVATIONS:
        raise PrecisionError(f"activations={p.activations!r}: use None (default: weight-only int8 matmuls, float32 "
                             "activations) or 'dynamic' (activations quantized to 8 bits at run time, per tensor)")
    if p.activations is not None and p.kind not in QUANT_KINDS:
        raise PrecisionError(f"activations={p.activations!r} quantizes the inputs of int8 weight matmuls; precision "
                             f"{p.kind!r} has none (use Precision('int8', activations=...) or drop activations)")
    dynamic = kernels("int8", "dynamic")
    if p.int8_kernel in dynamic:
        return dataclasses.replace(p, activations="dynamic")
    if p.int8_kernel is not None and p.activations == "dynamic":
        raise PrecisionError(f"int8_kernel={p.int8_kernel!r} is weight-only and activations='dynamic' quantizes the "
                             f"activations; name one of {', '.join(map(repr, dynamic))} or drop int8_kernel "
                             "(the target's dynamic form)")
    return p


def _checked_calibration(p: Precision) -> Precision:
    """``calibration``/``method`` checked, the batches stored as a tuple of tuples of float32 arrays."""
    if p.method is not None and p.method not in INT4_METHODS:
        raise PrecisionError(f"method={p.method!r} is unknown; use one of {', '.join(map(repr, INT4_METHODS))}")
    batches = p.calibration
    if batches is None or (isinstance(batches, (list, tuple)) and not batches):
        if p.method in ("gptq", "awq"):
            raise PrecisionError(f"method={p.method!r} chooses int4 codes from calibration data; pass calibration=[batch, "
                                 "...] (input batches like the export's inputs) or use method='rtn'")
        return dataclasses.replace(p, calibration=())
    if p.kind != "int4":
        raise PrecisionError(f"calibration= chooses int4 codes; precision {p.kind!r} takes none (use Precision('int4', "
                             "calibration=...) or drop calibration)")
    if p.method == "rtn":
        raise PrecisionError("method='rtn' rounds to nearest and reads no calibration data; drop calibration= or use "
                             "method='gptq' or 'awq'")
    return dataclasses.replace(p, calibration=checked_batches(batches))


def checked_batches(batches: Any) -> tuple[tuple[Any, ...], ...]:
    """``calibration=`` (a non-empty list of input batches) as a tuple of tuples of arrays, each batch
    one array per input with a batch axis, every batch of the same arity and ranks."""
    import numpy as np

    if isinstance(batches, (str, bytes)) or not isinstance(batches, (list, tuple)) or hasattr(batches, "shape"):
        raise PrecisionError(f"calibration takes a list of input batches (one array per input each), got "
                             f"{type(batches).__name__}; write [batch] for one batch")
    checked = []
    for i, batch in enumerate(batches):
        arrays = tuple(batch) if isinstance(batch, (list, tuple)) else (batch,)
        try:
            arrays = tuple(np.asarray(a) for a in arrays)
        except Exception as exc:  # ragged lists, objects numpy cannot hold
            raise PrecisionError(f"calibration batch {i} is not a list of arrays: {exc}") from exc
        for j, a in enumerate(arrays):
            if a.dtype.kind not in "fiub" or a.ndim == 0:
                raise PrecisionError(f"calibration batch {i}, input {j}: expected a numeric array with a batch axis, "
                                     f"got {a.dtype} of shape {a.shape}")
        if checked and len(arrays) != len(checked[0]):
            raise PrecisionError(f"calibration batch {i} has {len(arrays)} input(s), batch 0 has {len(checked[0])}; "
                                 "every batch gives one array per input of the export")
        if checked:
            for j, (a, first) in enumerate(zip(arrays, checked[0], strict=True)):
                if a.ndim != first.ndim:  # the fixed axes are checked against the export's inputs when it runs
                    raise PrecisionError(f"calibration batch {i}, input {j} has shape {a.shape}; batch 0's is "
                                         f"{first.shape}: every batch gives each input with the same rank")
        checked.append(arrays)
    return tuple(checked)


__all__ = ["ACTIVATIONS", "KINDS", "Precision", "PrecisionError", "checked_batches", "parse_precision", "precision_kinds",
           "stage_forms"]
