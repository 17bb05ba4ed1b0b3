"""What a lowering sees: :class:`LoweringContext`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import jax
import numpy as np
import onnx_ir as ir

from ..compat import is_symbolic_dim, user_location
from ..ir.builder import OpBuilder, Scope, set_aval, to_ir_dtype
from ..ir.legalize import has_rule
from ..ir.opsets import op_available, op_since
from ..plugin import MarkedCall


class JaxprLowerer(Protocol):
    """What a context needs of the interpreter that made it (:class:`~jax2onnx.lower.interpreter.
    Interpreter`): inlining a sub-jaxpr. A protocol, so that this module does not import the
    interpreter, which imports it."""

    target: Any  # the export's jax2onnx.targets.Target
    runtime: Any  # its kernel table (Target.runtime())
    options: Any

    def lower_jaxpr(self, scope: Scope, closed: Any, inputs: Sequence[ir.Value]) -> list[ir.Value]: ...


class Emitter:
    """Emission helpers shared by a lowering's context and the control-flow bodies it builds.

    ``op.<OpType>(...)`` emits a node (Python scalars take the dtype the op's other operands fix:
    ``op.Mul(x, 0.5)`` multiplies by a constant of ``x``'s dtype); the methods below cover the
    constants and casts every lowering needs.
    """

    scope: Scope

    @property
    def op(self) -> OpBuilder:
        return self.scope.op

    def const(self, value: Any, dtype: Any = None, name: str | None = None) -> ir.Value:
        """A constant; ``dtype`` may be a numpy dtype or a JAX aval's dtype."""
        arr = np.asarray(value, dtype=dtype) if dtype is not None else np.asarray(value)
        return self.scope.const(arr, name)

    def const_like(self, value: Any, aval: Any) -> ir.Value:
        """A scalar/array constant with the dtype of ``aval``."""
        return self.const(np.asarray(value, dtype=aval.dtype))

    def i64(self, values: Sequence[int] | int) -> ir.Value:
        """An int64 constant: a 1-D vector for a sequence (axes, pads, shapes), rank 0 for an int."""
        if isinstance(values, (int, np.integer)):
            return self.const(np.asarray(int(values), dtype=np.int64))
        return self.const(np.asarray([int(v) for v in values], dtype=np.int64))

    def cast(self, v: ir.Value, dtype: Any) -> ir.Value:
        """``v`` as ``dtype`` (numpy/JAX dtype or ``ir.DataType``); no node when it already is."""
        want = dtype if isinstance(dtype, ir.DataType) else to_ir_dtype(dtype)
        if v.type is not None and v.type.dtype == want:
            return v
        return self.op.Cast(v, to=int(want))

    def shape_tensor(self, shape: Sequence[Any]) -> ir.Value:
        """An int64 1-D tensor holding ``shape`` (computed in the graph for symbolic dims)."""
        return self.scope.shape_tensor(shape)

    def dim(self, d: Any) -> ir.Value:
        """Dimension ``d`` (int or symbolic) as an int64 tensor of shape ``[1]``."""
        return self.scope.dim(d)

    def dim_scalar(self, d: Any, dtype: Any = np.int64) -> ir.Value:
        """Dimension ``d`` as a rank-0 tensor of ``dtype`` (a constant when static)."""
        if not is_symbolic_dim(d):
            return self.const(np.asarray(int(d), dtype=dtype))
        return self.cast(self.op.Squeeze(self.dim(d), self.i64([0])), dtype)

    @staticmethod
    def is_static(shape: Sequence[Any]) -> bool:
        return all(not is_symbolic_dim(d) for d in shape)

    @staticmethod
    def onnx_dtype(dtype: Any) -> ir.DataType:
        return to_ir_dtype(dtype)

    def set_aval(self, v: ir.Value, aval: Any) -> ir.Value:
        set_aval(v, aval)
        return v


class LoweringContext(Emitter):
    """The equation being lowered and the tools to emit ONNX for it.

    Attributes most lowerings use: ``op`` (``ctx.op.Add(a, b)``), ``params`` (the equation's
    params), ``avals_in``/``avals_out`` (JAX shapes and dtypes, symbolic dims included),
    ``const(array)``, ``shape_tensor(shape)`` (int64 sizes, computed in the graph for symbolic
    dims), ``lower_jaxpr`` (inline a sub-jaxpr) and ``subgraph()`` (build an If/Loop/Scan body).
    """

    def __init__(self, interp: JaxprLowerer, scope: Scope, eqn: Any, marked: MarkedCall | None = None, *,
                 avals_in: Sequence[Any] | None = None, avals_out: Sequence[Any] | None = None):
        self.interp = interp
        self.scope = scope
        self.eqn = eqn
        self.marked = marked
        # A lowering registered with ``dtypes=`` sees its operands in the carrier dtype.
        self._avals_in = list(avals_in) if avals_in is not None else None
        self._avals_out = list(avals_out) if avals_out is not None else None

    # -- the equation --------------------------------------------------------------------------
    @property
    def primitive(self) -> str:
        return self.eqn.primitive.name

    @property
    def params(self) -> dict[str, Any]:
        return self.eqn.params

    @property
    def avals_in(self) -> list[Any]:
        return list(self._avals_in) if self._avals_in is not None else [v.aval for v in self.eqn.invars]

    @property
    def avals_out(self) -> list[Any]:
        return list(self._avals_out) if self._avals_out is not None else [v.aval for v in self.eqn.outvars]

    @property
    def location(self) -> str | None:
        return user_location(self.eqn)

    @property
    def opset(self) -> int:
        return self.scope.model.opset

    @property
    def options(self) -> Any:
        """This export's checked ``ExportOptions`` (``target``, ``opset``, front-end fields), or
        None when lowering outside an export. A lowering that depends on them reads them here, per
        export, never from a module global another thread's export could change."""
        return getattr(self.interp, "options", None)

    @property
    def target(self) -> Any:
        """This export's :class:`jax2onnx.targets.Target` (the default, standard ONNX, outside an
        export). Ask it what the runtime takes (``ctx.target.allows("Inverse", "com.microsoft")``)
        instead of comparing its name."""
        return self.interp.target

    @property
    def runtime(self) -> Any:
        """The export target's kernel table (``Target.runtime()``, a :class:`jax2onnx.ir.runtime.Runtime`)."""
        return self.interp.runtime

    def has_op(self, op_type: str, **attributes: Any) -> bool:
        """Whether the export's opset has ``op_type`` with today's meaning and, where one is newer
        than the op, the given attribute values (:func:`jax2onnx.ir.opsets.op_available`): ask it
        instead of comparing ``self.opset`` with a number. A lowering that also needs a kernel for
        its dtype asks :meth:`kernel_dtypes`, which answers nothing where this is False."""
        return op_available(op_type, self.opset, **attributes)

    def kernel_dtypes(self, op: str, without: Any = (), exact: bool = False) -> frozenset[np.dtype]:
        """The dtypes the target onnxruntime has ``op`` kernels for at the export's opset
        (``"ScatterND:max"`` for a scatter's reduction), less ``without``. None before the op's
        opset, unless legalization forms it there (then the op's own kernels: the rule's ops).
        ``exact``: only kernels that compute what the spec says (:meth:`Runtime.dtypes`), for a
        lowering with another form to fall back on (float64 Attention keeps the decomposition)."""
        base = op.split(":")[0]
        since = op_since(base)
        opset = since if has_rule(base) and since is not None and self.opset < since else self.opset
        return self.interp.runtime.dtypes(op, opset, exact=exact) - frozenset(np.dtype(d) for d in without)

    # -- nested jaxprs -------------------------------------------------------------------------
    def lower_jaxpr(self, closed_jaxpr: Any, inputs: Sequence[ir.Value]) -> list[ir.Value]:
        """Inline ``closed_jaxpr`` into the current graph and return its outputs."""
        return self.interp.lower_jaxpr(self.scope, closed_jaxpr, list(inputs))

    def lower_function(self, fn: Any, inputs: Sequence[ir.Value], specs: Sequence[Any] | None = None) -> list[ir.Value]:
        """Trace the JAX function ``fn`` on ``specs`` (default: this equation's input avals) and
        inline its jaxpr on ``inputs``: a primitive lowered as JAX's own decomposition of it, or as
        a function of other lax ops."""
        if specs is None:
            specs = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in self.avals_in]
        return self.lower_jaxpr(self.interp.trace_function(self.eqn, fn, specs), inputs)

    def subgraph(self, name: str) -> SubgraphBuilder:
        """Start a control-flow body; outer values may be referenced inside it directly."""
        return SubgraphBuilder(self, Scope(self.scope.model, kind="subgraph", parent=self.scope), name)


