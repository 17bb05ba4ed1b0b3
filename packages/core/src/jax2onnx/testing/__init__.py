"""Testcases as data, and the runner that checks them against JAX in onnxruntime."""

from .runner import CaseResult, Variant, run_variant, variants_of
from .testcase import Component, Testcase

__all__ = ["CaseResult", "Component", "Testcase", "Variant", "run_variant", "variants_of"]
