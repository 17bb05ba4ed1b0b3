"""Library calls (``Lowerings.register_library``): a pack's lowering of a library function is found in
the trace itself, never by replacing the function. The library here is ``toy_library`` (a jitted
function with a static parameter, a jitted one taking its parameter as an operand, a plain Python
function); the lowerings are the test's own, on top of the core-only ``mini_pack``."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import onnx
import toy_library as toy
from jax2onnx import allclose, to_onnx
from jax2onnx.lower import library
from jax2onnx.plugin import Lowerings
from mini_pack import lowerings as mini_lowerings
from mini_pack import pack_of, registry_in_use


def _literal(v):
    return v.val if hasattr(v, "val") and not hasattr(v, "count") else None


def _lowerings(seen: list, *, wrong_axis: bool = False, elementwise: bool = True) -> Lowerings:
    lowerings = Lowerings()

    def recognize_sum_of_squares(site):
        (reduce,) = site.eqns("reduce_sum")
        axis = reduce.params["axes"][0]
        # a deliberately wrong reading must be caught by core's verifying retrace
        return {"axis": axis + 1 if wrong_axis else axis}

    @lowerings.register_library("toy_library.sum_of_squares", recognize=recognize_sum_of_squares)
    def lower_sum_of_squares(ctx, x):
        seen.append(("sum_of_squares", dict(ctx.marked.params)))
        return ctx.op.ReduceSumSquare(x, ctx.i64([ctx.marked.params["axis"]]), keepdims=0)

    def recognize_scaled_sin(site):
        scale = site.literal(1)  # passed as an operand: a literal when the caller gave a constant
        return None if scale is None else {"scale": float(scale)}

    @lowerings.register_library("toy_library.scaled_sin", recognize=recognize_scaled_sin)
    def lower_scaled_sin(ctx, x):
        seen.append(("scaled_sin", dict(ctx.marked.params)))
        return ctx.op.Mul(ctx.op.Sin(x), ctx.const_like(ctx.marked.params["scale"], ctx.avals_in[0]))

    def recognize_shifted_relu(site):
        (sub,) = site.eqns("sub")
        shift = _literal(sub.invars[1])
        return None if shift is None else {"shift": float(shift) + (1.0 if wrong_axis else 0.0)}

    @lowerings.register_library("toy_library.shifted_relu", recognize=recognize_shifted_relu)
    def lower_shifted_relu(ctx, x):
        seen.append(("shifted_relu", dict(ctx.marked.params)))
        return ctx.op.Relu(ctx.op.Sub(x, ctx.const_like(ctx.marked.params["shift"], ctx.avals_in[0])))

    @lowerings.register_library("toy_library.capped", recognize=lambda site: {}, elementwise=elementwise)
    def lower_capped(ctx, x):
        seen.append(("capped", dict(ctx.marked.params)))
        return ctx.op.Min(x, ctx.const_like(1.0, ctx.avals_in[0]))

    # what capped's own equations need when it is not fused (mini_pack has neither)
    lowerings.add("gt", lambda ctx, a, b: ctx.op.Greater(a, b))
    lowerings.add("select_n", lambda ctx, pred, if_false, if_true: ctx.op.Where(pred, if_true, if_false))
    return lowerings


def _export(fn, shapes, seen, **kw):
    with registry_in_use(("jax2onnx-librarytest", pack_of(mini_lowerings, _lowerings(seen, **kw)))):
        model = to_onnx(fn, shapes)
    onnx.checker.check_model(model, full_check=True)
    return model


def _ops(model):
    return [n.op_type for n in model.graph.node]


X = np.linspace(-3, 3, 12).astype(np.float32).reshape(3, 4)


def test_calls_are_recognized_with_their_parameters():
    def fn(x):
        return toy.sum_of_squares(x, axis=0) + toy.scaled_sin(x, 0.5) + toy.shifted_relu(x, 2.0)

    seen: list = []
    model = _export(fn, [(3, 4)], seen)
    assert sorted(seen, key=str) == sorted([("sum_of_squares", {"axis": 0}), ("scaled_sin", {"scale": 0.5}),
                                            ("shifted_relu", {"shift": 2.0})], key=str)
    assert "ReduceSumSquare" in _ops(model) and "Relu" in _ops(model) and "Max" not in _ops(model)
    assert allclose(fn, model, [X])


def test_the_library_is_never_replaced():
    before = (toy.sum_of_squares, toy.scaled_sin, toy.shifted_relu)
    seen: list = []
    _export(lambda x: toy.shifted_relu(toy.sum_of_squares(x)), [(3, 4)], seen)
    assert (toy.sum_of_squares, toy.scaled_sin, toy.shifted_relu) == before
    assert [name for name, _ in seen] == ["sum_of_squares", "shifted_relu"]


def test_a_wrong_guess_declines_to_the_body():
    def fn(x):
        return toy.sum_of_squares(x, axis=0) + toy.shifted_relu(x, 2.0)

    seen: list = []
    model = _export(fn, [(3, 4)], seen, wrong_axis=True)
    # axis 1 does not retrace to the body summing axis 0, shift 3 not to the equations subtracting
    # 2: neither is lowered as such, both keep their equations
    assert seen == []
    assert not {"ReduceSumSquare", "Relu"} & set(_ops(model)) and {"ReduceSum", "Max"} <= set(_ops(model))
    assert allclose(fn, model, [X])


def test_a_traced_parameter_declines():
    def fn(x, scale):
        return toy.scaled_sin(x, scale)  # the scale is an input: no literal to read it from

    seen: list = []
    model = _export(fn, [(3, 4), ()], seen)
    assert seen == []
    assert allclose(fn, model, [X, np.float32(0.25)])


def test_under_vmap_the_batched_call_is_verified_again():
    # The jit equation under vmap sums a shifted axis: the recognizer reads that axis and the
    # retrace at the batched shapes confirms it, so the fused op stays and is still exact.
    fn = jax.vmap(lambda x: toy.sum_of_squares(x, axis=0) + toy.shifted_relu(x, 1.0).sum(0))
    seen: list = []
    model = _export(fn, [(2, 3, 4)], seen)
    xb = np.stack([X, -X])
    assert allclose(fn, model, [xb])
    assert ("sum_of_squares", {"axis": 1}) in seen


def test_an_elementwise_call_under_vmap_is_recognized_as_the_vmapped_function():
    # Under vmap JAX batches capped's inner jnp.where into other equations than a fresh trace at
    # the batched shape: only a lowering registered elementwise is tried as the vmapped function.
    fn = jax.vmap(jax.vmap(toy.capped))
    xb = np.stack([X, -X])
    fused: list = []
    model = _export(fn, [(2, 3, 4)], fused)
    assert fused == [("capped", {})] and _ops(model) == ["Min"]
    assert allclose(fn, model, [xb])
    plain: list = []
    model = _export(fn, [(2, 3, 4)], plain, elementwise=False)
    assert plain == [] and "Min" not in _ops(model)
    assert allclose(fn, model, [xb])


def test_under_grad_the_backward_pass_keeps_its_equations():
    fn = jax.grad(lambda x: toy.sum_of_squares(jnp.sin(x), axis=0).sum())
    seen: list = []
    model = _export(fn, [(3, 4)], seen)
    assert allclose(fn, model, [X])
    assert all(name != "sum_of_squares" or params == {"axis": 0} for name, params in seen)


def test_keys_are_the_function_code():
    resolved = library.resolve("toy_library.sum_of_squares")
    assert resolved is not None and resolved.jitted
    code = toy.sum_of_squares.__wrapped__.__code__
    assert resolved.key == (code.co_filename, code.co_firstlineno, "sum_of_squares")
    plain = library.resolve("toy_library.shifted_relu")
    assert plain is not None and not plain.jitted
    assert library.resolve("toy_library.no_such_function") is None
    assert library.resolve("a_library_nobody_imported.fn") is None


def test_a_function_patch_is_refused_naming_the_replacements():
    """``jax2onnx.plugin.Patch`` (the earlier API that replaced a library attribute while exporting) is
    gone: building one says what to use instead, so a pack written for it fails to load with the fix."""
    import pytest
    from jax2onnx.plugin import Patch

    with pytest.raises(TypeError, match=r"register_library.*ModulePatch"):
        Patch("jax.nn", "relu", lambda original: original)
