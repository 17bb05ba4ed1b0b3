import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))  # the test-only mini pack lives beside this file

from mini_pack import MiniPack, registry_in_use


@pytest.fixture
def mini_registry():
    """Core alone plus the test-only mini pack, isolated from whatever packs are installed."""
    with registry_in_use(("jax2onnx-mini", MiniPack())) as registry:
        yield registry


@pytest.fixture
def core_only_registry():
    with registry_in_use() as registry:
        yield registry
