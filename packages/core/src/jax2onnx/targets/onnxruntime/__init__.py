"""``target="onnxruntime"``: standard ONNX plus onnxruntime's contrib ops (domain ``com.microsoft``)
where they measured at least as fast.

The folder holds the backend: its rewrite family (:mod:`.rewrites`: the contrib ops, each where
measured), its kernel table (the installed onnxruntime's CPU kernels, :mod:`jax2onnx.ir.runtime`),
its precision forms (MatMulNBits for int8/int4, DynamicQuantizeMatMul for dynamic int8, and the
standard forms when named), its verification runner (the CPU provider). Packs ask
``ctx.target.allows(op, MS_DOMAIN)`` before writing a contrib op, and register the fusions that
write one through :func:`jax2onnx.rewrite.register_rewrite`."""

from __future__ import annotations

from ...ir.runtime import installed
from ..base import STANDARD_DOMAINS, Target, register_target
from ..precision_forms import MS_DOMAIN, STANDARD_FORMS, Int4MatMulNBits, Int8DynamicQuantizeMatMul, Int8MatMulNBits
from .rewrites import OnnxRuntimeContribOps

ONNXRUNTIME = register_target(Target(
    name="onnxruntime",
    summary="onnxruntime, with its com.microsoft contrib ops",
    domains=STANDARD_DOMAINS | {MS_DOMAIN},
    rewrites=(OnnxRuntimeContribOps,),
    precision_forms=(Int8MatMulNBits(), Int8DynamicQuantizeMatMul(), Int4MatMulNBits(), *STANDARD_FORMS),
    kernel_table=installed,  # the installed onnxruntime's CPU kernels, measured (ir/ort_kernels) or probed
    capabilities=frozenset({"genai"}),
))
