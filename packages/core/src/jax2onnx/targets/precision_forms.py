"""The forms a ``precision=`` kind takes on a runtime, one small class each (a target lists the
ones it runs: ``Target.precision_forms``).

A form says which precision kind it serves (``"int8"``, ``"int4"``, ``"float16"``, ...), the
kernel its weight matmuls are written as (the value of ``Precision.int8_kernel`` /
``int4_kernel``; None for the float kinds, which take the same ops everywhere), the op domain that
kernel lives in, the lowest opset that has it, and whether it quantizes the activations at run
time (``activations="dynamic"``); a target may list only forms whose domain it runs
(:func:`jax2onnx.targets.register_target` checks). Every subclass registers itself (:func:`known_forms`), so ``Precision``
checks a named kernel against the forms that exist and a new form (a static QDQ form) is one more
class, listed by the target that runs it.

The forms are the strategy the precision stage runs, its one source of truth: a weight-matmul form
(:class:`WeightMatmulForm`: int8 and int4) says how a weight is stored (its parts and their
quantizers, in :mod:`.weight_layouts`) and writes the matmul's nodes; the stage finds the form a
fitted ``Precision`` names (:func:`weight_form`) and asks it, comparing no kernel names. A form
that is a precision kind of its own (static QDQ) rewrites the whole graph (``apply``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np
import onnx_ir as ir

from .weight_layouts import int4_blocks, int4_dq_blocks, int4_dq_packed, int4_packed, int8_blocks, int8_per_column

#: onnxruntime's contrib ops (the domain the com.microsoft forms write).
MS_DOMAIN = "com.microsoft"
F32 = ir.DataType.FLOAT

_FORMS: list[type[PrecisionForm]] = []


class PrecisionForm:
    """One form of one precision kind (see the module doc). Subclasses set the class attributes."""

    #: the ``precision=`` kind it serves
    kind: ClassVar[str] = ""
    #: the kernel its weight matmuls are written as (``Precision.<kind>_kernel``), None: no choice
    kernel: ClassVar[str | None] = None
    #: the op domain of ``kernel`` ("" standard)
    domain: ClassVar[str] = ""
    #: the lowest default-domain opset that has the form
    min_opset: ClassVar[int] = 0
    #: ``"dynamic"`` for a form that quantizes activations at run time, else None (weight-only)
    activations: ClassVar[str | None] = None
    #: a few words for errors and docs
    about: ClassVar[str] = ""
    #: True for a form that is a precision kind of its own, rewriting the graph itself in the
    #: precision stage (a target's own kind, such as static QDQ: ``check``, ``apply``, ``describe``)
    own_stage: ClassVar[bool] = False

    def check(self, precision: Any, enable_double_precision: bool) -> Any:
        """``precision`` (of this form's kind, its calibration batches already checked) with every
        other field checked once and the defaults filled; raises
        :class:`jax2onnx.errors.PrecisionError` naming the field and the fix."""
        return precision

    def apply(self, model: Any, precision: Any, ranges: Any) -> str:
        """Rewrite ``model`` (onnx_ir, shapes inferred) in place; returns what was done, one line.
        ``ranges(model, names, batches) -> ({name: (min, max)}, data)``: the precision stage's
        calibration runner (:func:`jax2onnx.precision.ranges.tensor_ranges`)."""
        raise NotImplementedError(f"{type(self).__name__} has no stage of its own")

    def describe(self, precision: Any) -> str:
        """One line for the report and the model's metadata."""
        return str(precision.kind)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.kind:
            _FORMS.append(cls)

    def __repr__(self) -> str:
        return type(self).__name__

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other)

    def __hash__(self) -> int:
        return hash(type(self))


def known_forms(kind: str | None = None) -> list[type[PrecisionForm]]:
    """Every form class defined (of ``kind``), in definition order."""
    return [f for f in _FORMS if kind is None or f.kind == kind]


def kernel_names(kind: str, activations: str | None | type[Ellipsis] = ...) -> tuple[str, ...]:
    """The kernel names ``Precision.<kind>_kernel`` takes (those of ``activations`` where given)."""
    names = [f.kernel for f in known_forms(kind)
             if f.kernel is not None and (activations is ... or f.activations == activations)]
    return tuple(dict.fromkeys(names))


