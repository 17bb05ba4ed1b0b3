"""int8 / int4 export: quantize the weight matmuls of every graph, one weight at a time.

A *weight matmul* is a ``MatMul`` whose second operand is a 2-D float32 initializer ``[K, N]``, or
a ``Gemm`` with such a ``B`` (``transB`` allowed, ``alpha = beta = 1``, no ``transA``; a 1-D ``C``
of ``N`` becomes the quantized op's bias, any other ``C`` an ``Add`` after it).

- **int8** (weight-only by default): symmetric int8 weights (max |w| / 127), the activations stay
  float32. Under ``target="onnxruntime"`` ``com.microsoft.MatMulNBits`` with ``bits=8`` (a scale
  per block of up to 128 along K); under the standard target int8 codes with one scale per output
  column widened by ``DequantizeLinear`` before the ``MatMul`` (onnxruntime fuses the pair into its
  8-bit MatMulNBits when the session starts). ``activations="dynamic"``: the activations are
  quantized at run time, per tensor, with a scale per column of the weights:
  ``com.microsoft.DynamicQuantizeMatMul`` or standard ``DynamicQuantizeLinear`` + ``MatMulInteger``.
- **int4** (weight-only): ``com.microsoft.MatMulNBits`` with round-to-nearest blocks of
  ``block_size`` along K, symmetric or with zero points. The block quantizer is onnxruntime's
  (``onnxruntime.quantization``'s ``DefaultWeightOnlyQuantizer.qbits_block_quant``, called on one
  tensor: an optional dependency of this precision only).
- embedding tables (``Gather`` on axis 0 of a 2-D float32 initializer), with ``embeddings="auto"``
  (default) in the precision's own width: under int4 ``com.microsoft.GatherBlockQuantized`` over
  4-bit rows (blocks of ``block_size`` along each row; a table whose width is not a multiple of the
  block is stored int8), under int8 int8 rows with one scale per row, gathered together.
  ``embeddings="int8"`` keeps int8 tables under int4.
- the LM head (a weight matmul writing a graph output, in a model with an embedding table) is
  quantized like the other matmuls (``lm_head="int4"``, default); ``lm_head="int8"`` keeps it int8
  under int4: each generated token is its argmax, and int8 keeps its logits' order closer to
  float32 where int4 blocks of a wide head can flip near ties (a trained LM keeps its greedy tokens
  either way: packages/examples/tests/test_precision_trained_lm.py).
- with ``conv="int8"`` (default): convolution kernels int8 with one scale per output channel, and
  large constants added to activations (a ViT's position embedding) int8 with one scale per
  last-axis entry, each widened by one ``DequantizeLinear`` (weight-only: the Conv/Add computes
  in float32; onnxruntime folds the widening once when the session starts).

Where the weights are: the main graph's initializers (lazy ones stay lazy), ``Constant`` nodes of
function bodies (``@onnx_function``) and control-flow bodies (quantized in place, as Constants of
that body), outer initializers a body reads, and weights a ``Scan`` slices per iteration (a
``lax.scan`` / ``nnx.scan`` over stacked layers: the stacked ``[L, K, N]`` weight becomes stacked
codes and scales, scanned the same way, and the body's matmul reads the slices), and stacked weights a
``Loop`` body picks one layer of by the iteration number (``w[i]`` in a ``lax.fori_loop``: a
``Slice`` + ``Squeeze`` or a ``Gather`` on axis 0; the stacked codes and scales are picked the
same way in the body, with the same index).

Streamed weights (:class:`~jax2onnx.Weights`) stay lazy: a quantized weight's parts (codes,
scales, zero points) are initializers that quantize their source when the first of them is
written and share that result until each part has been written once, so memory holds one
weight's result at a time.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import onnx_ir as ir

from ..ir.graphs import FreshNames, all_graphs
from .calibration import Calibrated, Choice, MatmulSite, StackedSite, calibrate
from .expert_weights import is_moe, moe_weights, stacked_matmul_weight, to_int4_stacked, to_qmoe
from .options import Precision, PrecisionError
from .quantized_ops import (
    MS_DOMAIN,
    addend_slot,
    dequantized_input,
    embedding_int4,
    embedding_int8,
    is_conv,
    is_embedding,
    to_int4,
    to_int8,
    use_ms_domain,
    weight_kn,
)
from .stacked_weights import (
    quantize_scanned_weights,
    quantize_selected_weight,
    scanned_matmuls,
    selected_weight,
    stacked_bits,
)
from .weight_sites import Site, WeightMatmul, as_weight, attribute_value, find_weight_matmul, matches_any


@dataclasses.dataclass
class QuantizeResult:
    kind: str
    int4: list[str] = dataclasses.field(default_factory=list)
    int8: list[str] = dataclasses.field(default_factory=list)
    excluded: list[str] = dataclasses.field(default_factory=list)
    embeddings: list[str] = dataclasses.field(default_factory=list)
    embeddings4: list[str] = dataclasses.field(default_factory=list)
    convs: list[str] = dataclasses.field(default_factory=list)
    addends: list[str] = dataclasses.field(default_factory=list)
    scanned: list[str] = dataclasses.field(default_factory=list)  # stacked weights a Scan slices
    selected: list[str] = dataclasses.field(default_factory=list)  # stacked weights a body indexes (Loop)
    calibrated: list[str] = dataclasses.field(default_factory=list)  # int4 weights with calibrated codes
    experts: list[str] = dataclasses.field(default_factory=list)  # stacked expert weights, int4 per expert
    float_experts: list[str] = dataclasses.field(default_factory=list)  # MoE ops no QMoE block fits (float32)
    method: str = "rtn"
    choices: list[Choice] = dataclasses.field(default_factory=list)  # each calibrated weight's (layer's) codes

    def _uncalibrated(self) -> list[str]:
        """int4 weights a calibrated export left round-to-nearest (not reachable per layer); the
        stacked ones' labels say their width (a standard-form stacked weight is int8)."""
        stacked = [label for label in (*self.scanned, *self.selected)
                   if "(int4," in label and label.split(" (")[0] not in self.calibrated]
        return [n for n in self.int4 if n not in self.calibrated] + stacked

    def _choices(self) -> str:
        """Which codes the calibrated weights kept, and their output errors on the held-out rows
        (relative to the output's norm, over every calibrated weight)."""
        method = self.method.upper()
        judged = [c for c in self.choices if c.method_error is not None]
        worse = [c.name for c in judged if c.kept == "rtn"]
        unjudged = [c.name for c in self.choices if c.method_error is None]

        def names(found: list[str]) -> str:
            return ", ".join(found[:12]) + (f" and {len(found) - 12} more" if len(found) > 12 else "")

        text = f"{method} kept for {len(judged) - len(worse)} of {len(self.choices)}"
        if worse:
            text += f", round-to-nearest where {method} was no better on the held-out rows: {names(worse)}"
        if unjudged:
            text += f", round-to-nearest with too few held-out rows to judge by: {names(unjudged)}"
        reference = sum(c.reference for c in judged)
        if reference > 0:
            def relative(errors):
                return (sum(errors) / reference) ** 0.5

            text += (f"; held-out output error {method} {relative(c.method_error for c in judged):.3g}, "
                     f"round-to-nearest {relative(c.rounded_error for c in judged):.3g}, kept "
                     f"{relative(min(c.method_error, c.rounded_error) for c in judged):.3g}"
                     + (f" (over the {len(judged)} judged)" if unjudged else ""))
        return text

    def describe(self) -> str:
        parts = []
        if self.int4:
            parts.append(f"{len(self.int4)} matmul weight(s) int4")
        if self.calibrated:
            parts.append(f"{len(self.calibrated)} calibrated ({self._choices()})")
            if self._uncalibrated():
                parts.append(f"round-to-nearest (not reachable for calibration): {', '.join(self._uncalibrated())}")
        if self.int8:
            parts.append(f"{len(self.int8)} matmul weight(s) int8")
        if self.scanned:
            parts.append(f"{len(self.scanned)} scanned stacked weight(s): {', '.join(self.scanned)}")
        if self.selected:
            parts.append(f"{len(self.selected)} stacked weight(s) indexed per iteration: {', '.join(self.selected)}")
        if self.experts:
            parts.append(f"{len(self.experts)} stacked expert weight(s) {self.kind} per expert: {', '.join(self.experts)}")
        if self.float_experts:
            parts.append(f"{len(self.float_experts)} MoE op(s) float32 (no int4 block of 16 or more divides their "
                         f"sizes, which QMoE needs): {', '.join(self.float_experts)}")
        if self.embeddings:
            parts.append(f"{len(self.embeddings)} embedding table(s) int8")
        if self.embeddings4:
            parts.append(f"{len(self.embeddings4)} embedding table(s) int4")
        if self.convs:
            parts.append(f"{len(self.convs)} convolution kernel(s) int8")
        if self.addends:
            parts.append(f"{len(self.addends)} added constant(s) int8")
        if self.excluded:
            parts.append(f"{len(self.excluded)} excluded (float32): {', '.join(self.excluded)}")
        return "; ".join(parts)


