"""Testcases as data, and the runner that checks them against JAX in onnxruntime."""

from .runner import CaseResult, Variant, run_variant, variants_of
from .testcase import Component, Testcase
from .values import channels_last_with_nan

__all__ = ["CaseResult", "Component", "Testcase", "Variant", "channels_last_with_nan", "run_variant", "variants_of"]
