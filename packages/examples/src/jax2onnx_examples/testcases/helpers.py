"""``check=`` callables of the examples' testcases, all ``(model, variant)``: which ONNX functions
exist and how often they are called, runtime flags as graph inputs."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Mapping

import onnx
from jax2onnx.frontend import FUNCTION_DOMAIN
from jax2onnx.testing import Variant

Check = Callable[[onnx.ModelProto, Variant], None]


def base_name(name: str) -> str:
    """A function's name without the ``_2``, ``_3`` … suffix the builder adds to keep names unique."""
    return re.sub(r"_\d+$", "", name)


def _call_nodes(model: onnx.ModelProto) -> list[onnx.NodeProto]:
    """Every call of a custom-domain function: in the main graph and in function bodies."""
    nodes = [n for n in model.graph.node if n.domain == FUNCTION_DOMAIN]
    for f in model.functions:
        nodes += [n for n in f.node if n.domain == FUNCTION_DOMAIN]
    return nodes


def expect_functions(functions: Mapping[str, int], calls: Mapping[str, int] | None = None) -> Check:
    """Check that the model defines ``functions`` (base name → number of distinct FunctionProtos)
    and, if given, that each base name is called ``calls[name]`` times in total."""

    def check(model: onnx.ModelProto, variant: Variant) -> None:
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


def expect_bool_input(name: str) -> Check:
    """A runtime call parameter (``input_params``) must be a bool graph input of that name."""

    def check(model: onnx.ModelProto, variant: Variant) -> None:
        inputs = {i.name: i.type.tensor_type.elem_type for i in model.graph.input}
        assert inputs.get(name) == onnx.TensorProto.BOOL, f"no bool graph input {name!r}: {inputs}"

    return check


def all_of(*checks: Check) -> Check:
    def check(model: onnx.ModelProto, variant: Variant) -> None:
        for c in checks:
            c(model, variant)

    return check
