"""``@onnx_function``: a module class or function whose every call becomes a call of a named ONNX
function (a FunctionProto, shown as one box in Netron).

How: during an export the decorated call runs as :func:`jax2onnx.plugin.marked_call` (a named
``jax.jit``, which every JAX transformation understands). Core's lowering of that mark lowers the
body into a function scope and emits one node calling it. Bodies that lower to the same ops,
attributes and constants share one function; different weights give different functions.
"""

from __future__ import annotations

import builtins
import contextvars
import functools
import hashlib
from collections.abc import Callable
from typing import Any, TypeVar

import jax
import numpy as np
import onnx_ir as ir

from ..errors import InputSpecError
from ..ir.builder import Scope
from ..plugin import adapt_for_export, exporting, marked_call

FUNCTION_MARK = "jax2onnx.function"
FUNCTION_DOMAIN = "custom"
T = TypeVar("T")


def _is_array(x: Any) -> bool:
    return isinstance(x, (jax.Array, np.ndarray)) or hasattr(x, "aval")


def _call_as_function(display_name: str, fn: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
    leaves, treedef = jax.tree_util.tree_flatten((args, kwargs))
    dyn_idx = [i for i, x in enumerate(leaves) if _is_array(x)]
    static = {i: x for i, x in enumerate(leaves) if i not in set(dyn_idx)}

    def body(*dyn: Any, display_name: str) -> Any:
        full = [None] * len(leaves)
        for i, x in static.items():
            full[i] = x
        for i, x in zip(dyn_idx, dyn):
            full[i] = x
        a, kw = jax.tree_util.tree_unflatten(treedef, full)
        return fn(*a, **kw)

    return marked_call(FUNCTION_MARK, body, *[leaves[i] for i in dyn_idx], display_name=display_name)


#: Set while a pack's adapted copy of a decorated module runs, so its own decorated ``__call__``
#: runs the body instead of opening a second function.
_BYPASS: contextvars.ContextVar[bool] = contextvars.ContextVar("jax2onnx_function_bypass", default=False)


def _method_body(obj: Any, original_call: Callable[..., Any]) -> Callable[..., Any]:
    """What the function region runs for ``obj(...)``: a pack adapter's copy when one applies (an
    NNX module updating its batch statistics must be rebuilt inside the region), else the method."""
    adapted = adapt_for_export(obj)
    if adapted is None:
        return functools.partial(original_call, obj)

    def run(*args: Any, **kwargs: Any) -> Any:
        token = _BYPASS.set(True)
        try:
            return adapted(*args, **kwargs)
        finally:
            _BYPASS.reset(token)

    return run


def onnx_function(
    target: T | None = None,
    *,
    unique: bool = False,
    namespace: str | None = None,
    name: str | None = None,
    type: str | None = None,  # noqa: A002 - 0.17's keyword
) -> Any:
    """Decorate a ``nnx.Module`` subclass or a function so that each call exports as an ONNX function.

    Outside an export the decorated object behaves exactly as before. ``name`` (or its 0.17 alias
    ``type``, which wins when both are given) is the function's op type; the functions live in the
    ``"custom"`` domain. Calls with the same body and weights always share one function, so 0.17's
    ``unique`` no longer changes the graph's meaning and is accepted for compatibility;
    ``namespace`` other than ``"custom"`` is refused with the reason.
    """
    if not isinstance(unique, bool):
        raise InputSpecError(f"onnx_function(unique=...) must be True or False, got {unique!r}")
    if namespace not in (None, "", FUNCTION_DOMAIN):
        raise InputSpecError(
            f"onnx_function(namespace={namespace!r}): functions are emitted in the {FUNCTION_DOMAIN!r} domain only; "
            "drop namespace= (name= sets the function's op type)"
        )
    name = type or name

    def decorate(obj: Any) -> Any:
        display = name or getattr(obj, "__name__", "function")
        if isinstance(obj, builtins.type):  # the builtin: `type` is 0.17's keyword here
            original_call = obj.__call__
            if "__call__" not in vars(obj):
                # Inherited from a decorated base: wrap the base's own call, not its wrapper, or
                # every call would become a function nested in a function.
                original_call = getattr(original_call, "_jax2onnx_original", original_call)

            @functools.wraps(original_call)
            def __call__(self: Any, *args: Any, **kwargs: Any) -> Any:
                if not exporting():
                    return original_call(self, *args, **kwargs)
                if _BYPASS.get():  # the adapted copy of a module calling itself: run the body
                    token = _BYPASS.set(False)
                    try:
                        return original_call(self, *args, **kwargs)
                    finally:
                        _BYPASS.reset(token)
                return _call_as_function(display, _method_body(self, original_call), args, kwargs)

            __call__._jax2onnx_original = original_call
            obj.__call__ = __call__
            obj.__jax2onnx_function__ = display
            return obj

        @functools.wraps(obj)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if not exporting():
                return obj(*args, **kwargs)
            return _call_as_function(display, obj, args, kwargs)

        wrapper.__jax2onnx_function__ = display
        return wrapper

    if target is None:
        return decorate
    return decorate(target)


# ---------------------------------------------------------------------------------------------
# lowering (registered by core's built-in plugin)


def lower_function_call(ctx: Any, *ins: ir.Value) -> Any:
    display = ctx.marked.params["display_name"]
    closed = ctx.eqn.params["jaxpr"]
    model = ctx.scope.model
    fscope = Scope(model, kind="function")
    f_inputs = [fscope.add_input(f"{display}_in{i}", v.aval) for i, v in enumerate(ctx.eqn.invars)]
    outs = ctx.interp.lower_jaxpr(fscope, closed, f_inputs)
    final = []
    seen: set[int] = set()
    input_ids = {id(v) for v in f_inputs}
    for v in outs:
        if id(v) in seen or id(v) in input_ids or v.producer() is None:
            v = fscope.op.Identity(v)
        seen.add(id(v))
        final.append(v)
    for v, var in zip(final, ctx.eqn.outvars):
        ctx.set_aval(v, var.aval)
    fingerprint = _fingerprint(fscope.inputs, fscope.nodes, final)
    function = model.function_fingerprints.get(fingerprint)
    if function is None:
        fname = model.names.fresh(display)
        graph = ir.Graph(fscope.inputs, final, nodes=fscope.nodes, name=fname,
                         opset_imports={"": model.opset, FUNCTION_DOMAIN: 1})
        function = ir.Function(FUNCTION_DOMAIN, fname, graph=graph, attributes=[])
        model.function_fingerprints[fingerprint] = function
        model.functions[(FUNCTION_DOMAIN, fname)] = function
    result = getattr(ctx.op, function.name)(*ins, _domain=FUNCTION_DOMAIN, _outputs=len(final), _name=f"{function.name}_out")
    return [result] if len(final) == 1 else list(result)


def _fingerprint(inputs: list[ir.Value], nodes: list[ir.Node], outputs: list[ir.Value]) -> str:
    """Structure, attributes and constant bytes, independent of value names."""
    h = hashlib.blake2b(digest_size=20)
    ids: dict[int, int] = {}
    for v in inputs:
        ids[id(v)] = len(ids)
        h.update(f"in:{v.type}:{v.shape};".encode())
    for node in nodes:
        h.update(f"{node.domain}:{node.op_type}(".encode())
        for x in node.inputs:
            h.update(f"{ids.get(id(x), -1) if x is not None else 'none'},".encode())
        for k in sorted(node.attributes):
            a = node.attributes[k]
            if a.type == ir.AttributeType.TENSOR:
                arr = a.value.numpy()
                h.update(f"{k}=T{arr.dtype}{arr.shape}".encode())
                h.update(np.ascontiguousarray(arr).tobytes())
            else:
                h.update(f"{k}={a.value!r}".encode())
        h.update(b")")
        for o in node.outputs:
            ids[id(o)] = len(ids)
    for v in outputs:
        h.update(f"out:{ids.get(id(v), -1)}".encode())
    return h.hexdigest()
