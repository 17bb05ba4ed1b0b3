"""The chain a rule reads, written as data: nested op patterns matched from a value back to its producers.

A rule's ``match`` (:mod:`.rules`) reads its pattern with these and keeps what they cannot say as
code (a walk over Transposes, an evaluated table): ``Op("Add", Var("a", dims="b s h"),
Var("c", dims="b s h"), commutative=True)`` is a sum of two rank-3 values of one shape in either
order. What the patterns add over reading producers by hand:

- **commutative operands**: ``commutative=True`` tries both orders of a two-input op;
- **bound dims**: ``dims="b s h"`` names each axis; a name bound once must be the same dim
  wherever it appears again (symbolic or int: onnx_ir's dim equality), ``_`` is any dim and a
  number that length;
- **variants**: :class:`OneOf` tries patterns in turn (an optional bias is a variant with it and
  one without); an optional trailing input is :class:`Opt` (absent, or matching its pattern);
- **constant predicates**: :class:`Const` and :class:`Scalar` match constant values (by a
  predicate on the array, or a value); a test also sees the :class:`Match` so far, so it can
  compare with a dim or value bound before.

A match can start with names bound (``match(p, v, x=x)``, dims with ``dims={"size": 8}``): a
pattern then reads "the same ``x``".

:func:`match` returns the :class:`Match` (the names bound: values, nodes, dims and scalars) or the
:class:`~.rules.Miss` the first failing sub-pattern carries (``why=``: a :func:`~.rules.no_match`
where the nodes are not the pattern, a :func:`~.rules.miss` where a condition failed), so a rule
built on patterns still explains itself.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import onnx_ir as ir

from ..ir.constants import constant_tensor
from .rules import Miss, no_match


class Match(dict):
    """The names a match bound (values, nodes, scalars) and ``dims``: dim name → dim."""

    def __init__(self) -> None:
        super().__init__()
        self.dims: dict[str, Any] = {}
        self.why: Miss | None = None

    def __bool__(self) -> bool:  # a match that bound no name is still a match
        return True

    def fit(self, value: ir.Value | None, spec: str) -> bool:
        """Whether ``value``'s shape fits ``spec`` (see the module doc), binding its new names."""
        names = spec.split()
        shape = value.shape if value is not None else None
        if shape is None or len(shape) != len(names):
            return False
        bound = dict(self.dims)
        for name, dim in zip(names, shape, strict=True):
            if name == "_":
                continue
            if name.isdigit():
                if dim != int(name):
                    return False
            elif name in bound:
                if bound[name] != dim:
                    return False
            else:
                bound[name] = dim
        self.dims = bound
        return True

    def state(self) -> tuple:
        return dict(self), dict(self.dims)

    def restore(self, state: tuple) -> None:
        self.clear()
        self.update(state[0])
        self.dims = dict(state[1])


class Pattern:
    """A pattern for one value: :meth:`bind` checks it and binds its names into a :class:`Match`."""

    name: str | None = None
    why: Miss | None = None

    def bind(self, value: ir.Value | None, m: Match) -> bool:
        state = m.state()
        if self._bind(value, m):
            return True
        m.restore(state)
        if self.why is not None and m.why is None:  # the innermost explained failure (a Miss is falsy)
            m.why = self.why
        return False

    def _bind(self, value: ir.Value | None, m: Match) -> bool:
        raise NotImplementedError

    def _named(self, thing: object, m: Match) -> bool:
        """Bind ``self.name`` to ``thing``; a name bound before must be the same object."""
        if self.name is None:
            return True
        if self.name in m:
            return m[self.name] is thing
        m[self.name] = thing
        return True


class Var(Pattern):
    """Any value (not an omitted input), of shape ``dims`` and passing ``test`` when given."""

    def __init__(self, name: str | None = None, *, dims: str | None = None, dtype: ir.DataType | None = None,
                 test: Callable[[ir.Value, Match], Any] | None = None, why: Miss | None = None) -> None:
        self.name, self.dims, self.dtype, self.test, self.why = name, dims, dtype, test, why

    def _bind(self, value, m):
        if value is None or (self.dtype is not None and value.dtype != self.dtype):
            return False
        if (self.dims is not None and not m.fit(value, self.dims)) or (self.test is not None and not self.test(value, m)):
            return False
        return self._named(value, m)


class Const(Pattern):
    """A constant value whose array passes ``test`` (any constant without one); binds the array."""

    def __init__(self, name: str | None = None, test: Callable[[np.ndarray, Match], Any] | None = None, *,
                 why: Miss | None = None) -> None:
        self.name, self.test, self.why = name, test, why

    def _bind(self, value, m):
        tensor = constant_tensor(value)
        if tensor is None:
            return False
        array = np.asarray(tensor.numpy())
        return (self.test is None or bool(self.test(array, m))) and self._named(array, m)


class Scalar(Pattern):
    """A one-element constant (equal to ``equals`` when given); binds it as a float."""

    def __init__(self, name: str | None = None, equals: float | None = None, *, nonzero: bool = False) -> None:
        self.name, self.equals, self.nonzero = name, equals, nonzero

    def _bind(self, value, m):
        number = scalar(value)
        if number is None or (self.equals is not None and number != self.equals) or (self.nonzero and number == 0.0):
            return False
        return self._named(number, m)


