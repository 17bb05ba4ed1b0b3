"""Export targets: the opsets ``to_onnx`` accepts, the IR version each model is written with, and
the oldest onnxruntime that runs it.

A model is stamped with the *oldest* IR version its opset (and its dtypes) allow, so every runtime
that implements the opset can load it: onnxruntime checks the IR version before anything else
("Unsupported model IR version: 11, max supported IR version: 10"), and a newer IR than needed
would lock out runtimes that run every op of the model.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import Any

import onnx

from ..errors import InputSpecError
from .graphs import all_graphs

#: The oldest default-domain opset an export can target. Below 17, legalize_opset13 rewrites the
#: newer forms (LayerNormalization, Shape start/end, Reshape allowzero, scatter reductions, element
#: types added at 14-16); 13 is where Split, Squeeze, Unsqueeze and ReduceSum took their axes and
#: sizes as inputs and most ops took bfloat16, so older opsets would need a second set of forms.
MIN_OPSET = 13
DEFAULT_OPSET = 23

#: opset -> the oldest onnxruntime release that loads and runs a model of that opset as ``to_onnx``
#: writes it (IR version from :func:`ir_version`). Measured with ``bench/onnxruntime_support.py``
#: on the CPU wheels of onnxruntime 1.15.1 ... 1.32.0 (1.15 is the oldest with a Python 3.11 wheel,
#: so "1.15" means "1.15 or older"); docs/opsets.md shows the table.
MIN_ONNXRUNTIME = {
    13: "1.15", 14: "1.15", 15: "1.15", 16: "1.15", 17: "1.15", 18: "1.15", 19: "1.16", 20: "1.17", 21: "1.18", 22: "1.21", 23: "1.23",
    24: "1.24", 25: "1.24", 26: "1.25", 27: "1.32", 28: "1.32",
}


def max_opset() -> int:
    """The newest default-domain opset the installed ``onnx`` knows (its schemas type emission)."""
    return int(onnx.defs.onnx_opset_version())


def min_onnxruntime(opset: int) -> str | None:
    """The oldest onnxruntime measured to run ``opset`` (None: newer than any measured release)."""
    return MIN_ONNXRUNTIME.get(opset)


@functools.cache
def ir_version(opset: int) -> int:
    """The oldest IR version ONNX pairs with ``opset`` (``onnx.helper.VERSION_TABLE``)."""
    return int(onnx.helper.find_min_ir_version_for([onnx.helper.make_opsetid("", opset)], ignore_unknown=True))


@functools.cache
def dtype_since() -> dict[int, int]:
    """ONNX element type -> the first opset that has it: the first opset whose Cast accepts it
    (read from the installed onnx's schemas, so a new dtype needs no table edit here)."""
    by_name = {
        onnx.helper.tensor_dtype_to_string(t).removeprefix("TensorProto.").lower(): t
        for t in onnx.TensorProto.DataType.values()
        if t != onnx.TensorProto.UNDEFINED
    }
    out: dict[int, int] = {}
    for opset in range(1, max_opset() + 1):
        schema = onnx.defs.get_schema("Cast", opset, "")
        for c in schema.type_constraints:
            if c.type_param_str != "T1":
                continue
            for t in c.allowed_type_strs:  # "tensor(float8e4m3fn)"
                name = t.removeprefix("tensor(").removesuffix(")")
                if name in by_name:
                    out.setdefault(by_name[name], opset)
    return out


def check_dtypes(elem_types: Iterable[int], opset: int) -> int:
    """The IR version a model of ``opset`` holding ``elem_types`` needs; an element type newer than
    ``opset`` (float8 before 19, int4 before 21, ...) is an error naming the opset that has it."""

    since = dtype_since()
    need = opset
    for t in set(elem_types):
        first = since.get(t)
        if first is not None and first > opset:
            name = onnx.TensorProto.DataType.Name(t).lower()
            raise InputSpecError(
                f"the model holds {name} values, an ONNX type from opset {first}; this export targets opset {opset}: "
                f"pass opset={first} or higher (or cast to a wider type before export)"
            )
        need = max(need, first or 0)
    return ir_version(need)


def element_types(model: Any) -> set[int]:
    """Every tensor element type of an ``onnx_ir.Model``: graph I/O, initializers, node outputs in
    every graph and function."""

    found: set[int] = set()

    def add(v: Any) -> None:
        dtype = getattr(getattr(v, "type", None), "dtype", None)
        if dtype is not None:
            found.add(int(dtype))

    for graph in all_graphs(model):
        for v in (*graph.inputs, *graph.outputs):
            add(v)
        for v in getattr(graph, "initializers", {}).values():  # a Function has none
            add(v)
        for node in graph:
            for v in node.outputs:
                add(v)
            if node.op_type == "Cast" and "to" in node.attributes:
                found.add(int(node.attributes["to"].value))
    return found


#: Ops whose meaning changed at this opset, so an older schema of the same name is not the same op
#: (GroupNormalization-18 scales per group, -21 per channel).
SEMANTICS_SINCE = {"GroupNormalization": 21}


@functools.cache
def op_since(op_type: str) -> int | None:
    """The first default-domain opset that has ``op_type`` with today's meaning (None: not an ONNX op)."""
    for version in range(1, max_opset() + 1):
        try:
            onnx.defs.get_schema(op_type, version, "")
        except onnx.defs.SchemaError:
            continue
        return max(version, SEMANTICS_SINCE.get(op_type, 0))
    return None


#: Attribute values newer than their op: ``(op, attribute) -> {value: first opset}``. Before it,
#: legalization rebuilds the node from older ops (a Loop of single updates for a scatter's
#: ``reduction="add"`` before 16), so a lowering with a cheaper form of its own asks first.
ATTRIBUTE_SINCE: dict[tuple[str, str], dict[Any, int]] = {
    ("ScatterElements", "reduction"): {"add": 16, "mul": 16, "min": 18, "max": 18},
    ("ScatterND", "reduction"): {"add": 16, "mul": 16, "min": 18, "max": 18},
}


def op_available(op_type: str, opset: int, **attributes: Any) -> bool:
    """Whether ``opset`` has ``op_type`` with today's meaning, so a node of it can be written as is
    (GroupNormalization from 21, Attention from 23), and with the given attribute values where one
    is newer than the op (:data:`ATTRIBUTE_SINCE`: ``ScatterElements`` with ``reduction="add"``
    from 16). The one question lowerings and rewrites ask before choosing an op over another form
    of the computation (``LoweringContext.has_op`` asks it at the export's opset). False for a name
    that is no default-domain op, and before the op even where legalization would form it from
    older ops (LayerNormalization before 17)."""
    since = op_since(op_type)
    if since is None or opset < since:
        return False
    return all(opset >= ATTRIBUTE_SINCE.get((op_type, name), {}).get(value, 0) for name, value in attributes.items())
