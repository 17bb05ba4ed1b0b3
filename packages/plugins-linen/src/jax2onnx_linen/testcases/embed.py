"""Testcases of :mod:`jax2onnx_linen.embed` (imported only by the pytest plugin and the coverage command)."""

from __future__ import annotations

import jax
import numpy as np
from flax import linen as nn
from jax2onnx.testing import Component, Testcase, param_dtype

from ._testing import applied


def _ids(rng, shape, dtype):
    """Ids across the whole table, negative ones (wrapped) included."""
    return rng.integers(-10, 10, size=shape).astype(dtype)


class _Tied(nn.Module):
    """Embed, a Dense, then the tied output projection (``attend``)."""

    @nn.compact
    def __call__(self, ids):
        emb = nn.Embed(10, 6, param_dtype=param_dtype())
        return emb.attend(nn.Dense(6)(emb(ids)))


_IDS = jax.ShapeDtypeStruct((1, 4), np.int32)


components = [
    Component(
        name="linen.embed",
        onnx=["Gather", "MatMul"],
        since="v0.1.0",
        testcases=[
            Testcase("linen_embed", factory=applied(lambda: nn.Embed(10, 6, param_dtype=param_dtype()), _IDS),
                     input_shapes=[jax.ShapeDtypeStruct(("B", 4), np.int32)], input_generator=_ids,
                     expected_ops=["Gather"], max_nodes=1),
            Testcase("linen_embed_attend_tied", factory=applied(_Tied, _IDS, low=-1.0, high=1.0),
                     input_shapes=[jax.ShapeDtypeStruct(("B", 4), np.int32)], input_generator=_ids,
                     expected_ops=["Gather", "MatMul"], forbidden_ops=["Einsum"], max_nodes=4),
        ],
    ),
]