class Op(Pattern):
    """A value computed by an op of ``op_type`` (a name, or a set of names) in ``domain`` whose
    inputs match ``inputs`` (as many, trailing :class:`Opt` ones may be absent; ``None`` matches an
    omitted input), attributes pass ``attrs`` (name → value or predicate on the value, ``None``
    when absent), with ``outputs`` outputs (any number when None), the value its output ``out``
    (a number, or None: any) of shape ``dims``. ``name`` binds the node, ``value`` the value."""

    def __init__(self, op_type: str | frozenset[str], *inputs: Pattern | None, name: str | None = None,
                 value: str | None = None, commutative: bool = False, attrs: dict[str, Any] | None = None,
                 dims: str | None = None, out: int | None = 0, outputs: int | None = None, domain: str = "",
                 why: Miss | None = None) -> None:
        self.op_types = frozenset({op_type}) if isinstance(op_type, str) else frozenset(op_type)
        self.inputs, self.name, self.value, self.commutative = inputs, name, value, commutative
        self.attrs, self.dims, self.out, self.outputs, self.domain, self.why = attrs or {}, dims, out, outputs, domain, why
        self.required = len(inputs) - sum(isinstance(p, Opt) for p in inputs)

    def _bind(self, value, m):
        node = value.producer() if value is not None else None
        if node is None or (self.out is not None and (len(node.outputs) <= self.out or node.outputs[self.out] is not value)):
            return False
        # the value's own dims first: its inputs' tests may read them
        return (self.dims is None or m.fit(value, self.dims)) and self.bind_node(node, m) and \
            (self.value is None or _bind_name(self.value, value, m))

    def bind_node(self, node: ir.Node, m: Match) -> bool:
        """Match ``node`` itself (a rule's anchor) against this pattern."""
        if node.op_type not in self.op_types or node.domain not in _domains(self.domain):
            return False
        if not self.required <= len(node.inputs) <= len(self.inputs) or not self._named(node, m):
            return False
        if self.outputs is not None and len(node.outputs) != self.outputs:
            return False
        for key, want in self.attrs.items():
            attr = node.attributes.get(key)
            got = None if attr is None else attr.value
            if not (want(got) if callable(want) else got == want):
                return False
        orders = [self.inputs, self.inputs[::-1]] if self.commutative and len(self.inputs) == 2 else [self.inputs]
        for order in orders:
            state = m.state()
            inputs = list(node.inputs) + [None] * (len(order) - len(node.inputs))
            if all(_input(p, v, m) for p, v in zip(order, inputs, strict=True)):
                return True
            m.restore(state)
        return False


class OneOf(Pattern):
    """The first of ``variants`` that matches (variants of one computation: with a bias or without)."""

    def __init__(self, *variants: Pattern, why: Miss | None = None) -> None:
        self.variants, self.why = variants, why

    def _bind(self, value, m):
        return any(variant.bind(value, m) for variant in self.variants)


class Opt(Pattern):
    """An optional input: omitted (or absent at the end), or matching ``pattern``."""

    def __init__(self, pattern: Pattern) -> None:
        self.pattern = pattern

    def _bind(self, value, m):
        return value is None or self.pattern.bind(value, m)


def _input(pattern: Pattern | None, value: ir.Value | None, m: Match) -> bool:
    return value is None if pattern is None else pattern.bind(value, m)


def _bind_name(name: str, thing: object, m: Match) -> bool:
    if name in m:
        return m[name] is thing
    m[name] = thing
    return True


def _domains(domain: str) -> tuple[str, ...]:
    return ("", "ai.onnx") if domain in ("", "ai.onnx") else (domain,)


def scalar(value: ir.Value | None) -> float | None:
    """The number a one-element constant holds; None for anything else."""
    tensor = constant_tensor(value)
    if tensor is None or int(np.prod([int(d) for d in tensor.shape])) != 1:
        return None
    return float(np.asarray(tensor.numpy()).reshape(-1)[0])


def match(pattern: Pattern, value: ir.Value | ir.Node | None, why: Miss | None = None, *,
          dims: dict[str, Any] | None = None, **bound: Any) -> Match | Miss:
    """``pattern`` at ``value`` (or at a node, for an :class:`Op` pattern at a rule's anchor), with
    ``bound`` names and ``dims`` bound first: the :class:`Match`, or the Miss of the first failing
    sub-pattern that carries one (else ``why``, else a generic :func:`~.rules.no_match`)."""
    m = Match()
    m.update(bound)
    m.dims.update(dims or {})
    if isinstance(value, ir.Node):
        assert isinstance(pattern, Op), "a node matches an Op pattern only"
        found = pattern.bind_node(value, m)
        if not found and pattern.why is not None and m.why is None:
            m.why = pattern.why
    else:
        found = pattern.bind(value, m)
    if found:
        return m
    if m.why is not None:
        return m.why
    return why if why is not None else no_match("the nodes are not the rule's pattern")


__all__ = ["Const", "Match", "OneOf", "Op", "Opt", "Pattern", "Scalar", "Var", "match", "scalar"]