class Float16(PrecisionForm):
    kind = "float16"
    about = "float16 weights and compute"


class BFloat16(PrecisionForm):
    kind = "bfloat16"
    about = "bfloat16 weights, computed where kernels exist"


class WeightMatmulForm(PrecisionForm):
    """A form of the weight matmuls (int8, int4): the precision stage asks it how a ``[K, N]``
    weight is stored (:meth:`parts`, :meth:`quantizer`, :meth:`packer`) and which nodes compute the
    matmul (:meth:`matmul`); it keeps no kernel names of its own. ``site`` is the precision stage's
    place of the rewrite (``names(base)`` a fresh name, ``owner`` the graph or function, ``main``
    the main graph); ``p`` the fitted :class:`jax2onnx.Precision`."""

    #: its kernel takes MatMulNBits' ``accuracy_level`` (``Precision.accuracy_level``; ``"auto"``
    #: measured per node, :mod:`jax2onnx.precision.accuracy_levels`)
    accuracy_levels: ClassVar[bool] = False
    #: its codes are bytes that onnxruntime's Scan and Gather slice; False for 4-bit tensors (a stacked
    #: weight is then stored int8, and an embedding table is not gathered 4-bit)
    sliceable: ClassVar[bool] = True
    #: the (domain, op) that gathers an int4 embedding table stored in its blocks; None: tables are
    #: int8 rows under this form (``Target.fit_precision`` makes them int8 on a target not running it)
    embedding_op: ClassVar[tuple[str, str] | None] = None

    @property
    def int4_embeddings(self) -> bool:
        """Whether an int4 embedding table may be stored in its blocks (``embedding_op``)."""
        return self.embedding_op is not None

    def parts(self, K: int, N: int, p: Any) -> list[tuple[str, ir.DataType, tuple[int, ...]]]:
        """The stored parts of a ``[K, N]`` weight: (suffix, dtype, shape) each (here: int8 codes
        ``[K, N]`` with a float32 scale per column, the standard int8 forms' layout)."""
        return [("q8", ir.DataType.INT8, (K, N)), ("scales", F32, (N,))]

    def quantizer(self, K: int, p: Any) -> Callable[[np.ndarray], tuple[np.ndarray, ...]]:
        """``[K, N]`` weight → its parts, rounded to nearest."""
        return int8_per_column

    def packer(self, p: Any) -> Callable[..., tuple[np.ndarray, ...]]:
        """``(codes [K, N], scales, zero points [blocks, N])`` chosen by a calibrated method → its
        parts (int4 forms only)."""
        raise NotImplementedError(f"{type(self).__name__} stores no calibrated blocks")

    def matmul(self, site: Any, a: ir.Value, parts: list[ir.Value], bias: ir.Value | None, K: int, N: int, p: Any,
               k: int) -> list[ir.Node]:
        """The nodes of ``a @ weight (+ bias)`` from the weight's ``parts``; the last writes it."""
        raise NotImplementedError


def outside_bodies(site: Any, widen: ir.Node) -> list[ir.Node]:
    """``widen`` (the ``DequantizeLinear`` of a weight's parts) placed where onnxruntime can run it:
    a control-flow body reading main-graph initializers gets their float32 weight from the main
    graph (onnxruntime 1.32 fuses a body's DequantizeLinear + MatMul into MatMulNBits and then fails
    the session on the outer-scope weight: "Missing required weight"); returns the nodes to place
    before the MatMul (none when moved)."""
    main = site.main
    if site.owner is main or isinstance(site.owner, ir.Function):
        return [widen]
    if not all(v is None or main.initializers.get(v.name) is v for v in widen.inputs):
        return [widen]  # a body's own constants (or slices of them): fused in place
    main.insert_before(next(iter(main)), widen)
    return []


def _widened_matmul(site: Any, a: ir.Value, widen: ir.Node, bias: ir.Value | None, name: str) -> list[ir.Node]:
    """``MatMul(a, widen's float32 weight)`` (+ ``bias``), the widening placed by :func:`outside_bodies`."""
    nodes = [*outside_bodies(site, widen), ir.Node("", "MatMul", [a, widen.outputs[0]], outputs=[ir.Value(name=name)],
                                                   name=name)]
    if bias is not None:
        nodes.append(ir.Node("", "Add", [nodes[-1].outputs[0], bias], outputs=[ir.Value(name=f"{name}_b")],
                             name=f"{name}_bias"))
    return nodes


