"""to_onnx end to end with the mini pack: symbolic dims, runtime params, determinism, files, x64."""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import onnx
import pytest
from jax2onnx import allclose, to_onnx
from jax2onnx.errors import InputSpecError, LoweringError


def _dims(value_info):
    return [d.dim_param or d.dim_value for d in value_info.type.tensor_type.shape.dim]


def test_symbolic_dims_become_dim_param(mini_registry):
    model = to_onnx(lambda x, y: jnp.sin(x) + y, [("B", 30), ("B", 30)])
    assert _dims(model.graph.input[0]) == ["B", 30]
    assert _dims(model.graph.input[1]) == ["B", 30]
    assert _dims(model.graph.output[0]) == ["B", 30]
    onnx.checker.check_model(model, full_check=True)
    for b in (1, 4, 7):
        x = np.random.rand(b, 30).astype(np.float32)
        assert allclose(lambda x, y: jnp.sin(x) + y, model, [x, x])


def test_shape_arithmetic_on_symbols_is_computed_in_graph(mini_registry):
    def f(x):  # (B, 3) -> (3*B,) and (B//2... ) via reshape
        return jnp.sin(x).reshape(-1), x.reshape((x.shape[0] * 3,))

    model = to_onnx(f, [("B", 3)])
    assert _dims(model.graph.output[0]) == ["3*B"]
    assert "Shape" in {n.op_type for n in model.graph.node}
    for b in (2, 5):
        assert allclose(f, model, [np.random.rand(b, 3).astype(np.float32)])


def test_input_dims_that_are_products_of_symbols(mini_registry):
    spec = jax.ShapeDtypeStruct(jax.export.symbolic_shape("B*H, 4"), jnp.float32)
    b, h = jax.export.symbolic_shape("B, H", scope=spec.shape[0].scope)
    spec_y = jax.ShapeDtypeStruct((b, h, 4), jnp.float32)

    def f(x, y):
        return x + y.reshape((-1, 4))

    model = to_onnx(f, [spec, spec_y])
    for bb, hh in ((2, 3), (3, 5)):
        x = np.random.rand(bb * hh, 4).astype(np.float32)
        y = np.random.rand(bb, hh, 4).astype(np.float32)
        assert allclose(f, model, [x, y])


