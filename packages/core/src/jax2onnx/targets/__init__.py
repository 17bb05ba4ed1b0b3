"""Export targets as objects, one folder each: ``onnx`` (default), ``onnxruntime``, ``tensorrt``,
``web``, and those packs register (the interface: :mod:`.base`; precision forms:
:mod:`.precision_forms`)."""

from __future__ import annotations

from .base import (
    CPU_PROVIDER,
    DEFAULT_TARGET,
    MS_DOMAIN,
    STANDARD_DOMAINS,
    Target,
    available_targets,
    default_target,
    find_target,
    get_target,
    register_rewrite,
    register_target,
    target_names,
)

__all__ = ["CPU_PROVIDER", "DEFAULT_TARGET", "MS_DOMAIN", "STANDARD_DOMAINS", "Target", "available_targets",
           "default_target", "find_target", "get_target", "register_rewrite", "register_target", "target_names"]
