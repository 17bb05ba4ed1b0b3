"""The jnp pack's recognizers: pure functions of a traced call (its body, operands and avals) that
read the call's static parameters back, checked here without exporting; and that an export replaces
no ``jax.numpy`` / ``jax.scipy`` / ``jax.nn`` attribute (the fusions come from the trace)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import jax.scipy.linalg
import numpy as np
import pytest
from jax import export
from jax2onnx import compat, to_onnx
from jax2onnx.lower import library
from jax2onnx_jnp import (
    creation,
    indexing,
    linalg,
    linalg_inverse,
    pad,
    reductions,
    roll,
    selection,
    shape_ops,
    sorting,
)
from jax2onnx_jnp._library import ARRAYS, OPERANDS

X = jax.ShapeDtypeStruct((3, 4), jnp.float32)
B = export.symbolic_shape("B")[0]


def _jit_site(path, fn, *specs):
    """The site of the first jit equation of the library function at ``path`` in ``fn``'s trace."""
    resolved = library.resolve(path)
    closed = jax.make_jaxpr(fn)(*specs)
    eqn = library.find_jit(closed, resolved.key)
    assert eqn is not None, f"{path} is not a jit equation of the trace"
    return library.LibrarySite(path, compat.call_body(eqn), list(eqn.invars), [v.aval for v in eqn.invars],
                               [v.aval for v in eqn.outvars], jitted=True)


def _plain_site(path, fn, *specs):
    """The site of a plain function's call that is all of ``fn``'s trace."""
    closed = jax.make_jaxpr(fn)(*specs)
    eqns = list(closed.jaxpr.eqns)
    inputs = library.region_inputs(eqns)
    outputs = list(closed.jaxpr.outvars)
    body = compat.ClosedJaxpr(compat.region_jaxpr(inputs, outputs, eqns), ())
    return library.LibrarySite(path, body, inputs, [v.aval for v in inputs], [v.aval for v in outputs], jitted=False)


def _strip(params):
    return {k: v for k, v in params.items() if k not in (ARRAYS, OPERANDS)}


JITTED = [
    ("jax.numpy.clip", selection.recognize_clip, lambda x: jnp.clip(x, 0.0, 1.0), {"min": 0.0, "max": 1.0}),
    ("jax.numpy.clip", selection.recognize_clip, lambda x: jnp.clip(x, max=2), {"max": 2}),
    ("jax._src.numpy.util:_where", selection.recognize_where, lambda x: jnp.where(x > 0, x, 0.5), {"y": 0.5}),
    ("jax._src.numpy.reductions:_var", reductions.recognize_moment, lambda x: jnp.var(x, axis=1, ddof=1),
     {"axis": (1,), "keepdims": False, "correction": 1}),
    ("jax._src.numpy.reductions:_std", reductions.recognize_moment, lambda x: jnp.std(x, axis=0, keepdims=True),
     {"axis": (0,), "keepdims": True, "correction": 0}),
    ("jax.numpy.linalg.norm", reductions.recognize_norm, lambda x: jnp.linalg.norm(x, axis=1),
     {"ord": None, "axis": (1,), "keepdims": False}),
    ("jax.numpy.linalg.norm", reductions.recognize_norm, lambda x: jnp.linalg.norm(x, ord=1, axis=0),
     {"ord": 1, "axis": (0,), "keepdims": False}),
    ("jax.numpy.cumsum", reductions.recognize_cumsum, lambda x: jnp.cumsum(x, axis=1), {"axis": 1}),
    ("jax.numpy.cumsum", reductions.recognize_cumsum, lambda x: jnp.cumsum(x), {"axis": None}),
    ("jax.numpy.sort", sorting.recognize_sort, lambda x: jnp.sort(x, axis=0, descending=True),
     {"axis": 0, "stable": True, "descending": True}),
    ("jax.numpy.argsort", sorting.recognize_sort, lambda x: jnp.argsort(x),
     {"axis": 1, "stable": True, "descending": False}),
    ("jax._src.numpy.indexing:_take", indexing.recognize_take, lambda x: jnp.take(x, jnp.array([2, 0]), axis=1,
     mode="clip"), {"axis": 1, "mode": "clip", "fill_value": None, "unique_indices": False,
                    "indices_are_sorted": False}),
    ("jax._src.numpy.indexing:_take", indexing.recognize_take, lambda x: jnp.take(x, jnp.array([5])),
     {"axis": None, "mode": None, "fill_value": None, "unique_indices": False, "indices_are_sorted": False}),
    ("jax.numpy.take_along_axis", indexing.recognize_take_along_axis,
     lambda x: jnp.take_along_axis(x, jnp.zeros((3, 4), jnp.int32), axis=1, fill_value=-1.0),
     {"axis": 1, "mode": None, "fill_value": -1.0}),
    ("jax._src.numpy.lax_numpy:_pad", pad.recognize_pad, lambda x: jnp.pad(x, ((1, 2), (0, 1)), mode="edge"),
     {"pad_width": ((1, 2), (0, 1)), "mode": "edge", "constant_values": 0, "stat_length": None, "end_values": 0,
      "reflect_type": "even"}),
    ("jax._src.numpy.lax_numpy:_pad", pad.recognize_pad, lambda x: jnp.pad(x, 1, constant_values=2.5),
     {"pad_width": ((1, 1), (1, 1)), "mode": "constant", "constant_values": 2.5, "stat_length": None,
      "end_values": 0, "reflect_type": "even"}),
    ("jax._src.numpy.lax_numpy:_roll_static", roll.recognize_roll, lambda x: jnp.roll(x, (-1, 5), axis=(0, 1)),
     {"shift": (2, 1), "axis": (0, 1)}),
]