def _matmul_nbits(a: ir.Value, parts: list[ir.Value], bias: ir.Value | None, attrs: list[ir.Attr],
                  name: str) -> list[ir.Node]:
    inputs: list[ir.Value | None] = [a, *parts]
    if bias is not None:
        inputs += [None] * (5 - len(inputs)) + [bias]
    return [ir.Node(MS_DOMAIN, "MatMulNBits", inputs, attrs, outputs=[ir.Value(name=name)], name=name)]


#: 8-bit MatMulNBits' block along K: a float32 scale per 128 codes keeps an int8 model near 0.26x
#: float32's bytes (blocks of 32 would make it 0.28x); a narrower weight is one block
INT8_BLOCK_SIZE = 128
#: 8-bit MatMulNBits' accuracy_level: 4, the one onnxruntime (1.32) gives the standard form it fuses
#: (DequantizeLinear + MatMul) and the only fast one on its CPU: the activations are rounded to int8
#: inside the kernel per block of K (1 computes in float32 but dequantizes the weight on every call,
#: 16-32x slower than float32 for one token; bench/results/precision.md)
INT8_ACCURACY_LEVEL = 4


def int8_block_size(K: int) -> int:
    """8-bit MatMulNBits' block for a ``K``-long contraction: :data:`INT8_BLOCK_SIZE`, or for a
    narrower weight ``K`` rounded up to a power of two (16 at least, MatMulNBits' smallest)."""
    return min(INT8_BLOCK_SIZE, max(16, 1 << (K - 1).bit_length()))


