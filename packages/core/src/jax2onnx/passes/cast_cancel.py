"""Cast → Cast where the first Cast is exact: read the first Cast's input directly.

``Cast(Cast(x, to=b), to=c)`` equals ``Cast(x, to=c)`` whenever the first Cast keeps every value of
``x``'s type ``a`` (float16 → float32, int8 → float32, bool → anything): the second Cast then
converts the very value the direct one would. When ``c`` is ``a`` the pair is the identity and
the readers take ``x``. A Cast to its input's own type goes the same way. A Cast that narrows
first (float32 → float16 → float32 rounds) is a computation and stays.

Graph outputs keep their names: a Cast that writes one stays a Cast (of the earlier input).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import onnx_ir as ir

from .manager import RewriteToFixedPoint

_BF16 = np.dtype(ml_dtypes.bfloat16)


def exact_cast(a: ir.DataType, b: ir.DataType) -> bool:
    """Every value of type ``a`` is a value of type ``b``."""
    if a == b:
        return True
    try:
        na, nb = np.dtype(a.numpy()), np.dtype(b.numpy())
    except (TypeError, ValueError):
        return False
    if na == _BF16:
        return nb in (np.dtype(np.float32), np.dtype(np.float64))
    if nb == _BF16:  # 8 significant bits: every int8/uint8/bool value
        return na in (np.dtype(np.bool_), np.dtype(np.int8), np.dtype(np.uint8))
    if not (na.kind in "biuf" and nb.kind in "biuf"):
        return False
    return bool(np.can_cast(na, nb, casting="safe"))


def _cast_of(node: ir.Node) -> bool:
    return node.op_type == "Cast" and node.domain in ("", "ai.onnx")


class CastCancelPass(RewriteToFixedPoint):
    def rewrite_once(self, graph: ir.Graph | ir.Function) -> bool:
        outputs = {id(v) for v in graph.outputs}
        for node in graph:
            if not _cast_of(node):
                continue
            x = node.inputs[0]
            out = node.outputs[0]
            if x is None or x.type is None or out.type is None:
                continue
            first = x.producer()
            if first is not None and _cast_of(first) and first.inputs[0] is not None and first.inputs[0].type is not None:
                source = first.inputs[0]
                if exact_cast(source.dtype, x.dtype):
                    node.replace_input_with(0, source)  # the first Cast may now be dead: dead code removes it
                    return True
            if x.dtype == out.dtype and id(out) not in outputs:
                ir.convenience.replace_all_uses_with(out, x)
                graph.remove(node, safe=True)
                return True
        return False


__all__ = ["CastCancelPass", "exact_cast"]