@pytest.mark.parametrize(("path", "recognize", "fn", "expected"), JITTED, ids=[f"{c[0]}-{i}" for i, c in enumerate(JITTED)])
def test_jitted_call_params_are_read_back(path, recognize, fn, expected):
    assert _strip(recognize(_jit_site(path, fn, X))) == expected


def test_where_names_its_array_operands():
    site = _jit_site("jax._src.numpy.util:_where", lambda x: jnp.where(x > 0, 1, x), X)
    assert selection.recognize_where(site) == {"x": 1, ARRAYS: ("condition", "y"), OPERANDS: ("condition", "x", "y")}


def test_roll_along_a_symbolic_axis_reads_the_shift_from_the_piece_length():
    site = _jit_site("jax._src.numpy.lax_numpy:_roll_static", lambda x: jnp.roll(x, -7, axis=0),
                     jax.ShapeDtypeStruct((B, 3), jnp.float32))
    assert roll.recognize_roll(site) == {"shift": (-7,), "axis": (0,)}


@pytest.mark.parametrize(("path", "recognize", "fn", "spec"), [
    ("jax.numpy.clip", selection.recognize_clip, lambda x: jnp.clip(x, jnp.zeros(4)), X),  # array bound: no Clip
    ("jax.numpy.cumsum", reductions.recognize_cumsum, lambda x: jnp.cumsum(x, dtype=jnp.int32), X),
    ("jax.numpy.take_along_axis", indexing.recognize_take_along_axis,  # a broadcast axis: no GatherElements
     lambda x: jnp.take_along_axis(x, jnp.zeros((1, 4), jnp.int32), axis=1), X),
    ("jax._src.numpy.lax_numpy:_pad", pad.recognize_pad,  # reflecting farther than the axis: not one Pad
     lambda x: jnp.pad(x, ((4, 0), (0, 0)), mode="reflect"), X),
    ("jax._src.numpy.reductions:_var", reductions.recognize_moment, lambda x: jnp.var(x, axis=1, ddof=x[0, 0]), X),
])
def test_forms_without_a_single_op_decline(path, recognize, fn, spec):
    assert recognize(_jit_site(path, fn, spec)) is None


