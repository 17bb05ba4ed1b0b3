"""Graph building over ``onnx_ir``: typed values, an op builder, constants stored once, scopes.

A :class:`ModelBuilder` owns the main graph, the model-wide name generator, the initializer pool
and the ONNX functions. A :class:`Scope` is one graph being filled: the main graph, a control-flow
body (``If``/``Loop``/``Scan`` subgraph) or an ONNX function body. Lowerings reach it through
``ctx.op`` (an :class:`OpBuilder`) and ``ctx.const``.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import onnx
import onnx_ir as ir

from ..compat import dim_symbols, evaluate_dim, host_copy, is_key_dtype, is_symbolic_dim, key_data_shape
from ..errors import InputSpecError

# Rules for opsets 13-16 (element types, Shape/Reshape attributes, LayerNormalization, scatter
# reductions) live in their own module, which builds on legalize's helpers; importing it registers them.
from . import legalize_opset13 as _legalize_opset13  # noqa: F401
from .legalize import OpUnavailableError as OpUnavailableError  # re-exported: lowerings and tests catch it here
from .legalize import Rewritten, legalize

# --------------------------------------------------------------------------------------------
# dtypes


#: ``to_ir_dtype``'s answers by what it was given (an ``np.dtype``, a scalar type, a name): it runs
#: for every value and constant an export makes, and ``np.dtype(...).name`` was most of its cost.
_IR_DTYPES: dict[Any, ir.DataType] = {}


def to_ir_dtype(dtype: Any) -> ir.DataType:
    try:
        return _IR_DTYPES[dtype]
    except (KeyError, TypeError):  # not seen yet, or unhashable (converted without the cache)
        pass
    dt = np.dtype(dtype)
    out = ir.DataType.BFLOAT16 if dt.name == "bfloat16" else ir.DataType.from_numpy(dt)
    try:
        _IR_DTYPES[dtype] = out
    except TypeError:
        pass
    return out


def value_dtype(dtype: Any) -> ir.DataType:
    """Element type of the ONNX value holding a JAX value of ``dtype``. Complex numbers travel as
    real pairs (a trailing axis of 2, the layout of ONNX's DFT), so complex64 is FLOAT; a typed PRNG
    key travels as its uint32 key data."""
    if is_key_dtype(dtype):
        return ir.DataType.UINT32
    dt = np.dtype(dtype)
    if dt.kind == "c":
        return to_ir_dtype(np.float32 if dt == np.complex64 else np.float64)
    return to_ir_dtype(dt)


def aval_type(aval: Any) -> tuple[ir.TensorType, ir.Shape]:
    dims = [str(d) if is_symbolic_dim(d) else int(d) for d in aval.shape]
    if is_key_dtype(aval.dtype):
        dims.extend(key_data_shape(aval.dtype))  # key<fry>[3] is uint32[3, 2]
    elif np.dtype(aval.dtype).kind == "c":
        dims.append(2)  # (real, imag)
    return ir.TensorType(value_dtype(aval.dtype)), ir.Shape(dims)


@functools.lru_cache(maxsize=4096)
def _name_base(base: str) -> str:
    """``base`` with every character ONNX tools choke on made ``_``; cached: two names are made per
    emitted node, from a few bases ("node_Mul", "mul"), and the regex was a tenth of emitting one."""
    return re.sub(r"[^A-Za-z0-9_.]", "_", base) or "v"


class NameGenerator:
    """Readable, model-wide unique names (ONNX names must be unique across graph and subgraphs)."""

    def __init__(self) -> None:
        self._used: dict[str, int] = {}

    def fresh(self, base: str) -> str:
        base = _name_base(base)
        n = self._used.get(base)
        if n is None:
            self._used[base] = 1
            return base
        while True:
            n += 1
            cand = f"{base}_{n}"
            if cand not in self._used:
                self._used[base] = n
                self._used[cand] = 1
                return cand


#: Device-resident constants (sharded, replicated, on an accelerator) from this size up are copied to
#: the host only when the model is written, one at a time; smaller ones right away.
DEVICE_LAZY_BYTES = 64 * 1024


class ModelBuilder:
    """Model-wide state: names, the initializer pool, ONNX functions, opset."""

    def __init__(self, opset: int) -> None:
        self.opset = opset
        self.names = NameGenerator()
        self.initializers: dict[str, ir.Value] = {}
        self._const_pool = ConstantPool()
        self.functions: dict[tuple[str, str], ir.Function] = {}
        self.function_fingerprints: dict[str, ir.Function] = {}
        #: device-resident constants already stored, by the jax.Array's identity (the array is kept
        #: alive with its value, so an id is never reused for another array during the export)
        self._device_constants: dict[int, tuple[Any, ir.Value]] = {}
        self.main = Scope(self, kind="main")

    def initializer(self, array: np.ndarray, name: str | None = None) -> ir.Value:
        """An initializer holding ``array``; identical arrays are stored once. The array is
        wrapped, not copied: a weight reaches the ModelProto as the only copy jax2onnx makes."""
        array = np.asarray(array)
        hit = self._const_pool.find(array)
        if hit is not None:
            return hit
        vname = self.names.fresh(name or _const_name(array))
        value = ir.Value(name=vname, type=ir.TensorType(to_ir_dtype(array.dtype)), shape=ir.Shape(list(array.shape)),
                         const_value=as_tensor(array, vname))
        self.initializers[vname] = value
        self._const_pool.add(array, value)
        return value


    def device_initializer(self, array: Any, name: str | None = None) -> ir.Value:
        """An initializer holding a device-resident ``jax.Array`` (sharded, replicated or on an
        accelerator), copied to the host only when the model is written, one tensor at a time
        (:func:`jax2onnx.compat.host_copy`): the export never holds the whole model on the host.
        Like a ``Weights`` leaf it is lazy, so passes neither fold nor deduplicate it by value;
        the same array seen twice (a tied embedding) is stored once."""
        hit = self._device_constants.get(id(array))
        if hit is not None:
            return hit[1]
        shape = [int(d) for d in array.shape]
        vname = self.names.fresh(name or "const_" + "x".join(str(d) for d in shape))
        dtype = to_ir_dtype(array.dtype)
        tensor = ir.LazyTensor(lambda: as_tensor(host_copy(array), vname), dtype=dtype, shape=ir.Shape(shape),
                               name=vname)
        value = ir.Value(name=vname, type=ir.TensorType(dtype), shape=ir.Shape(shape), const_value=tensor)
        self.initializers[vname] = value
        self._device_constants[id(array)] = (array, value)
        return value

    def weight(self, leaf: Any, aval: Any) -> ir.Value:
        """An initializer read from a weight source when the model is written (see
        :mod:`jax2onnx.export.weights`): never deduplicated or folded, so it is never loaded early."""
        value = lazy_initializer(leaf, aval, self.names.fresh(leaf.name))
        self.initializers[value.name] = value
        return value


class ConstantPool:
    """Finds an array already stored, without hashing every weight's bytes.

    First by buffer identity (the same JAX/numpy buffer seen twice: a tied embedding), then among
    arrays of the same dtype and shape by a fingerprint of a few sampled elements; only arrays that
    agree on all of that are compared in full. Random weights differ in the sample, so a model's
    weights are read a handful of elements each; equal arrays (zero biases) are compared once.
    """

    _SAMPLES = 64

    def __init__(self) -> None:
        self._by_buffer: dict[tuple, ir.Value] = {}
        self._by_signature: dict[tuple, list[tuple[np.ndarray, ir.Value]]] = {}

    @staticmethod
    def _buffer_key(array: np.ndarray) -> tuple:
        return (array.__array_interface__["data"][0], array.shape, array.strides, array.dtype.str)

    @classmethod
    def _signature(cls, array: np.ndarray) -> tuple:
        flat = array.reshape(-1)
        if flat.size <= cls._SAMPLES:
            sample = np.ascontiguousarray(flat).tobytes()
        else:
            step = flat.size // cls._SAMPLES
            sample = np.ascontiguousarray(flat[::step][: cls._SAMPLES]).tobytes() + np.ascontiguousarray(flat[-1:]).tobytes()
        return (array.dtype.str, array.shape, sample)

    def find(self, array: np.ndarray) -> ir.Value | None:
        hit = self._by_buffer.get(self._buffer_key(array))
        if hit is not None:
            return hit
        for stored, value in self._by_signature.get(self._signature(array), ()):
            if array.size <= self._SAMPLES or np.array_equal(stored, array, equal_nan=array.dtype.kind in "fc"):
                return value  # (not keyed by this array's buffer: nothing keeps it alive)
        return None

    def add(self, array: np.ndarray, value: ir.Value) -> None:
        # The stored arrays stay alive (the tensors hold them), so a buffer address is never reused
        # for a different array while this pool exists.
        self._by_buffer[self._buffer_key(array)] = value
        self._by_signature.setdefault(self._signature(array), []).append((array, value))


def as_tensor(array: np.ndarray, name: str) -> ir.TensorProtocol:
    if array.dtype.name == "bfloat16":
        return ir.Tensor(array, dtype=ir.DataType.BFLOAT16, name=name)
    return ir.Tensor(array, name=name)


def lazy_initializer(leaf: Any, aval: Any, fresh_name: str) -> ir.Value:
    """An initializer whose bytes are read from the source when the model is written. ``leaf``: a
    :class:`jax2onnx.export.weights.WeightLeaf` (its ``name`` and ``source``)."""
    want = np.dtype(aval.dtype)
    shape = tuple(int(d) for d in aval.shape)

    def load() -> ir.TensorProtocol:
        arr = np.asarray(leaf.source.load(leaf.name))
        if arr.shape != shape:
            raise InputSpecError(f"weight {leaf.name!r} from {leaf.source.describe()} has shape {arr.shape}, "
                                 f"the abstract parameter has {shape}")
        if arr.dtype != want:
            arr = arr.astype(want)
        return as_tensor(arr, fresh_name)

    dtype = to_ir_dtype(want)
    tensor = ir.LazyTensor(load, dtype=dtype, shape=ir.Shape(list(shape)), name=fresh_name)
    return ir.Value(name=fresh_name, type=ir.TensorType(dtype), shape=ir.Shape(list(shape)), const_value=tensor)


def _const_name(array: np.ndarray) -> str:
    if array.ndim == 0 or array.size == 1:
        return "const_scalar" if array.ndim == 0 else "const"
    return "const_" + "x".join(str(d) for d in array.shape)


class DimValue:
    """A dimension computed in the graph (int64, shape ``[1]``), with the arithmetic JAX's
    symbolic-dim evaluator uses, so ``B*H//2`` becomes Mul/Div nodes."""

    def __init__(self, scope: Scope, value: ir.Value):
        self.scope = scope
        self.value = value

    def _lift(self, other: Any) -> ir.Value:
        if isinstance(other, DimValue):
            return other.value
        return self.scope.const(np.array([int(other)], dtype=np.int64))

    def _bin(self, op: str, a: Any, b: Any) -> DimValue:
        return DimValue(self.scope, getattr(self.scope.op, op)(self._lift(a), self._lift(b)))

    def __add__(self, o: Any) -> DimValue:
        return self._bin("Add", self, o)

    def __radd__(self, o: Any) -> DimValue:
        return self._bin("Add", o, self)

    def __sub__(self, o: Any) -> DimValue:
        return self._bin("Sub", self, o)

    def __rsub__(self, o: Any) -> DimValue:
        return self._bin("Sub", o, self)

    def __mul__(self, o: Any) -> DimValue:
        return self._bin("Mul", self, o)

    def __rmul__(self, o: Any) -> DimValue:
        return self._bin("Mul", o, self)

    def _floordiv(self, a: Any, b: Any) -> DimValue:
        # ONNX's integer Div truncates; intermediate dim expressions can be negative (JAX writes
        # SAME padding as floordiv(-B, 2)), so floor it: (a - a mod b) / b, Mod taking b's sign.
        num = self._bin("Sub", a, self._bin("Mod", a, b))
        return self._bin("Div", num, b)

    def __floordiv__(self, o: Any) -> DimValue:
        return self._floordiv(self, o)

    def __rfloordiv__(self, o: Any) -> DimValue:
        return self._floordiv(o, self)

    def __mod__(self, o: Any) -> DimValue:
        return self._bin("Mod", self, o)

    def __rmod__(self, o: Any) -> DimValue:
        return self._bin("Mod", o, self)

    def __divmod__(self, o: Any) -> tuple[DimValue, DimValue]:
        return self // o, self % o

    def __rdivmod__(self, o: Any) -> tuple[DimValue, DimValue]:
        return self._floordiv(o, self), self._bin("Mod", o, self)

    def __neg__(self) -> DimValue:
        return DimValue(self.scope, self.scope.op.Neg(self.value))

    def __index__(self) -> int:  # JAX's evaluator probes for constants with operator.index
        raise TypeError("graph dimension is not a constant")


class Scope:
    """One graph under construction (main graph, control-flow body, or function body)."""

    def __init__(self, model: ModelBuilder, kind: str, parent: Scope | None = None):
        self.model = model
        self.kind = kind  # "main" | "subgraph" | "function"
        self.parent = parent
        self.nodes: list[ir.Node] = []
        self.inputs: list[ir.Value] = []
        self.op = OpBuilder(self)
        # symbol name -> (source value, axis) and computed dims cache
        self.dim_sources: list[tuple[ir.Value, Sequence[Any]]] = []
        self._dim_cache: dict[str, ir.Value] = {}
        self._local_consts = ConstantPool()

    # -- values ------------------------------------------------------------------------------------
    def fresh(self, base: str) -> str:
        return self.model.names.fresh(base)

    def new_value(self, base: str, aval: Any | None = None) -> ir.Value:
        v = ir.Value(name=self.fresh(base))
        if aval is not None:
            set_aval(v, aval)
        return v

    def add_input(self, base: str, aval: Any) -> ir.Value:
        v = self.new_value(base, aval)
        self.inputs.append(v)
        if aval is not None:
            self.dim_sources.append((v, aval.shape))
        return v

    # -- constants ---------------------------------------------------------------------------------
    def const(self, array: Any, name: str | None = None) -> ir.Value:
        """A constant tensor. Main graph and control-flow bodies share the model's initializers
        (stored once); an ONNX function body cannot hold initializers, so it gets Constant nodes."""
        array = np.asarray(array)
        if self.kind != "function" and not self._inside_function():
            return self.model.initializer(array, name)
        hit = self._local_consts.find(array)
        if hit is not None:
            return hit
        out = self.op.Constant(value=as_tensor(array, self.fresh(name or _const_name(array))), _name=name or _const_name(array))
        out.type = ir.TensorType(to_ir_dtype(array.dtype))
        out.shape = ir.Shape(list(array.shape))
        self._local_consts.add(array, out)
        return out

    def device_const(self, array: Any) -> ir.Value:
        """A constant from a device-resident ``jax.Array`` (:func:`jax2onnx.compat.is_device_resident`;
        real, integer or bool: a complex one goes to ``const`` as its (real, imag) pairs). From
        :data:`DEVICE_LAZY_BYTES` up, where the graph can hold initializers, it stays on its
        devices until the model is written (:meth:`ModelBuilder.device_initializer`); smaller ones
        (shapes, scales: what lowerings and folding read) are copied now."""
        if array.nbytes >= DEVICE_LAZY_BYTES and self.kind != "function" and not self._inside_function():
            return self.model.device_initializer(array)
        return self.const(host_copy(array))

    def _inside_function(self) -> bool:
        s = self.parent
        while s is not None:
            if s.kind == "function":
                return True
            s = s.parent
        return False

    # -- symbolic dims -----------------------------------------------------------------------------
    def dim_env(self, names: set[str]) -> dict[str, DimValue]:
        return {n: DimValue(self, self._symbol_value(n)) for n in sorted(names)}

    def _symbol_value(self, name: str) -> ir.Value:
        cached = self._dim_cache.get(name)
        if cached is not None:
            return cached
        if self.kind == "subgraph" and self.parent is not None and not self.dim_sources:
            v = self.parent._symbol_value(name)
        else:
            v = self._solve_symbol(name)
            if v is None and self.kind == "subgraph" and self.parent is not None:
                v = self.parent._symbol_value(name)
        if v is None:
            raise ValueError(
                f"symbolic dimension '{name}' cannot be computed here: it does not appear in the shape of "
                f"any input of this {'function' if self.kind == 'function' else 'graph'}."
            )
        self._dim_cache[name] = v
        return v

    def _solve_symbol(self, name: str) -> ir.Value | None:
        """Find ``name`` from an input's shape: an axis whose size is ``name`` itself, else one whose
        size is ``k * name * (other known symbols)``, divided back out, else one whose size is
        ``k * name + (other known symbols)`` (a mask of ``past + sequence``), solved for it."""
        best = None
        affine = None
        for value, shape in self.dim_sources:
            for axis, d in enumerate(shape):
                if not is_symbolic_dim(d):
                    continue
                syms = dim_symbols(d)
                if syms == {name} and str(d) == name:
                    return self.op.Shape(value, start=axis, end=axis + 1, _name=f"dim_{name}")
                if name in syms and best is None and _is_linear_in(d, name):
                    best = (value, axis, d, syms - {name})
                if name in syms and affine is None and _is_affine_in(d, name):
                    affine = (value, axis, d, syms - {name})
        if best is None and affine is not None:
            value, axis, d, others = affine
            env = {o: DimValue(self, self._symbol_value(o)) for o in others}
            offset = evaluate_dim(d, dict(env, **{name: 0}))
            slope = evaluate_dim(d, dict(env, **{name: 1})) - offset
            size = DimValue(self, self.op.Shape(value, start=axis, end=axis + 1))
            solved = (size - offset) // slope
            return solved.value if isinstance(solved, DimValue) else self.const(np.array([int(solved)], np.int64))
        if best is None:
            return None
        value, axis, d, others = best
        env = {o: DimValue(self, self._symbol_value(o)) for o in others}
        env[name] = 1
        divisor = evaluate_dim(d, env)
        size = DimValue(self, self.op.Shape(value, start=axis, end=axis + 1))
        return (size // divisor).value

    def dim(self, d: Any) -> ir.Value:
        """An int64 tensor of shape ``[1]`` holding dimension ``d`` (int or symbolic expression)."""
        if not is_symbolic_dim(d):
            return self.const(np.array([int(d)], dtype=np.int64))
        if str(d) in self._dim_cache:
            return self._dim_cache[str(d)]
        env = self.dim_env(dim_symbols(d))
        result = evaluate_dim(d, env)
        out = result.value if isinstance(result, DimValue) else self.const(np.array([int(result)], np.int64))
        self._dim_cache[str(d)] = out
        return out

    def shape_tensor(self, shape: Sequence[Any]) -> ir.Value:
        """An int64 1-D tensor holding ``shape``; a Constant when every dim is static."""
        if all(not is_symbolic_dim(d) for d in shape):
            return self.const(np.array([int(d) for d in shape], dtype=np.int64))
        parts = [self.dim(d) for d in shape]
        return parts[0] if len(parts) == 1 else self.op.Concat(*parts, axis=0)


def _is_linear_in(d: Any, name: str) -> bool:
    """True when ``d(name=k) == k * d(name=1)`` for a few integer assignments of all symbols."""
    syms = sorted(dim_symbols(d))
    for trial in (2, 3, 7):
        env = {s: trial + i for i, s in enumerate(syms)}
        one = dict(env, **{name: 1})
        try:
            if evaluate_dim(d, env) != env[name] * evaluate_dim(d, one):
                return False
        except Exception:  # noqa: BLE001
            return False
    return True


def _is_affine_in(d: Any, name: str) -> bool:
    """True when ``d = a * name + b`` with a static ``a > 0`` and ``b`` free of ``name`` (checked at a
    few integer assignments of all symbols)."""
    syms = sorted(dim_symbols(d))
    slopes = set()
    for trial in (2, 3, 7):
        env = {s: trial + i for i, s in enumerate(syms)}
        try:
            at = [evaluate_dim(d, dict(env, **{name: k})) for k in (0, 1, 5)]
        except Exception:  # noqa: BLE001
            return False
        slope = at[1] - at[0]
        if slope <= 0 or at[2] - at[0] != 5 * slope:
            return False
        slopes.add(slope)
    return len(slopes) == 1


def set_aval(v: ir.Value, aval: Any) -> None:
    t, s = aval_type(aval)
    v.type = t
    v.shape = s


# --------------------------------------------------------------------------------------------
# The op builder


def _attr(name: str, value: Any) -> ir.Attr:
    if isinstance(value, ir.Attr):
        return value
    if isinstance(value, bool):
        return ir.AttrInt64(name, int(value))
    if isinstance(value, (int, np.integer)):
        return ir.AttrInt64(name, int(value))
    if isinstance(value, (float, np.floating)):
        return ir.AttrFloat32(name, float(value))
    if isinstance(value, str):
        return ir.AttrString(name, value)
    if isinstance(value, ir.Graph):
        return ir.AttrGraph(name, value)
    if isinstance(value, (ir.Tensor, ir.TensorProtocol)) and not isinstance(value, np.ndarray):
        return ir.AttrTensor(name, value)
    if isinstance(value, np.ndarray):
        return ir.AttrTensor(name, as_tensor(value, name))
    if isinstance(value, (list, tuple)):
        items = list(value)
        if all(isinstance(x, (bool, int, np.integer)) for x in items):
            return ir.AttrInt64s(name, [int(x) for x in items])
        if all(isinstance(x, (int, float, np.integer, np.floating)) for x in items):
            return ir.AttrFloat32s(name, [float(x) for x in items])
        if all(isinstance(x, str) for x in items):
            return ir.AttrStrings(name, items)
    raise TypeError(f"cannot make an ONNX attribute '{name}' from {type(value).__name__}: {value!r}")


class OpBuilder:
    """``op.Add(a, b)``, ``op.Split(x, axis=0, _outputs=3)``, ``op.MyFn(x, _domain="custom")``.

    Keyword arguments are attributes (``None`` values are dropped); ``_outputs`` is the number of
    outputs, ``_domain`` the operator domain, ``_name`` a readable base for output names.
    ``None`` inputs stand for omitted optional inputs.
    """

    def __init__(self, scope: Scope):
        self._scope = scope

    def __getattr__(self, op_type: str) -> Callable[..., Any]:
        if op_type.startswith("_"):
            raise AttributeError(op_type)

        def make(*inputs: Any, _outputs: int = 1, _domain: str = "", _name: str | None = None, **attrs: Any) -> Any:
            return self._scope_emit(op_type, inputs, attrs, _outputs, _domain, _name)

        make.__name__ = op_type
        return make

    def _scope_emit(self, op_type: str, inputs: Sequence[Any], attrs: Mapping[str, Any], n_out: int, domain: str, name: str | None) -> Any:
        scope = self._scope
        opset = scope.model.opset
        schema = op_schema(op_type, domain, opset)
        if domain in ("", "ai.onnx"):
            legal = legalize(self, op_type, list(inputs), dict(attrs), n_out, opset, schema)
            if isinstance(legal, Rewritten):
                return legal.outputs
            inputs, attrs = legal
        bound = _bind_type_params(schema, inputs)
        ins: list[ir.Value | None] = []
        for i, x in enumerate(inputs):
            if x is None or isinstance(x, ir.Value):
                ins.append(x)
            else:  # Python / numpy scalars and arrays become constants of the op's bound dtype
                ins.append(scope.const(_literal(op_type, schema, i, x, bound)))
        # Trailing omitted optionals are dropped: onnxruntime crashes on some ops given a trailing ""
        # (e.g. LayerNormalization without bias), and omitting them means the same in ONNX. Not below
        # the schema's minimum count: Loop(M, "") with no loop-carried values must keep its "" cond.
        min_inputs = schema.min_input if schema is not None else 0
        while len(ins) > min_inputs and ins[-1] is None:
            ins.pop()
        base = name or op_type.lower()
        outs = [ir.Value(name=scope.fresh(base if n_out == 1 else f"{base}_{i}")) for i in range(n_out)]
        node = ir.Node(
            domain,
            op_type,
            ins,
            [_attr(k, v) for k, v in attrs.items() if v is not None],
            outputs=outs,
            name=scope.fresh(f"node_{op_type}"),
        )
        scope.nodes.append(node)
        _infer_output_types(op_type, schema, bound, outs, attrs)
        return outs[0] if n_out == 1 else tuple(outs)


# --------------------------------------------------------------------------------------------
# Types from the ONNX schema: a type parameter (``T``) bound by one input fixes the dtype of every
# other input and output written with it, so ``op.Mul(x, 0.5)`` multiplies by a constant of x's
# dtype and ``op.Shape(x)`` is known to be int64 before shape inference runs.


@functools.cache
def op_schema(op_type: str, domain: str, opset: int) -> Any | None:
    """The ONNX schema of ``op_type`` as of ``opset`` (None for custom domains and functions)."""
    if domain not in ("", "ai.onnx"):
        return None
    try:
        return onnx.defs.get_schema(op_type, opset, "")
    except onnx.defs.SchemaError:
        return None


class _SchemaTypes:
    """What the dtype binding reads of one schema, read once: onnx's ``OpSchema`` builds new Python
    lists of its formal parameters and type constraints at every attribute access, and every
    emitted node asked for them (the largest testcases emit tens of thousands of nodes)."""

    def __init__(self, schema: Any) -> None:
        names = {c.type_param_str for c in schema.type_constraints}
        variadic = onnx.defs.OpSchema.FormalParameterOption.Variadic
        inputs, outputs = schema.inputs, schema.outputs
        #: per input position, the type parameter name when all values it covers share one dtype
        self.input_params = [f.type_str if f.is_homogeneous and f.type_str in names else None for f in inputs]
        self.inputs_variadic = bool(inputs) and inputs[-1].option == variadic
        #: per output position, the (homogeneous) formal's type string, else None
        self.output_types = [f.type_str if f.is_homogeneous else None for f in outputs]
        self.outputs_variadic = bool(outputs) and outputs[-1].option == variadic
        #: parameters allowing one type: bound by the schema itself
        self.fixed = [(c.type_param_str, dt) for c in schema.type_constraints if len(c.allowed_type_strs) == 1
                      and (dt := _parse_type_str(c.allowed_type_strs[0])) is not None]

    def input_param(self, i: int) -> str | None:
        """The type parameter of actual input position ``i`` (the last formal's when it is variadic)."""
        if i < len(self.input_params):
            return self.input_params[i]
        return self.input_params[-1] if self.inputs_variadic else None

    def output_type(self, j: int) -> str | None:
        if j < len(self.output_types):
            return self.output_types[j]
        return self.output_types[-1] if self.outputs_variadic else None


@functools.cache
def _schema_types(schema: Any) -> _SchemaTypes:
    """One schema's types, read once (``OpSchema`` hashes and compares by identity, and the cache
    holds the schema, as ``op_schema``'s does)."""
    return _SchemaTypes(schema)


def _bind_type_params(schema: Any, inputs: Sequence[Any]) -> dict[str, ir.DataType]:
    bound: dict[str, ir.DataType] = {}
    if schema is None:
        return bound
    types = _schema_types(schema)
    for i, x in enumerate(inputs):
        if isinstance(x, ir.Value) and x.type is not None:
            param = types.input_param(i)
            if param is not None:
                bound.setdefault(param, x.type.dtype)
    for param, dt in types.fixed:  # a parameter allowing one type is bound by the schema itself
        if param not in bound:
            bound[param] = dt
    return bound


def _literal(op_type: str, schema: Any, i: int, x: Any, bound: Mapping[str, ir.DataType]) -> np.ndarray:
    """A Python/numpy literal operand as an array of the dtype its position is bound to.

    An explicitly typed numpy array keeps its dtype (the schema decides whether that is valid); a
    Python number takes the bound dtype and must be exactly representable in it."""
    if isinstance(x, (np.ndarray, np.generic)):
        return np.asarray(x)
    param = _schema_types(schema).input_param(i) if schema is not None else None
    dt = bound.get(param) if param is not None else None
    if dt is None:
        return np.asarray(x)
    target = dt.numpy()
    arr = np.asarray(x, dtype=target)
    if target.kind in "iub" and not np.array_equal(arr, np.asarray(x)):
        raise TypeError(
            f"{op_type} input {i}: the literal {x!r} is not exactly representable as {dt.name}, the dtype "
            f"the other operands fix; pass an explicit array (np.asarray(..., dtype)) or cast first"
        )
    return arr


@functools.cache
def _parse_type_str(type_str: str) -> ir.DataType | None:
    m = re.fullmatch(r"tensor\((\w+)\)", type_str)
    if m is None:
        return None
    try:
        return ir.DataType(onnx.TensorProto.DataType.Value(m.group(1).upper()))
    except ValueError:
        return None


#: Ops whose output dtype an attribute decides (the schema allows several).
_DTYPE_ATTRS = {"Cast": "to", "EyeLike": "dtype", "RandomNormal": "dtype", "RandomUniform": "dtype",
                "RandomNormalLike": "dtype", "RandomUniformLike": "dtype", "Multinomial": "dtype",
                "Bernoulli": "dtype"}


def _infer_output_types(op_type: str, schema: Any, bound: Mapping[str, ir.DataType], outs: Sequence[ir.Value], attrs: Mapping[str, Any]) -> None:
    attr = _DTYPE_ATTRS.get(op_type)
    if attr is not None and attrs.get(attr) is not None:
        outs[0].type = ir.TensorType(ir.DataType(int(attrs[attr])))
        return
    if op_type in ("Constant", "ConstantOfShape") and attrs.get("value") is not None:
        value = attrs["value"]  # an ir tensor or a numpy array (made into a tensor attribute)
        outs[0].type = ir.TensorType(value.dtype if isinstance(value.dtype, ir.DataType) else to_ir_dtype(value.dtype))
        return
    if schema is None:
        return
    types = _schema_types(schema)
    for j, out in enumerate(outs):
        type_str = types.output_type(j)
        if type_str is None:
            continue
        dt = bound.get(type_str) or _parse_type_str(type_str)
        if dt is not None:
            out.type = ir.TensorType(dt)