def test_dim_solved_from_a_multiple(mini_registry):
    def f(x):  # x: (2*B, 3); reshape to (B, 6) needs B = dim0 // 2 in the graph
        return x.reshape((x.shape[0] // 2, 6))

    model = to_onnx(f, [("2*B", 3)])
    assert _dims(model.graph.output[0]) == ["B", 6]
    for b in (1, 4):
        assert allclose(f, model, [np.random.rand(2 * b, 3).astype(np.float32)])


def test_input_params_become_named_graph_inputs(mini_registry):
    def f(x, scale=1.0, flag=True):
        return x * scale

    model = to_onnx(f, [("B", 3)], input_params={"scale": 2.0})
    names = [i.name for i in model.graph.input]
    assert names == ["x", "scale"]
    assert model.graph.input[1].type.tensor_type.elem_type == onnx.TensorProto.FLOAT
    x = np.random.rand(2, 3).astype(np.float32)
    assert allclose(f, model, [x], {"scale": np.float32(3.5)})


def test_bool_input_param_dtype(mini_registry):
    def f(x, deterministic=True):
        return x * 2.0

    model = to_onnx(f, [(3,)], input_params={"deterministic": True})
    assert model.graph.input[1].type.tensor_type.elem_type == onnx.TensorProto.BOOL


def test_reexport_is_byte_identical(mini_registry):
    w = np.random.default_rng(0).standard_normal((3, 3)).astype(np.float32)

    def f(x):
        return jnp.sin(x @ w) + w.sum()

    a = to_onnx(f, [("B", 3)]).SerializeToString()
    b = to_onnx(f, [("B", 3)]).SerializeToString()
    assert a == b


def test_identical_constants_stored_once(mini_registry):
    w = np.arange(12, dtype=np.float32).reshape(3, 4)
    w2 = w.copy()

    def f(x):
        return x @ w + x @ w2

    model = to_onnx(f, [("B", 3)])
    big = [i for i in model.graph.initializer if list(i.dims) == [3, 4]]
    assert len(big) == 1


def test_output_path_written_atomically(mini_registry, tmp_path):
    path = tmp_path / "sub" / "m.onnx"
    proto = to_onnx(lambda x: jnp.cos(x), [(2,)], output_path=path)
    assert onnx.load(str(path)) == proto
    assert [p.name for p in path.parent.iterdir()] == ["m.onnx"]


def test_failed_export_leaves_no_file(core_only_registry, tmp_path):
    path = tmp_path / "m.onnx"
    with pytest.raises(Exception):
        to_onnx(lambda x: jnp.sin(x), [(3,)], output_path=path)
    assert list(tmp_path.iterdir()) == []


def test_failed_export_keeps_an_existing_file_intact(mini_registry, tmp_path):
    path = tmp_path / "m.onnx"
    to_onnx(lambda x: jnp.sin(x), [(3,)], output_path=path)
    before = path.read_bytes()
    with pytest.raises(Exception):
        to_onnx(lambda x: jnp.tan(x), [(3,)], output_path=path)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["m.onnx"]


def test_float64_end_to_end_and_x64_restored(mini_registry):
    assert not jax.config.read("jax_enable_x64")
    model = to_onnx(lambda x: jnp.sin(x) * 2.0, [("B", 3)], enable_double_precision=True)
    assert not jax.config.read("jax_enable_x64")
    assert model.graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.DOUBLE
    assert model.graph.output[0].type.tensor_type.elem_type == onnx.TensorProto.DOUBLE
    x = np.random.rand(4, 3)
    assert allclose(lambda x: jnp.sin(x) * 2.0, model, [x], rtol=1e-12, atol=1e-12)


def test_x64_restored_after_error(core_only_registry):
    assert not jax.config.read("jax_enable_x64")
    with pytest.raises(Exception):
        to_onnx(lambda x: jnp.sin(x), [(3,)], enable_double_precision=True)
    assert not jax.config.read("jax_enable_x64")


def test_jit_vmap_grad_checkpoint_inside_convert(mini_registry):
    def energy(p):
        return jnp.sum(p * p * p)

    def f(x):
        forces = jax.vmap(jax.grad(energy))(x)
        return jax.jit(jnp.sin)(x) + jax.checkpoint(lambda y: y * 2.0)(forces)

    model = to_onnx(f, [("N", 3)])
    assert allclose(f, model, [np.random.rand(5, 3).astype(np.float32)])


def test_custom_jvp_function_is_inlined(mini_registry):
    @jax.custom_jvp
    def g(x):
        return jnp.sin(x)

    g.defjvp(lambda p, t: (g(p[0]), jnp.cos(p[0]) * t[0]))
    model = to_onnx(lambda x: g(x) + 1.0, [(3,)])
    assert "Sin" in {n.op_type for n in model.graph.node}


def test_lowering_bug_is_reported_with_primitive_and_location(tmp_path):
    from jax2onnx import hookimpl
    from jax2onnx.plugin import Lowering
    from mini_pack import registry_in_use

    class Bad:
        @hookimpl
        def jax2onnx_lowerings(self):
            return [Lowering("sin", lambda ctx, x: ctx.cast(x, np.int32))]

    with registry_in_use(("bad", Bad())), pytest.raises(LoweringError) as err:
        to_onnx(lambda x: jnp.sin(x), [(3,)])
    assert "'sin'" in str(err.value) and "test_conversion.py" in str(err.value)


def test_graph_carries_types_and_shapes_everywhere(mini_registry):
    model = to_onnx(lambda x: jnp.sin(x) * jnp.cos(x) + 1.0, [("B", 3)])
    typed = {vi.name for vi in model.graph.value_info}
    for node in model.graph.node:
        for out in node.output:
            if out not in {o.name for o in model.graph.output}:
                assert out in typed, f"{out} has no value_info"
    assert model.producer_name == "jax2onnx"
    assert model.opset_import[0].version == 23


def test_external_data_is_written_beside_the_model(mini_registry, tmp_path):
    w = np.random.default_rng(0).standard_normal((64, 64)).astype(np.float32)

    def f(x):
        return jnp.sin(x @ w)

    path = tmp_path / "big.onnx"
    proto = to_onnx(f, [("B", 64)], output_path=path, external_data=True)
    model_file, data_file = sorted(p.name for p in tmp_path.iterdir())
    assert model_file == "big.onnx" and re.fullmatch(r"big\.onnx\.[0-9a-f]{16}\.data", data_file)
    weight = next(i for i in proto.graph.initializer if list(i.dims) == [64, 64])
    assert weight.data_location == onnx.TensorProto.EXTERNAL
    assert {e.key: e.value for e in weight.external_data}["location"] == data_file
    assert allclose(f, str(path), [np.random.rand(3, 64).astype(np.float32)])


def test_external_data_needs_a_path(mini_registry):
    with pytest.raises(Exception) as err:
        to_onnx(lambda x: x * 2.0, [(3,)], external_data=True)
    assert "output_path" in str(err.value)


def test_64_bit_specs_follow_jax_without_x64(mini_registry):
    model = to_onnx(lambda i: i * 2, [jax.ShapeDtypeStruct((3,), np.int64)])
    assert model.graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.INT32
    model = to_onnx(lambda i: i * 2, [jax.ShapeDtypeStruct((3,), np.int64)], enable_double_precision=True)
    assert model.graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.INT64


def test_missing_inputs_are_named(mini_registry):
    with pytest.raises(InputSpecError, match=r"inputs is missing \(None\)"):
        to_onnx(lambda x: x, None)