class Int8MatMulNBits(WeightMatmulForm):
    kind, kernel, domain = "int8", "MatMulNBits", MS_DOMAIN
    about = "onnxruntime's 8-bit MatMulNBits, weight-only"

    def parts(self, K: int, N: int, p: Any) -> list[tuple[str, ir.DataType, tuple[int, ...]]]:
        block = int8_block_size(K)  # uint8 [N, blocks, block]: symmetric codes + 128, scales [N, blocks]
        return [("q8", ir.DataType.UINT8, (N, -(-K // block), block)), ("scales", F32, (N, -(-K // block)))]

    def quantizer(self, K: int, p: Any) -> Callable[[np.ndarray], tuple[np.ndarray, ...]]:
        return functools.partial(int8_blocks, block_size=int8_block_size(K))

    def matmul(self, site: Any, a: ir.Value, parts: list[ir.Value], bias: ir.Value | None, K: int, N: int, p: Any,
               k: int) -> list[ir.Node]:
        attrs = [ir.AttrInt64("K", K), ir.AttrInt64("N", N), ir.AttrInt64("bits", 8),
                 ir.AttrInt64("block_size", int8_block_size(K)), ir.AttrInt64("accuracy_level", INT8_ACCURACY_LEVEL)]
        return _matmul_nbits(a, parts, bias, attrs, site.names(f"matmul_q8_{k}"))


class Int8DequantizeLinear(WeightMatmulForm):
    kind, kernel = "int8", "DequantizeLinear"
    about = "per-channel DequantizeLinear + MatMul, weight-only"

    def matmul(self, site: Any, a: ir.Value, parts: list[ir.Value], bias: ir.Value | None, K: int, N: int, p: Any,
               k: int) -> list[ir.Node]:
        name = site.names(f"matmul_q8_{k}")
        weight = ir.Value(name=f"{name}_w", type=ir.TensorType(F32), shape=ir.Shape([K, N]))
        widen = ir.Node("", "DequantizeLinear", parts, [ir.AttrInt64("axis", 1)], outputs=[weight], name=f"{name}_dq")
        return _widened_matmul(site, a, widen, bias, name)


class Int8DynamicQuantizeMatMul(WeightMatmulForm):
    kind, kernel, domain, activations = "int8", "DynamicQuantizeMatMul", MS_DOMAIN, "dynamic"
    about = "onnxruntime's DynamicQuantizeMatMul, activations quantized at run time"

    def matmul(self, site: Any, a: ir.Value, parts: list[ir.Value], bias: ir.Value | None, K: int, N: int, p: Any,
               k: int) -> list[ir.Node]:
        inputs: list[ir.Value | None] = [a, *parts]
        if bias is not None:
            inputs += [None, bias]
        name = site.names(f"matmul_q8_{k}")
        return [ir.Node(MS_DOMAIN, "DynamicQuantizeMatMul", inputs, outputs=[ir.Value(name=name)], name=name)]


class Int8MatMulInteger(WeightMatmulForm):
    kind, kernel, activations = "int8", "MatMulInteger", "dynamic"
    about = "DynamicQuantizeLinear + MatMulInteger, activations quantized at run time"

    def matmul(self, site: Any, a: ir.Value, parts: list[ir.Value], bias: ir.Value | None, K: int, N: int, p: Any,
               k: int) -> list[ir.Node]:
        codes, scales = parts

        def v(name: str, dtype: ir.DataType | None = None) -> ir.Value:
            return ir.Value(name=site.names(f"{name}_{k}"), type=ir.TensorType(dtype) if dtype is not None else None)

        quant = ir.Node("", "DynamicQuantizeLinear", [a], outputs=[v("a_q8", ir.DataType.UINT8), v("a_scale", F32),
                                                                    v("a_zero_point", ir.DataType.UINT8)], name=f"a_q8_{k}")
        q, a_scale, a_zp = quant.outputs
        mm = ir.Node("", "MatMulInteger", [q, codes, a_zp], outputs=[v("matmul_i32", ir.DataType.INT32)],
                     name=f"matmul_i32_{k}")
        to_float = ir.Node("", "Cast", [mm.outputs[0]], [ir.AttrInt64("to", int(F32))], outputs=[v("matmul_f32", F32)],
                           name=f"matmul_f32_{k}")
        scale = ir.Node("", "Mul", [a_scale, scales], outputs=[v("matmul_scale", F32)], name=f"matmul_scale_{k}")
        out = ir.Node("", "Mul", [to_float.outputs[0], scale.outputs[0]], outputs=[v("matmul_q8", F32)],
                      name=f"matmul_q8_{k}")
        nodes = [quant, mm, to_float, scale, out]
        if bias is not None:
            nodes.append(ir.Node("", "Add", [out.outputs[0], bias], outputs=[v("matmul_q8_bias", F32)],
                                 name=f"matmul_q8_bias_{k}"))
        return nodes


class Int4MatMulNBits(WeightMatmulForm):
    kind, kernel, domain = "int4", "MatMulNBits", MS_DOMAIN
    about = "onnxruntime's 4-bit MatMulNBits"
    accuracy_levels = True
    embedding_op = (MS_DOMAIN, "GatherBlockQuantized")

    def parts(self, K: int, N: int, p: Any) -> list[tuple[str, ir.DataType, tuple[int, ...]]]:
        blocks = -(-K // p.block_size)
        specs = [("q4", ir.DataType.UINT8, (N, blocks, p.block_size // 2)), ("scales", F32, (N, blocks))]
        if not p.symmetric:
            specs.append(("zero_points", ir.DataType.UINT8, (N, -(-blocks // 2))))
        return specs

    def quantizer(self, K: int, p: Any) -> Callable[[np.ndarray], tuple[np.ndarray, ...]]:
        return functools.partial(int4_blocks, block_size=p.block_size, symmetric=p.symmetric)

    def packer(self, p: Any) -> Callable[..., tuple[np.ndarray, ...]]:
        return functools.partial(int4_packed, block_size=p.block_size, symmetric=p.symmetric)

    def matmul(self, site: Any, a: ir.Value, parts: list[ir.Value], bias: ir.Value | None, K: int, N: int, p: Any,
               k: int) -> list[ir.Node]:
        attrs = [ir.AttrInt64("K", K), ir.AttrInt64("N", N), ir.AttrInt64("bits", 4),
                 ir.AttrInt64("block_size", p.block_size)]
        if p.accuracy_level is not None:  # "auto": 1 until jax2onnx.precision.accuracy_levels measures each node
            attrs.append(ir.AttrInt64("accuracy_level", 1 if p.accuracy_level == "auto" else p.accuracy_level))
        return _matmul_nbits(a, parts, bias, attrs, site.names(f"matmul_q4_{k}"))


class Int4DequantizeLinear(WeightMatmulForm):
    """Standard ONNX int4: uint4 codes ``[K, N]`` widened by one blocked ``DequantizeLinear`` (opset
    21, blocks of ``block_size`` along K), then the ``MatMul`` (+ bias). onnxruntime fuses the pair
    into its MatMulNBits kernel when the session starts (the weight is a constant)."""

    kind, kernel, min_opset = "int4", "DequantizeLinear", 21
    about = "blocked 4-bit DequantizeLinear + MatMul"
    sliceable = False

    def parts(self, K: int, N: int, p: Any) -> list[tuple[str, ir.DataType, tuple[int, ...]]]:
        blocks = -(-K // p.block_size)
        return [("q4", ir.DataType.UINT4, (K, N)), ("scales", F32, (blocks, N)), ("zero_points", ir.DataType.UINT4, (blocks, N))]

    def quantizer(self, K: int, p: Any) -> Callable[[np.ndarray], tuple[np.ndarray, ...]]:
        return functools.partial(int4_dq_blocks, block_size=p.block_size, symmetric=p.symmetric)

    def packer(self, p: Any) -> Callable[..., tuple[np.ndarray, ...]]:
        return int4_dq_packed

    def matmul(self, site: Any, a: ir.Value, parts: list[ir.Value], bias: ir.Value | None, K: int, N: int, p: Any,
               k: int) -> list[ir.Node]:
        name = site.names(f"matmul_q4_{k}")
        weight = ir.Value(name=f"{name}_w", type=ir.TensorType(F32), shape=ir.Shape([K, N]))
        widen = ir.Node("", "DequantizeLinear", parts, [ir.AttrInt64("axis", 0), ir.AttrInt64("block_size", p.block_size)],
                        outputs=[weight], name=f"{name}_dq")
        return _widened_matmul(site, a, widen, bias, name)


#: the contrib ops the forms write that compute in their activations' type: (input slots, output
#: slots) in that type, per low-float kind onnxruntime's CPU and wasm kernels take (float16 both:
#: MatMulNBits' A, scales and bias; GatherBlockQuantized's scales and rows; no bfloat16 kernels)
_FLOAT_SLOTS = {
    (MS_DOMAIN, "MatMulNBits"): (frozenset({0, 2, 5}), frozenset({0}), ("float16",)),
    (MS_DOMAIN, "GatherBlockQuantized"): (frozenset({2}), frozenset({0}), ("float16",)),
}


def float_slots(domain: str, op: str, kind: str) -> tuple[frozenset[int], frozenset[int]] | None:
    """The input and output slots of ``domain::op`` that may take the low float ``kind``, where it
    is an op of the forms that computes in its activations' type (the float16 plan reads it); None:
    the op computes in float32."""
    found = _FLOAT_SLOTS.get((domain, op))
    return None if found is None or kind not in found[2] else found[:2]


def weight_form(kind: str, kernel: str | None, activations: str | None = None) -> WeightMatmulForm:
    """The form of ``kind``'s weight matmuls a :class:`jax2onnx.Precision` names (its fitted
    ``<kind>_kernel``, ``Target.fit_precision``). ``kernel`` None (a Precision no target fitted,
    given to the precision stage directly): the kind's first form quantizing activations as
    ``activations`` says."""
    forms = [f for f in known_forms(kind) if issubclass(f, WeightMatmulForm)]
    found = next((f for f in forms if f.kernel == kernel), None) if kernel is not None else \
        next((f for f in forms if f.activations == activations), None)
    if found is None:
        raise ValueError(f"no {kind} form writes {kernel!r} (known: {', '.join(kernel_names(kind))})")
    return found()


#: the float forms every built-in target runs
FLOAT_FORMS = (Float16(), BFloat16())
#: the standard-ONNX forms: weight-only and dynamic int8, blocked int4 (opset 21)
STANDARD_FORMS = (*FLOAT_FORMS, Int8DequantizeLinear(), Int8MatMulInteger(), Int4DequantizeLinear())

__all__ = ["FLOAT_FORMS", "MS_DOMAIN", "STANDARD_FORMS", "BFloat16", "Float16", "Int4DequantizeLinear",
           "Int4MatMulNBits", "Int8DequantizeLinear", "Int8DynamicQuantizeMatMul", "Int8MatMulInteger",
           "Int8MatMulNBits", "PrecisionForm", "WeightMatmulForm", "float_slots", "kernel_names", "known_forms",
           "outside_bodies", "weight_form"]
