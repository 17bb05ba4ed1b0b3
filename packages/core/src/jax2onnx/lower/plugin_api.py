"""The plugin API version: what a pack was built against, checked when it loads.

A pack declares the version in its plugin module (the module its entry point names)::

    JAX2ONNX_PLUGIN_API = "1.0"

``MAJOR.MINOR``: the major number changes when a hook or the lowering context changes
incompatibly, the minor one when something is added. Core accepts a pack whose major equals
:data:`PLUGIN_API` 's and whose minor is not newer than core's (it may use an addition this core
lacks). A pack that declares nothing is assumed compatible: its dependency range on
``jax2onnx-core`` is then the only statement. An incompatible pack is skipped with a
:class:`~jax2onnx.lower.registry.PackLoadWarning` that says what to upgrade; it never breaks the others.
"""

from __future__ import annotations

import re
from typing import Any

#: The API this core provides, (major, minor).
PLUGIN_API: tuple[int, int] = (1, 0)

#: The module attribute a pack declares its API version in.
ATTRIBUTE = "JAX2ONNX_PLUGIN_API"


def plugin_api_string() -> str:
    return f"{PLUGIN_API[0]}.{PLUGIN_API[1]}"


def _parse(declared: Any) -> tuple[int, int] | None:
    if isinstance(declared, int) and not isinstance(declared, bool):
        return declared, 0
    if isinstance(declared, (tuple, list)) and len(declared) == 2 and all(isinstance(x, int) for x in declared):
        return int(declared[0]), int(declared[1])
    if isinstance(declared, str):
        m = re.fullmatch(r"\s*(\d+)(?:\.(\d+))?\s*", declared)
        if m:
            return int(m.group(1)), int(m.group(2) or 0)
    return None


def declared_api(plugin: Any) -> Any:
    """The version a loaded plugin declares: on the plugin object, else on the module defining it."""
    import sys

    value = getattr(plugin, ATTRIBUTE, None)
    if value is None:
        module = sys.modules.get(getattr(plugin, "__module__", None) or type(plugin).__module__)
        value = getattr(module, ATTRIBUTE, None)
    return value


def check_plugin_api(declared: Any, pack: str) -> str | None:
    """``None`` when a pack declaring ``declared`` works with this core, else the warning to show
    (the pack is then skipped). ``declared=None`` (nothing declared) is accepted."""
    if declared is None:
        return None
    have = plugin_api_string()
    version = _parse(declared)
    if version is None:
        return (
            f"jax2onnx plugin pack '{pack}' declares {ATTRIBUTE} = {declared!r}, which is not a version like "
            f"'{have}'; it is skipped. Its author should declare the plugin API it was built for."
        )
    major, minor = version
    if major != PLUGIN_API[0]:
        newer = major > PLUGIN_API[0]
        fix = "pip install -U jax2onnx-core" if newer else f"pip install -U {pack} (or a jax2onnx-core for plugin API {major}.x)"
        return (
            f"jax2onnx plugin pack '{pack}' was built for plugin API {major}.{minor}, but this jax2onnx-core "
            f"provides {have}: it is skipped. {fix}."
        )
    if minor > PLUGIN_API[1]:
        return (
            f"jax2onnx plugin pack '{pack}' needs plugin API {major}.{minor}, newer than this jax2onnx-core's "
            f"{have}: it is skipped. pip install -U jax2onnx-core."
        )
    return None
