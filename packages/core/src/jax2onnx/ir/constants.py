"""Reading constant values off the ``onnx_ir`` graph: the one reader the builder's legalization,
the graph passes and the fusion kit share.

A value is constant when it holds a tensor (``const_value``: an initializer, a pooled constant, a
folded result) or is the output of a ``Constant`` node (function bodies keep their constants as
nodes). A lazy weight (``Weights`` inputs, read from their source only when the model is written)
counts only when the caller asks for it (``lazy=True``): reading it loads it now.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx_ir as ir


def constant_tensor(v: ir.Value | None, *, lazy: bool = True) -> ir.TensorProtocol | None:
    """``v``'s tensor when it is a constant, else None (see the module docstring)."""
    if v is None:
        return None
    if v.const_value is not None:
        if not lazy and isinstance(v.const_value, ir.LazyTensor):
            return None
        return v.const_value
    node = v.producer()
    if node is None or node.op_type != "Constant" or node.domain not in ("", "ai.onnx") or "value" not in node.attributes:
        return None
    return node.attributes["value"].value


def constant_array(v: ir.Value | None, *, lazy: bool = True) -> np.ndarray | None:
    """``v``'s value as a numpy array when it is a constant, else None."""
    tensor = constant_tensor(v, lazy=lazy)
    return None if tensor is None else tensor.numpy()


def constant_ints(v: Any) -> list[int] | None:
    """A constant ``v``'s elements as Python ints (axes, starts, shapes), flattened; else None.
    A literal (a list or array the op builder has not made a value yet) is read as given."""
    if v is not None and not isinstance(v, ir.Value):
        return [int(a) for a in np.asarray(v).reshape(-1)]
    arr = constant_array(v)
    return None if arr is None else [int(a) for a in np.asarray(arr).reshape(-1)]


def is_size_one_constant(v: ir.Value | None) -> bool:
    """A constant of one element, which broadcasts the same against any layout of the other operand."""
    tensor = constant_tensor(v)
    return tensor is not None and int(np.prod([int(d) for d in tensor.shape])) == 1


def rank(v: Any) -> int | None:
    """The rank of ``v`` when its shape is known, else None."""
    return len(v.shape) if isinstance(v, ir.Value) and v.shape is not None else None


__all__ = ["constant_array", "constant_ints", "constant_tensor", "is_size_one_constant", "rank"]
