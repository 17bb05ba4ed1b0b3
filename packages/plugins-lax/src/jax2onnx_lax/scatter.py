"""lax scatter lowerings (to be filled)."""

from __future__ import annotations

from jax2onnx.plugin import Lowerings
from jax2onnx.testing import Component

lowerings = Lowerings()
components: list[Component] = []
