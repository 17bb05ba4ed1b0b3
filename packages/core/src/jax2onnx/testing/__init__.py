"""Testcases as data, the runner that checks them against JAX in onnxruntime, and what a pack's own
tests check its loading with (``PluginRegistry().describe()``, ``PackLoadWarning``)."""

from ..lower.registry import PackLoadWarning, PluginRegistry
from .budgets import assert_within_budget, param_dtype
from .runner import CaseResult, Variant, run_variant, variants_of
from .testcase import Component, Testcase
from .values import channels_last_with_nan

__all__ = [
    "CaseResult",
    "PackLoadWarning",
    "PluginRegistry",
    "Component",
    "Testcase",
    "Variant",
    "assert_within_budget",
    "channels_last_with_nan",
    "param_dtype",
    "run_variant",
    "variants_of",
]