#: ops between the LM head and the graph output it writes
_TO_OUTPUT_OPS = frozenset({"Reshape", "Transpose", "Identity", "Squeeze", "Unsqueeze", "Cast", "Add"})


def _output_layers(graph: ir.Graph) -> set[int]:
    """ids of the MatMul/Gemm nodes whose result is a graph output (through reshapes, casts and a
    bias ``Add``): the layer whose every output value is read, an LM's head."""
    heads: set[int] = set()
    for out in graph.outputs:
        v: ir.Value | None = out
        for _ in range(16):
            node = v.producer() if v is not None else None
            if node is None or node.domain not in ("", "ai.onnx"):
                break
            if node.op_type in ("MatMul", "Gemm"):
                heads.add(id(node))
                break
            if node.op_type not in _TO_OUTPUT_OPS:
                break
            v = next((x for x in node.inputs if x is not None and x.const_value is None
                      and (x.producer() is None or x.producer().op_type != "Constant")), None)
    return heads


def quantize_weight_matmuls(model: ir.Model, p: Precision) -> QuantizeResult:
    main = model.graph
    names = FreshNames(model)
    graphs = list(all_graphs(model))
    sites: list[tuple[Site, WeightMatmul]] = []
    embeddings: list[Site] = []
    convs: list[Site] = []
    addends: list[tuple[Site, int]] = []
    scans: list[Site] = []
    selected: list[tuple[Site, WeightMatmul, list[ir.Node]]] = []
    experts: list[tuple[Site, Any]] = []  # MoE ops (→ QMoE) and MatMuls/Einsums of stacked expert weights
    blocked_dq = model.opset_imports.get("", model.opset_imports.get("ai.onnx", 23)) >= 21  # the stacked weights' DequantizeLinear blocks
    for g in graphs:
        for node in g:
            site = Site(node, g, main, names)
            m = find_weight_matmul(node, main)
            if m is not None:
                sites.append((site, m))
            elif (chosen := selected_weight(node, main)) is not None:
                selected.append((site, *chosen))
            elif is_moe(node) and (pair := moe_weights(node, main)) is not None:
                experts.append((site, pair))
            elif blocked_dq and (stacked := stacked_matmul_weight(node, main)) is not None:
                experts.append((site, stacked))
            elif p.embedding_kind() is not None and is_embedding(node, main):
                embeddings.append(site)
            elif p.conv == "int8" and is_conv(node, main):
                convs.append(site)
            elif p.conv == "int8" and (k := addend_slot(node, main)) is not None:
                addends.append((site, k))
            if node.op_type == "Scan" and node.domain in ("", "ai.onnx"):
                scans.append(site)
    has_embedding = any(is_embedding(node, main) for g in graphs for node in g)
    heads = _output_layers(main) if p.kind == "int4" and p.lm_head == "int8" and has_embedding else set()
    result = QuantizeResult(p.kind)
    counter = [0]

    def bits_of(m: WeightMatmul) -> int:
        if p.kind == "int8" or any(matches_any(n, p.int8) for n in m.weight.sources) or id(m.node) in heads:
            return 8
        return 4

    chosen = _calibration(model, p, [(site, m) for site, m in sites if site.owner is main and bits_of(m) == 4
                                     and not any(matches_any(n, p.exclude) for n in m.weight.sources)],
                          [site for site in scans if site.owner is main], selected)
    result.method = p.int4_method()
    result.choices = chosen.choices
    for site, m in sites:
        name = m.weight.name
        if any(matches_any(n, p.exclude) for n in m.weight.sources):
            result.excluded.append(name)
            continue
        counter[0] += 1
        if bits_of(m) == 4:
            blocks = chosen.matmuls.get(id(m.node))
            to_int4(site, m, p, counter[0], None if blocks is None else (lambda w, blocks=blocks: blocks))
            result.int4.append(name)
            if blocks is not None or id(m.node) in chosen.rounded:
                result.calibrated.append(name)
        else:
            to_int8(site, m, p, counter[0])
            result.int8.append(name)
        use_ms_domain(site.owner)
    for site in scans:
        layers = {key[1]: blocks for key, blocks in chosen.stacked.items()
                  if isinstance(key, tuple) and key[0] == id(site.node)}
        for label in quantize_scanned_weights(site, p, counter, layers):
            result.scanned.append(label)
            if label.split(" (")[0] in chosen.stacked_names:
                result.calibrated.append(label.split(" (")[0])
            use_ms_domain(site.owner)
    for site, m, chain in selected:
        if any(matches_any(n, p.exclude) for n in m.weight.sources):
            result.excluded.append(m.weight.name)
            continue
        counter[0] += 1
        result.selected.append(quantize_selected_weight(site, m, chain, p, counter[0], chosen.stacked.get(id(m.node))))
        if id(m.node) in chosen.stacked:
            result.calibrated.append(m.weight.name)
    for site, found in experts:
        sources = [n for w in (found if isinstance(found, tuple) else (found,)) for n in w.sources]
        label = found[0].name if isinstance(found, tuple) else found.name
        if any(matches_any(n, p.exclude) for n in sources):
            result.excluded.append(label)
            continue
        counter[0] += 1
        if not isinstance(found, tuple):
            to_int4_stacked(site, found, p, counter[0])
            result.experts.append(label)
        elif to_qmoe(site, found, p, counter[0]):
            result.experts.append(f"{label} (QMoE)")
        else:
            result.float_experts.append(site.node.name or label)
    for site in embeddings:
        table = as_weight(site.node.inputs[0], main)
        if any(matches_any(n, p.exclude) for n in table.sources):
            result.excluded.append(table.name)
            continue
        counter[0] += 1
        if p.embedding_kind() == "int4" and table.shape[1] % p.block_size == 0:
            embedding_int4(site, table, p, counter[0])
            result.embeddings4.append(table.name)
        else:
            embedding_int8(site, table, counter[0])
            result.embeddings.append(table.name)
    for site in convs:
        kernel = as_weight(site.node.inputs[1], main, ndim=None)
        if any(matches_any(n, p.exclude) for n in kernel.sources):
            result.excluded.append(kernel.name)
            continue
        dequantized_input(site, 1, kernel, axis=0)
        result.convs.append(kernel.name)
    for site, k in addends:
        const = as_weight(site.node.inputs[k], main, ndim=None)
        if any(matches_any(n, p.exclude) for n in const.sources):
            result.excluded.append(const.name)
            continue
        dequantized_input(site, k, const, axis=len(const.shape) - 1)
        result.addends.append(const.name)
    if not (result.int4 or result.int8 or result.embeddings or result.embeddings4 or result.convs or result.scanned
            or result.selected or result.experts):
        if result.excluded:
            raise PrecisionError(f"precision={p.kind!r}: exclude={list(p.exclude)!r} excludes every weight matmul of this "
                                 "model, so nothing would be quantized; narrow the patterns")
        if result.float_experts:
            raise PrecisionError(f"precision={p.kind!r}: the only weights are MoE experts ({', '.join(result.float_experts)}) "
                                 "whose sizes no int4 block of 16 or more divides, which QMoE needs; use hidden and "
                                 "intermediate sizes that are multiples of 16, or precision='float16'")
        low = any(node.op_type in ("MatMul", "Gemm") and any(
            v is not None and v.type is not None and v.dtype in (ir.DataType.FLOAT16, ir.DataType.BFLOAT16)
            for v in (*node.inputs, *(x for i in node.inputs if i is not None and i.producer() is not None
                                       for x in i.producer().inputs)))
            for g in graphs for node in g)
        why = ("its matmuls compute in float16/bfloat16 as traced (flax dtype=, a Keras mixed policy): export it as "
               "traced with precision='float32'" if low else
               "export it with precision='float16' or 'bfloat16' to make it smaller")
        raise PrecisionError(f"precision={p.kind!r} quantizes weight matmuls and convolutions (MatMul/Gemm/Conv with a "
                             f"constant float32 weight), and this model has none; {why}")
    if any(node.domain == MS_DOMAIN for g in all_graphs(model) for node in g):  # the contrib forms only
        model.opset_imports.setdefault(MS_DOMAIN, 1)
    return result