class SubgraphBuilder(Emitter):
    """Builds one ``ir.Graph`` for an ``If`` branch or a ``Loop``/``Scan`` body."""

    def __init__(self, ctx: LoweringContext, scope: Scope, name: str):
        self.ctx = ctx
        self.scope = scope
        self.name = name

    def subgraph(self, name: str) -> SubgraphBuilder:
        """A body nested in this one (an ``If`` inside a loop body or an else branch)."""
        return SubgraphBuilder(self.ctx, Scope(self.scope.model, kind="subgraph", parent=self.scope), name)

    def add_input(self, base: str, aval: Any = None, *, dtype: Any = None, shape: Sequence[Any] | None = None) -> ir.Value:
        """A body input typed from ``aval`` or from ``dtype`` + ``shape``."""
        if aval is None:
            v = self.scope.new_value(base)
            v.type = ir.TensorType(to_ir_dtype(dtype))
            v.shape = ir.Shape([str(d) if is_symbolic_dim(d) else int(d) for d in (shape or ())])
            self.scope.inputs.append(v)
            return v
        return self.scope.add_input(base, aval)

    def lower(self, closed_jaxpr: Any, inputs: Sequence[ir.Value]) -> list[ir.Value]:
        return self.ctx.interp.lower_jaxpr(self.scope, closed_jaxpr, list(inputs))

    def finish(self, outputs: Sequence[ir.Value], avals: Sequence[Any] | None = None) -> ir.Graph:
        """Close the body. Each output becomes a distinct value (ONNX forbids a body output that is
        directly one of its inputs or an outer value), typed from ``avals`` when given."""
        outs = []
        seen: set[int] = set()
        input_ids = {id(v) for v in self.scope.inputs}
        for i, v in enumerate(outputs):
            if id(v) in seen or id(v) in input_ids or v.producer() is None or _producer_outside(v, self.scope):
                v = self.op.Identity(v, _name=f"{self.name}_out")
            seen.add(id(v))
            if avals is not None and avals[i] is not None:
                set_aval(v, avals[i])
            outs.append(v)
        return ir.Graph(self.scope.inputs, outs, nodes=self.scope.nodes, name=self.name,
                        opset_imports={"": self.scope.model.opset})


def _producer_outside(v: ir.Value, scope: Scope) -> bool:
    node = v.producer()
    return node is not None and not any(node is n for n in scope.nodes)