PLAIN = [
    ("jax.numpy.sum", reductions.recognize_keepdims_reduction, lambda x: jnp.sum(x, axis=(0, 1), keepdims=True),
     {"axis": (0, 1), "keepdims": True}),
    ("jax.numpy.max", reductions.recognize_keepdims_reduction, lambda x: jnp.max(x, axis=1), None),  # lax's own
    ("jax.numpy.mean", reductions.recognize_mean, lambda x: jnp.mean(x), {"axis": None, "keepdims": False}),
    ("jax.nn.logsumexp", reductions.recognize_logsumexp, lambda x: jax.nn.logsumexp(x, axis=-1, keepdims=True),
     {"axis": (1,), "keepdims": True}),
    ("jax.numpy.repeat", shape_ops.recognize_repeat, lambda x: jnp.repeat(x, 3, axis=1), {"repeats": 3, "axis": 1}),
    ("jax.numpy.repeat", shape_ops.recognize_repeat, lambda x: jnp.repeat(x, 2), {"repeats": 2, "axis": None}),
]


@pytest.mark.parametrize(("path", "recognize", "fn", "expected"), PLAIN, ids=[f"{c[0]}-{i}" for i, c in enumerate(PLAIN)])
def test_plain_call_params_are_read_back(path, recognize, fn, expected):
    assert recognize(_plain_site(path, fn, X)) == expected


def test_select_orders_conditions_choices_and_default():
    cond = jax.ShapeDtypeStruct((3, 4), jnp.bool_)
    site = _plain_site("jax.numpy.select", lambda c, a, d: jnp.select([c], [a], d), cond, X, X)
    params, order = selection.recognize_select(site)
    assert params == {"n": 1}
    # region operands in order of first use: the condition (stack), the default, the choice (select_n)
    assert [site.operands[i] for i in order] == [site.operands[0], site.operands[2], site.operands[1]]


@pytest.mark.parametrize(("subscripts", "shapes"), [
    ("ij,jk->ik", [(2, 3), (3, 4)]),
    ("bij,bjk->bki", [(5, 2, 3), (5, 3, 4)]),  # the body reads b first: dot_general b a
    ("...ij,jk,k", [(5, 2, 3), (3, 4), (4,)]),  # three operands, used in the order k, jk, ...ij
    ("ij,ij", [(3, 3), (3, 3)]),  # the same avals: only the order whose trace is the body fits
])
def test_einsum_subscripts_and_operand_order_are_read_back(subscripts, shapes):
    closed = jax.make_jaxpr(lambda *xs: jnp.einsum(subscripts, *xs))(*[jax.ShapeDtypeStruct(s, jnp.float32)
                                                                          for s in shapes])
    eqns = list(closed.jaxpr.eqns)
    inputs = library.region_inputs(eqns)  # in order of first use
    body = compat.ClosedJaxpr(compat.region_jaxpr(inputs, list(closed.jaxpr.outvars), eqns), ())
    site = library.LibrarySite("jax.numpy.einsum", body, inputs, [v.aval for v in inputs],
                               [v.aval for v in closed.jaxpr.outvars], jitted=False)
    params, order = linalg.recognize_einsum(site)
    assert params == {"subscripts": subscripts}
    # the region's inputs in that order are the call's arguments
    assert [inputs[i] for i in order] == list(closed.jaxpr.invars)


def test_einsum_declines_a_region_named_otherwise():
    spec = jax.ShapeDtypeStruct((2, 3), jnp.float32)

    def fn(a, b):
        with jax.named_scope("dense"):
            return a @ b.T

    assert linalg.recognize_einsum(_plain_site("jax.numpy.einsum", fn, spec, spec)) is None


def test_arange_stop_is_the_length_read_back():
    site = _plain_site("jax.numpy.arange", lambda x: jnp.arange(1, x.shape[0] * 2, 3),
                       jax.ShapeDtypeStruct((B, 2), jnp.float32))
    params = creation.recognize_arange(site)
    assert (params["start"], params["step"], params["dtype"]) == (1, 3, np.dtype(np.int32))
    assert str(params["stop"]) == "2*B"  # the simplest stop of that length: the user's own here
    retraced = jax.make_jaxpr(lambda: jnp.arange(1, params["stop"], 3, dtype=params["dtype"]))()
    assert str(retraced.jaxpr.eqns[0].params["shape"]) == str(site.eqns("iota")[0].params["shape"])


