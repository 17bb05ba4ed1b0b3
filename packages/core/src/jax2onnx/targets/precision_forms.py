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
"""

from __future__ import annotations

from typing import Any, ClassVar

#: onnxruntime's contrib ops (the domain the com.microsoft forms write).
MS_DOMAIN = "com.microsoft"

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


class Int8MatMulNBits(PrecisionForm):
    kind, kernel, domain = "int8", "MatMulNBits", MS_DOMAIN
    about = "onnxruntime's 8-bit MatMulNBits, weight-only"


class Int8DequantizeLinear(PrecisionForm):
    kind, kernel = "int8", "DequantizeLinear"
    about = "per-channel DequantizeLinear + MatMul, weight-only"


class Int8DynamicQuantizeMatMul(PrecisionForm):
    kind, kernel, domain, activations = "int8", "DynamicQuantizeMatMul", MS_DOMAIN, "dynamic"
    about = "onnxruntime's DynamicQuantizeMatMul, activations quantized at run time"


class Int8MatMulInteger(PrecisionForm):
    kind, kernel, activations = "int8", "MatMulInteger", "dynamic"
    about = "DynamicQuantizeLinear + MatMulInteger, activations quantized at run time"


class Int4MatMulNBits(PrecisionForm):
    kind, kernel, domain = "int4", "MatMulNBits", MS_DOMAIN
    about = "onnxruntime's 4-bit MatMulNBits"


class Int4DequantizeLinear(PrecisionForm):
    kind, kernel, min_opset = "int4", "DequantizeLinear", 21
    about = "blocked 4-bit DequantizeLinear + MatMul"


#: the float forms every built-in target runs
FLOAT_FORMS = (Float16(), BFloat16())
#: the standard-ONNX forms: weight-only and dynamic int8, blocked int4 (opset 21)
STANDARD_FORMS = (*FLOAT_FORMS, Int8DequantizeLinear(), Int8MatMulInteger(), Int4DequantizeLinear())

__all__ = ["FLOAT_FORMS", "MS_DOMAIN", "STANDARD_FORMS", "BFloat16", "Float16", "Int4DequantizeLinear",
           "Int4MatMulNBits", "Int8DequantizeLinear", "Int8DynamicQuantizeMatMul", "Int8MatMulInteger",
           "Int8MatMulNBits", "PrecisionForm", "kernel_names", "known_forms"]