def _calibration(model: ir.Model, p: Precision, reachable: list[tuple[Site, WeightMatmul]],
                 scans: list[Site], selected: list[tuple[Site, WeightMatmul, list[ir.Node]]]) -> Calibrated:
    """The calibrated blocks of the main-graph int4 matmuls and of the int4 stacked weights a
    main-graph Scan slices or a main-graph Loop's body indexes (none without calibration data),
    chosen layer by layer before any weight is rewritten (:func:`.calibration.calibrate`)."""
    if not p.calibration:
        return Calibrated()
    main = model.graph
    sites = []
    for site, m in reachable:
        if not m.a.name:
            m.a.name = site.names("calibration_input")
        sites.append(MatmulSite(m.node, m.a, m.weight.name, m.weight.load, m.transposed, weight_kn(m)[0]))
    stacks = []
    for site in scans:
        n_scan = attribute_value(site.node, "num_scan_inputs", 0)
        directions = list(attribute_value(site.node, "scan_input_directions", None) or [0] * n_scan)
        for j, slot, stacked, m in scanned_matmuls(site, p):
            if stacked_bits(stacked, p) == 4:
                if not m.a.name:
                    m.a.name = site.names("calibration_input")
                stacks.append(StackedSite(site.node, slot, m.a, stacked.name, stacked.load, m.transposed,
                                          weight_kn(m)[0], stacked.shape[0], (id(site.node), slot),
                                          reverse=bool(directions[j])))
    loops = {id(node.attributes["body"].value): node for node in main
             if node.op_type in ("Loop", "Scan") and node.domain in ("", "ai.onnx")}
    for site, m, chain in selected:
        loop = loops.get(id(site.owner))
        w = m.weight
        source = chain[0].inputs[0]
        if (loop is None or stacked_bits(w, p) != 4 or any(matches_any(n, p.exclude) for n in w.sources)
                or main.initializers.get(source.name) is not source):  # a main-graph initializer, read as it is
            continue
        if not m.a.name:
            m.a.name = site.names("calibration_input")
        stacks.append(StackedSite(loop, None, m.a, w.name, w.load, m.transposed, weight_kn(m)[0], w.shape[0],
                                  id(m.node), index=chain[0].inputs[1]))
    return calibrate(model, p, sites, stacks)


__all__ = ["QuantizeResult", "quantize_weight_matmuls"]