@pytest.mark.parametrize(("fn", "specs", "expected"), [
    (jnp.linalg.solve, [(4, 4), (4,)], {"vmapped": 0, "mapped": (True, True), "vector": True}),
    (jax.vmap(jnp.linalg.solve), [(2, 4, 4), (2, 4)], {"vmapped": 1, "mapped": (True, True), "vector": True}),
    (jax.vmap(jnp.linalg.solve, in_axes=(None, 0)), [(4, 4), (2, 4)],
     {"vmapped": 1, "mapped": (False, True), "vector": True}),
    # vmapping over the matrices only (or over right-hand-side matrices only) gives the very body of
    # a direct call on the batched operands: the same computation, read as that
    (jax.vmap(jnp.linalg.solve, in_axes=(0, None)), [(2, 4, 4), (4,)],
     {"vmapped": 0, "mapped": (True, True), "vector": True}),
    (jax.vmap(jnp.linalg.solve, in_axes=(None, 0)), [(4, 4), (2, 4, 3)],
     {"vmapped": 0, "mapped": (True, True), "vector": False}),
])
def test_solve_finds_how_the_call_was_vmapped(fn, specs, expected):
    site = _jit_site("jax.numpy.linalg.solve", fn, *[jax.ShapeDtypeStruct(s, jnp.float32) for s in specs])
    assert linalg_inverse.recognize_solve(site) == expected


def test_scipy_solve_pos_is_not_the_lu_solve():
    spec = jax.ShapeDtypeStruct((4, 4), jnp.float32)
    gen = _jit_site("jax._src.scipy.linalg:_solve", lambda a, b: jax.scipy.linalg.solve(a, b, assume_a="sym"), spec, spec)
    pos = _jit_site("jax._src.scipy.linalg:_solve", lambda a, b: jax.scipy.linalg.solve(a, b, assume_a="pos"), spec, spec)
    assert linalg_inverse.recognize_scipy_solve(gen)["assume_a"] == "gen"  # the same body as "sym"
    assert linalg_inverse.recognize_scipy_solve(pos) is None


_LIBRARY_NAMES = {
    jnp: ["clip", "where", "select", "sum", "mean", "max", "min", "prod", "var", "std", "take", "take_along_axis",
          "pad", "tile", "repeat", "roll", "sort", "argsort", "cumsum", "stack", "arange",
          "einsum"],
    jnp.linalg: ["solve", "inv", "norm"],
    jax.scipy.linalg: ["solve"],
    jax.nn: ["logsumexp"],
}


def test_an_export_replaces_no_library_attribute():
    before = {(mod.__name__, n): getattr(mod, n) for mod, names in _LIBRARY_NAMES.items() for n in names}

    def model(x, idx):
        y = jnp.clip(jnp.where(x > 0, x, 0.5), -1.0, 1.0) + jnp.mean(x, axis=1, keepdims=True)
        y = y + jnp.take_along_axis(jnp.sort(x, axis=1), idx, axis=1) + jnp.roll(x, 1, axis=1)
        y = y + jnp.einsum("ij,j->ij", x, x[0])
        return jnp.pad(y, 1, mode="edge"), jax.nn.logsumexp(x, axis=1), jnp.linalg.norm(x, axis=1)

    to_onnx(model, [X, jax.ShapeDtypeStruct((3, 4), jnp.int32)])
    after = {(mod.__name__, n): getattr(mod, n) for mod, names in _LIBRARY_NAMES.items() for n in names}
    changed = [key for key in before if after[key] is not before[key]]
    assert not changed
    assert type(jnp.clip).__name__ == "PjitFunction" and type(jnp.mean).__name__ == "function"
