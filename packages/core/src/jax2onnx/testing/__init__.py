"""Testcases as data, the runner that checks them against JAX in onnxruntime, and what a pack's own
tests check its loading with (``PluginRegistry().describe()``, ``PackLoadWarning``), and
:func:`built_once` for a fixture's export or training made once per session, not once per xdist worker."""

from ..lower.registry import PackLoadWarning, PluginRegistry
from .budgets import assert_within_budget, param_dtype
from .runner import CaseResult, Variant, run_variant, variants_of
from .shared import built_once, xdist_session_folder
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
    "built_once",
    "channels_last_with_nan",
    "param_dtype",
    "run_variant",
    "variants_of",
    "xdist_session_folder",
]
