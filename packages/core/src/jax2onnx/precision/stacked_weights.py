"""Stacked layer weights ``[L, K, N]`` read one layer at a time: scanned by a ``Scan`` (``lax.scan`` /
``nnx.scan`` over layers) or picked by a ``Loop`` body's run-time index (``w[i]`` in a
``lax.fori_loop``). Each layer is quantized on its own, the parts stacked on axis 0 and read the
way the float32 weight was, so no float32 copy stays."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from ..ir.constants import constant_ints
from ..targets.precision_forms import WeightMatmulForm, weight_form
from .options import Precision
from .quantized_ops import replace_matmul, use_ms_domain, weight_kn
from .weight_sites import (
    F32,
    Site,
    Weight,
    WeightMatmul,
    as_weight,
    attribute_value,
    matches_any,
    matmul_view,
    part_values,
)


def scanned_matmuls(site: Site, p: Precision) -> list[tuple[int, int, Weight, WeightMatmul]]:
    """The scanned inputs ``[L, K, N]`` of ``site.node`` (a Scan) whose slice the body reads only
    as a weight matmul's weight: (scan input index, node input slot, stacked weight, body matmul) each."""
    scan = site.node
    body = scan.attributes["body"].value
    n_scan = attribute_value(scan, "num_scan_inputs", 0)
    n_state = len(scan.inputs) - n_scan
    axes = list(attribute_value(scan, "scan_input_axes", None) or [0] * n_scan)
    found = []
    for j in range(n_scan):
        slot = n_state + j
        if axes[j] != 0 or slot >= len(body.inputs):
            continue
        stacked = as_weight(scan.inputs[slot], site.main, ndim=3)
        uses = list(body.inputs[slot].uses())
        if stacked is None or len(uses) != 1 or any(matches_any(n, p.exclude) for n in stacked.sources):
            continue
        m = _scanned_matmul(*uses[0], stacked)
        if m is not None:
            found.append((j, slot, stacked, m))
    return found


def stacked_form(stacked: Weight, p: Precision) -> WeightMatmulForm:
    """The form a stacked weight is stored in: the int4 form, or the int8 one under int8, for int8
    patterns, and where the int4 form's codes are not sliceable (4-bit tensors onnxruntime's
    Scan/Gather cannot slice)."""
    if p.kind == "int4" and not any(matches_any(n, p.int8) for n in stacked.sources):
        int4 = weight_form("int4", p.int4_kernel)
        if int4.sliceable:
            return int4
    return weight_form("int8", p.int8_kernel, p.activations)


def stacked_bits(stacked: Weight, p: Precision) -> int:
    """4, or 8 where the stacked weight is stored int8 (:func:`stacked_form`)."""
    return 4 if stacked_form(stacked, p).kind == "int4" else 8


