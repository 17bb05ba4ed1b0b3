"""``check=`` callables for the ONNX-function examples: which functions exist and how often they are called."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

import onnx
from jax2onnx.functions import FUNCTION_DOMAIN


def base_name(name: str) -> str:
    """A function's name without the ``_2``, ``_3`` … suffix the builder adds to keep names unique."""
    return re.sub(r"_\d+$", "", name)


def _call_nodes(model: onnx.ModelProto) -> list[onnx.NodeProto]:
    """Every call of a custom-domain function: in the main graph and in function bodies."""
    nodes = [n for n in model.graph.node if n.domain == FUNCTION_DOMAIN]
    for f in model.functions:
        nodes += [n for n in f.node if n.domain == FUNCTION_DOMAIN]
    return nodes


def expect_functions(functions: Mapping[str, int], calls: Mapping[str, int] | None = None) -> Callable[[Any], None]:
    """Check that the model defines ``functions`` (base name → number of distinct FunctionProtos)
    and, if given, that each base name is called ``calls[name]`` times in total."""

    def check(model: onnx.ModelProto) -> None:
        defined = Counter(base_name(f.name) for f in model.functions)
        assert dict(defined) == dict(functions), f"functions defined: {dict(defined)}, expected {dict(functions)}"
        assert all(f.domain == FUNCTION_DOMAIN for f in model.functions), [f.domain for f in model.functions]
        names = {f.name for f in model.functions}
        call_nodes = _call_nodes(model)
        unknown = [n.op_type for n in call_nodes if n.op_type not in names]
        assert not unknown, f"calls of undefined functions: {unknown}"
        called = Counter(base_name(n.op_type) for n in call_nodes)
        never = [f.name for f in model.functions if not any(n.op_type == f.name for n in call_nodes)]
        assert not never, f"functions defined but never called: {never}"
        if calls is not None:
            assert dict(called) == dict(calls), f"function calls: {dict(called)}, expected {dict(calls)}"
        assert any(n.domain == FUNCTION_DOMAIN for n in model.graph.node), "the main graph calls no function"

    return check


def expect_ops_in_float32(*ops: str) -> Callable[[Any], None]:
    """``ops`` must appear in float32 exports; float64 ones may route around them (onnxruntime has
    no double kernel for e.g. ``Conv``, so the lax pack lowers float64 convolutions differently)."""

    def check(model: onnx.ModelProto) -> None:
        if model.graph.output[0].type.tensor_type.elem_type != onnx.TensorProto.FLOAT:
            return
        from jax2onnx.testing.runner import op_types

        missing = [op for op in ops if op not in op_types(model)]
        assert not missing, f"float32 export lacks {missing}"

    return check


def expect_bool_input(name: str) -> Callable[[Any], None]:
    """A runtime call parameter (``input_params``) must be a bool graph input of that name."""

    def check(model: onnx.ModelProto) -> None:
        inputs = {i.name: i.type.tensor_type.elem_type for i in model.graph.input}
        assert inputs.get(name) == onnx.TensorProto.BOOL, f"no bool graph input {name!r}: {inputs}"

    return check


def all_of(*checks: Callable[[Any], None]) -> Callable[[Any], None]:
    def check(model: onnx.ModelProto) -> None:
        for c in checks:
            c(model)

    return check
