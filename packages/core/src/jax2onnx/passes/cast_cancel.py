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


#: significant bits of each float type: an integer type of at most this many value bits fits
_MANTISSA = {"float16": 11, "bfloat16": 8, "float32": 24, "float64": 53}
_WIDER_FLOATS = {"float16": ("float32", "float64"), "bfloat16": ("float32", "float64"), "float32": ("float64",)}


def exact_cast(a: ir.DataType, b: ir.DataType) -> bool:
    """Every value of type ``a`` is a value of type ``b``."""
    if a == b:
        return True
    try:
        na, nb = np.dtype(a.numpy()), np.dtype(b.numpy())
    except (TypeError, ValueError):
        return False
    fa, fb = str(na) if na != _BF16 else "bfloat16", str(nb) if nb != _BF16 else "bfloat16"
    if na.kind == "b":
        return nb.kind in "biuf" or fb == "bfloat16"
    if fa in _MANTISSA:
        return fb in _WIDER_FLOATS.get(fa, ())
    if na.kind not in "iu":
        return False
    if fb in _MANTISSA:  # numpy calls int64 -> float64 safe; 2**53 + 1 says otherwise
        return na.itemsize * 8 - (1 if na.kind == "i" else 0) <= _MANTISSA[fb]
    return nb.kind in "iu" and bool(np.can_cast(na, nb, casting="safe"))


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
