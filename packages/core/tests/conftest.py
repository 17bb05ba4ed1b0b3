import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))  # the test-only mini pack lives beside this file

from jax2onnx.lower.registry import PluginRegistry, set_registry
from mini_pack import MiniPack


@pytest.fixture
def mini_registry():
    """Core alone plus the test-only mini pack, isolated from whatever packs are installed."""
    registry = PluginRegistry(entry_points=[], extra_plugins=[("jax2onnx-mini", MiniPack())])
    previous = set_registry(registry)
    try:
        yield registry
    finally:
        set_registry(previous)


@pytest.fixture
def core_only_registry():
    registry = PluginRegistry(entry_points=[])
    previous = set_registry(registry)
    try:
        yield registry
    finally:
        set_registry(previous)