def quantize_scanned_weights(site: Site, p: Precision, counter: list[int],
                             calibrated: dict[int, list[tuple[np.ndarray, ...]]] | None = None) -> list[str]:
    """Each scanned input ``[L, K, N]`` of ``site.node`` (a Scan) whose slice the body reads only
    as a weight matmul's weight becomes stacked codes (in its slot) and stacked scales (and zero
    points), appended as scan inputs; the body's matmul reads the slices. ``calibrated``: input
    slot → each layer's chosen int4 blocks (:mod:`.calibration`). Returns the weights done."""
    scan = site.node
    body = scan.attributes["body"].value
    n_scan = attribute_value(scan, "num_scan_inputs", 0)
    axes = list(attribute_value(scan, "scan_input_axes", None) or [0] * n_scan)
    directions = list(attribute_value(scan, "scan_input_directions", None) or [0] * n_scan)
    done: list[str] = []
    inputs = list(scan.inputs)  # the new Scan's: codes in the weights' slots, scales (zero points) appended
    for j, slot, stacked, m in scanned_matmuls(site, p):
        slice_ = body.inputs[slot]
        user = m.node
        L = stacked.shape[0]
        counter[0] += 1
        form, specs, parts = _stacked_parts(site, stacked, m, p, (calibrated or {}).get(slot))
        slices = []
        for q, (suffix, dtype, shape) in enumerate(specs):
            if q == 0:  # the codes take the float32 weight's slot; its slice is retyped
                inputs[slot] = parts[0]
                slice_.type, slice_.shape = ir.TensorType(dtype), ir.Shape(list(shape))
                slices.append(slice_)
                continue
            # a new scanned input: appended after the others, in the node and in the body
            inputs.append(parts[q])
            new = ir.Value(name=site.names(f"{slice_.name}_{suffix}"), type=ir.TensorType(dtype), shape=ir.Shape(list(shape)))
            body.inputs.append(new)
            axes.append(0)
            directions.append(directions[j])
            slices.append(new)
        n_scan += len(specs) - 1
        _layer_matmul(Site(user, body, site.main, site.names), m, slices, form, p, counter[0])
        done.append(f"{stacked.name} ({form.kind}, {L} layers)")
    if done:  # a new Scan node (onnx_ir before 0.1.13 cannot add inputs to a node), same body
        attrs = {**scan.attributes, "num_scan_inputs": ir.AttrInt64("num_scan_inputs", n_scan),
                 "scan_input_axes": ir.AttrInt64s("scan_input_axes", axes),
                 "scan_input_directions": ir.AttrInt64s("scan_input_directions", directions)}
        new = ir.Node(scan.domain, scan.op_type, inputs, list(attrs.values()), num_outputs=len(scan.outputs),
                      name=scan.name)
        for old_out, new_out in zip(scan.outputs, new.outputs):
            new_out.type, new_out.shape = old_out.type, old_out.shape
        ir.convenience.replace_nodes_and_values(site.owner, scan, [scan], [new], list(scan.outputs), list(new.outputs))
    return done


def _stacked_parts(site: Site, stacked: Weight, m: WeightMatmul, p: Precision,
                   calibrated: list[tuple[np.ndarray, ...]] | None = None
                   ) -> tuple[WeightMatmulForm, list[tuple[str, ir.DataType, tuple[int, ...]]], list[ir.Value]]:
    """The quantized parts of a stacked ``[L, K, N]`` weight, each layer quantized on its own (or
    written from its ``calibrated`` blocks) and the parts stacked on axis 0: (bits, one layer's
    part specs, the stacked part values)."""
    K, N = weight_kn(m)
    form = stacked_form(stacked, p)
    specs = form.parts(K, N, p)
    one = form.quantizer(K, p)

    def layer_parts(w: np.ndarray, layer: int) -> tuple[np.ndarray, ...]:
        if form.kind == "int4" and calibrated is not None:  # chosen int4 blocks (an int8 weight has none)
            return form.packer(p)(*calibrated[layer])
        return one(np.ascontiguousarray(w[layer].T if m.transposed else w[layer]))

    def per_layer(w: np.ndarray, n: int = len(specs)) -> tuple[np.ndarray, ...]:
        layers = [layer_parts(w, layer)[:n] for layer in range(w.shape[0])]
        return tuple(np.stack([parts[q] for parts in layers]) for q in range(n))

    stacked_specs = [(suffix, dtype, (stacked.shape[0], *shape)) for suffix, dtype, shape in specs]
    return form, specs, part_values(site, stacked, per_layer, stacked_specs)


def _layer_matmul(body_site: Site, m: WeightMatmul, slices: list[ir.Value], form: WeightMatmulForm, p: Precision,
                  k: int) -> None:
    """``m`` (in a body) replaced by the quantized matmul of one layer's parts ``slices``."""
    K, N = weight_kn(m)
    nodes = form.matmul(body_site, m.a, slices, m.bias, K, N, p, k)
    replace_matmul(body_site, m, nodes, nodes[-1].outputs[0])
    use_ms_domain(body_site.owner)


def _scanned_matmul(node: ir.Node, i: int, stacked: Weight) -> WeightMatmul | None:
    """``node`` as a weight matmul whose weight (input ``i == 1``) is a slice of ``stacked``."""
    if i != 1 or node.domain not in ("", "ai.onnx") or node.op_type not in ("MatMul", "Gemm"):
        return None
    a = node.inputs[0]
    if a is None or a.type is None or a.dtype != F32 or (a.shape is not None and len(a.shape) < 2):
        return None
    return matmul_view(node, stacked)


