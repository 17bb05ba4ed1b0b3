"""The one wrapper the library attention patches share (the front-ends' ``attention.py``
modules): a call the export may fuse becomes a marked region, every other call is the library's own method.

The two libraries differ only in which calls may fuse (Hugging Face: a cached decoding step with no
attention weights asked for; KerasHub: any call inside an export) and in how the region is built;
both are handed in, so the binding of the call and the fallback are written once.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

#: ``(layer, named arguments) -> bool``: may this call become a fused region?
MayFuse = Callable[[Any, dict[str, Any]], bool]
#: ``(layer, the library's method, named arguments) -> outputs``, or None to decline (then the
#: library's own method runs).
Region = Callable[[Any, Callable[..., Any], dict[str, Any]], Any]


def region_patch(may_fuse: MayFuse, region: Region) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A ``Patch`` replacement factory: the patched method binds each call's arguments by the
    library method's own signature (defaults applied, the layer itself left out) and, when
    ``may_fuse`` says so, returns ``region``'s outputs; a declined or ineligible call runs the
    library's method with the arguments exactly as given."""

    def make(original: Callable[..., Any]) -> Callable[..., Any]:
        signature = inspect.signature(original)
        layer_arg = next(iter(signature.parameters))  # ``self``

        def patched(self: Any, *args: Any, **kwargs: Any) -> Any:
            bound = signature.bind(self, *args, **kwargs)
            bound.apply_defaults()
            named = dict(bound.arguments)
            named.pop(layer_arg, None)
            if may_fuse(self, named):
                out = region(self, original, named)
                if out is not None:
                    return out
            return original(self, *args, **kwargs)

        return patched

    return make


__all__ = ["MayFuse", "Region", "region_patch"]
