"""The other equinox layers: transposed convolutions (``conv.py`` has Conv, ``pooling.py`` the pools), Embedding, Dropout, PReLU, BatchNorm (inference),
GRUCell/LSTMCell in ``lax.scan``, MLP.

None needs a lowering of this pack: equinox implements them with ``lax.conv_general_dilated``,
``lax.reduce_window``, indexing, ``jnp.where`` and the cells' Linear-and-gate arithmetic, which the
lax/jnp packs lower (``Conv``/``ConvTranspose``, ``MaxPool``/``AveragePool``-like reductions,
``Gather``, ``Where``). Equinox's convolutions are channels-first, ONNX's layout, so no Transposes
are needed. These testcases pin that each converts and matches, unbatched and under ``jax.vmap``
(the way equinox layers are batched); ``eqx.nn.Linear`` inside MLPs and cells is the fused
MatMul + Add of ``linear.py`` on the unbatched call.
"""

from __future__ import annotations

import inspect

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax2onnx.testing import Component, Testcase

from ._testing import model, randomized


def _ids(rng, shape, dtype):
    return rng.integers(0, 10, size=shape).astype(dtype)


def _batch_norm():
    """eqx.nn.BatchNorm in inference mode, batched with its axis name, its State closed over."""
    # equinox >= 0.13 warns unless `mode` is given; 0.12 has no such parameter.
    mode = {"mode": "batch"} if "mode" in inspect.signature(eqx.nn.BatchNorm.__init__).parameters else {}
    bn, state = eqx.nn.make_with_state(eqx.nn.BatchNorm)(4, axis_name="batch", inference=True, **mode)
    bn = randomized(bn, 1)
    state = randomized(state, 2, low=0.5, high=1.5)  # positive running variances
    return jax.vmap(lambda x: bn(x, state)[0], axis_name="batch")


def _dropout_const_key():
    """Training-mode dropout with a key fixed at export: the mask is computed once (folded)."""
    dropout = eqx.nn.Dropout(0.5)
    return lambda x: dropout(x, key=jax.random.key(0))


def _dropout_key_input():
    """Training-mode dropout with the key as a graph input (raw uint32 key data): the lax pack's
    threefry bits, then equinox's ``bernoulli`` mask and ``x / q``."""
    dropout = eqx.nn.Dropout(0.5)
    return lambda key, x: dropout(x, key=jax.random.wrap_key_data(key))


def _key_and_normals(rng, shape, dtype):
    if np.dtype(dtype) == np.uint32:  # key data over the whole uint32 range
        return rng.integers(0, 2**32, size=shape, dtype=np.uint64).astype(np.uint32)
    return rng.standard_normal(shape).astype(dtype)


#: Dropout keeps x / 0.5 (exact) or 0: the export must match JAX bit for bit.
_EXACT = {"rtol": 0.0, "atol": 0.0, "rtol_f64": 0.0, "atol_f64": 0.0}


def _gru_scan():
    cell = randomized(eqx.nn.GRUCell(3, 5, key=jax.random.key(0)), 0, low=-0.5, high=0.5)

    def run(xs):
        def step(h, x):
            h = cell(x, h)
            return h, h

        return jax.lax.scan(step, jnp.zeros(5, xs.dtype), xs)[1]

    return run


def _lstm_scan():
    cell = randomized(eqx.nn.LSTMCell(3, 4, key=jax.random.key(0)), 0, low=-0.5, high=0.5)

    def run(xs):
        def step(carry, x):
            carry = cell(x, carry)
            return carry, carry[0]

        zeros = jnp.zeros(4, xs.dtype)
        return jax.lax.scan(step, (zeros, zeros), xs)[1]

    return run


def _mlp(key):
    return eqx.nn.MLP(4, 3, 8, 2, activation=jax.nn.relu, key=key)


components = [
    Component(
        name="eqx.embedding",
        onnx=["Gather"],
        since="v0.7.0",
        testcases=[
            Testcase("eqx_embedding_vmapped", factory=model(lambda k: eqx.nn.Embedding(10, 4, key=k), wrap=jax.vmap),
                     input_shapes=[jax.ShapeDtypeStruct(("B",), np.int32)], input_generator=_ids,
                     expected_ops=["Gather"]),
        ],
    ),
    Component(
        name="eqx.dropout_prelu_batch_norm",
        onnx=["Where"],
        since="v0.7.0",
        testcases=[
            # inference=True: the identity, no node.
            Testcase("eqx_dropout_inference", factory=lambda: eqx.nn.Dropout(0.5, inference=True),
                     input_shapes=[("B", 6)], forbidden_ops=["Dropout"], max_nodes=1),
            # Training mode with a key: equinox's jax.random.bernoulli mask, exactly as JAX draws it.
            Testcase("eqx_dropout_training_const_key", factory=_dropout_const_key, input_shapes=[("B", 6)],
                     expected_ops=["Where"], **_EXACT),
            Testcase("eqx_dropout_training_key_input", factory=_dropout_key_input,
                     input_shapes=[jax.ShapeDtypeStruct((2,), np.uint32), ("B", 6)], input_generator=_key_and_normals,
                     expected_ops=["Where", "BitwiseXor"], run_static=False, **_EXACT),
            Testcase("eqx_prelu", factory=model(lambda k: eqx.nn.PReLU(0.2)), input_shapes=[("B", 6)]),
            Testcase("eqx_batch_norm_inference", factory=_batch_norm, input_shapes=[("B", 4)]),
        ],
    ),
    Component(
        name="eqx.rnn_cells",
        onnx=["Scan", "MatMul", "Sigmoid", "Tanh"],
        since="v0.7.0",
        testcases=[
            Testcase("eqx_gru_cell_scan", factory=_gru_scan, input_shapes=[(6, 3)], expected_ops=["Scan", "MatMul"]),
            Testcase("eqx_lstm_cell_scan", factory=_lstm_scan, input_shapes=[(6, 3)], expected_ops=["Scan", "MatMul"]),
        ],
    ),
    Component(
        name="eqx.mlp",
        onnx=["MatMul", "Add", "Max"],
        since="v0.7.0",
        testcases=[
            # The activation is the jax.nn.relu object stored in the module: one Max, as Relu would be.
            Testcase("eqx_mlp", factory=model(_mlp), input_shapes=[(4,)], expected_ops=["MatMul"], max_nodes=8),
            Testcase("eqx_mlp_vmapped", factory=model(_mlp, wrap=jax.vmap), input_shapes=[("B", 4)],
                     expected_ops=["Gemm"], forbidden_ops=["MatMul"]),
        ],
    ),
]