def selected_weight(node: ir.Node, main: ir.Graph) -> tuple[WeightMatmul, list[ir.Node]] | None:
    """``node`` (a MatMul/Gemm) whose weight is one layer of a stacked constant ``[L, K, N]``
    picked at run time, typically by a Loop's iteration number: ``Squeeze(Slice(stacked, i, i + 1,
    axes=[0]), [0])`` (``w[i]``, ``lax.dynamic_slice``) or ``Gather(stacked, i, axis=0)`` with a
    scalar ``i``. Returns the weight matmul (its weight the stacked one) and the selecting nodes.
    The stacked weight and the selected layer must have no other reader: a float32 copy kept for
    another reader would make the model larger, not smaller."""
    if node.domain not in ("", "ai.onnx") or node.op_type not in ("MatMul", "Gemm") or len(node.inputs) < 2:
        return None
    a, w = node.inputs[0], node.inputs[1]
    if a is None or a.type is None or a.dtype != F32 or (a.shape is not None and len(a.shape) < 2):
        return None
    if w is None or w.shape is None or len(w.shape) != 2 or len(list(w.uses())) != 1:
        return None
    select = w.producer()
    if select is None or select.domain not in ("", "ai.onnx"):
        return None
    if select.op_type == "Gather":
        index = select.inputs[1]
        if attribute_value(select, "axis", 0) != 0 or index is None or index.shape is None or len(index.shape) != 0:
            return None
        chain = [select]
    elif select.op_type == "Squeeze" and len(select.inputs) > 1 and constant_ints(select.inputs[1]) == [0]:
        layer = select.inputs[0]
        slice_ = layer.producer() if layer is not None else None
        if (slice_ is None or slice_.op_type != "Slice" or slice_.domain not in ("", "ai.onnx") or len(slice_.inputs) < 4
                or constant_ints(slice_.inputs[3]) != [0] or len(list(layer.uses())) != 1
                or layer.shape is None or layer.shape[0] != 1):
            return None
        if len(slice_.inputs) > 4 and slice_.inputs[4] is not None and constant_ints(slice_.inputs[4]) != [1]:
            return None
        chain = [slice_, select]
    else:
        return None
    source = chain[0].inputs[0]
    if source is None or len(list(source.uses())) != 1:
        return None
    stacked = as_weight(source, main, ndim=3)
    m = matmul_view(node, stacked) if stacked is not None else None
    return None if m is None else (m, chain)


def quantize_selected_weight(site: Site, m: WeightMatmul, chain: list[ir.Node], p: Precision, k: int,
                             calibrated: list[tuple[np.ndarray, ...]] | None = None) -> str:
    """The stacked weight ``m`` reads one layer of becomes stacked codes and scales (and zero
    points), each selected in the body the way the weight was (the same index values), and the
    matmul reads the selected parts. ``calibrated``: each layer's chosen int4 blocks."""
    form, specs, parts = _stacked_parts(site, m.weight, m, p, calibrated)
    slices = []
    for part, (suffix, dtype, shape) in zip(parts, specs):
        name = site.names(f"{m.node.inputs[1].name}_{suffix}")
        out = ir.Value(name=name, type=ir.TensorType(dtype), shape=ir.Shape(list(shape)))
        if chain[0].op_type == "Gather":
            nodes = [ir.Node("", "Gather", [part, chain[0].inputs[1]], [ir.AttrInt64("axis", 0)], outputs=[out],
                             name=f"{name}_gather")]
        else:
            slice_, squeeze = chain
            layer = ir.Value(name=site.names(f"{name}_layer"), type=ir.TensorType(dtype), shape=ir.Shape([1, *shape]))
            nodes = [ir.Node("", "Slice", [part, *slice_.inputs[1:]], outputs=[layer], name=f"{layer.name}_slice"),
                     ir.Node("", "Squeeze", [layer, squeeze.inputs[1]], outputs=[out], name=f"{name}_squeeze")]
        for node in nodes:
            site.owner.insert_before(site.node, node)
        slices.append(out)
    _layer_matmul(site, m, slices, form, p, k)
    return f"{m.weight.name} ({form.kind}, {m.weight.shape[0]} layers)"

