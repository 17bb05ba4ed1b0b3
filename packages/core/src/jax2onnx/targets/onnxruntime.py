"""``target="onnxruntime"``: standard ONNX plus onnxruntime's contrib ops (domain ``com.microsoft``)
where they measured at least as fast (the rules: :mod:`jax2onnx.passes.rewrite.onnxruntime`; packs
ask ``ctx.target.allows(op, MS_DOMAIN)`` before writing one)."""

from __future__ import annotations

from ..passes.rewrite.onnxruntime import OnnxRuntimeContribOps
from .base import MS_DOMAIN, STANDARD_DOMAINS, Target, register_target

ONNXRUNTIME = register_target(Target(
    name="onnxruntime",
    summary="onnxruntime, with its com.microsoft contrib ops",
    domains=STANDARD_DOMAINS | {MS_DOMAIN},
    rewrites=(OnnxRuntimeContribOps,),
    precision_forms={"int8": "MatMulNBits", "int8 dynamic": "DynamicQuantizeMatMul", "int4": "MatMulNBits"},
))
