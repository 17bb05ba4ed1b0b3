"""GPT-2-style causal decoder: token ids in, next-token logits out.

Token and learned position embeddings, pre-LayerNorm blocks of causal multi-head self-attention
and a GELU (tanh) MLP, a final LayerNorm, and logits through the tied token embedding
(``logits = h @ wte.T``). Tiny sizes; the structure is GPT-2's.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import onnx
from flax import nnx
from jax2onnx.testing import Component, Testcase, Variant

from ._common import module_list

VOCAB, CONTEXT, D_MODEL, HEADS, LAYERS = 64, 16, 32, 4, 2


def _init(scale: float = 0.02):
    return nnx.initializers.normal(stddev=scale)


class CausalSelfAttention(nnx.Module):
    def __init__(self, d_model: int, num_heads: int, *, rngs: nnx.Rngs):
        self.num_heads = num_heads
        self.qkv = nnx.Linear(d_model, 3 * d_model, kernel_init=_init(), rngs=rngs)
        self.proj = nnx.Linear(d_model, d_model, kernel_init=_init(), rngs=rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        b, t, d = x.shape
        head_dim = d // self.num_heads
        q, k, v = jnp.split(self.qkv(x), 3, axis=-1)

        def heads(y: jax.Array) -> jax.Array:  # (b, t, d) -> (b, heads, t, head_dim)
            return y.reshape(b, t, self.num_heads, head_dim).transpose(0, 2, 1, 3)

        q, k, v = heads(q), heads(k), heads(v)
        scores = (q @ k.swapaxes(-1, -2)) / math.sqrt(head_dim)
        causal = jnp.tril(jnp.ones((t, t), dtype=bool))  # position i sees positions <= i
        scores = jnp.where(causal, scores, jnp.finfo(scores.dtype).min)
        y = jax.nn.softmax(scores, axis=-1) @ v
        return self.proj(y.transpose(0, 2, 1, 3).reshape(b, t, d))


class DecoderBlock(nnx.Module):
    def __init__(self, d_model: int, num_heads: int, *, rngs: nnx.Rngs):
        self.ln1 = nnx.LayerNorm(d_model, rngs=rngs)
        self.attn = CausalSelfAttention(d_model, num_heads, rngs=rngs)
        self.ln2 = nnx.LayerNorm(d_model, rngs=rngs)
        self.fc = nnx.Linear(d_model, 4 * d_model, kernel_init=_init(), rngs=rngs)
        self.out = nnx.Linear(4 * d_model, d_model, kernel_init=_init(), rngs=rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        x = x + self.attn(self.ln1(x))
        return x + self.out(nnx.gelu(self.fc(self.ln2(x)), approximate=True))


class GPT2(nnx.Module):
    def __init__(self, vocab: int = VOCAB, context: int = CONTEXT, d_model: int = D_MODEL, num_heads: int = HEADS,
                 num_layers: int = LAYERS, *, rngs: nnx.Rngs):
        # Token ids carry no float dtype: the tables take the default float type (float64 under
        # enable_double_precision), so the whole model follows the export's precision.
        float_dtype = jnp.result_type(float)
        self.wte = nnx.Embed(vocab, d_model, embedding_init=_init(), param_dtype=float_dtype, rngs=rngs)
        self.wpe = nnx.Embed(context, d_model, embedding_init=_init(0.01), param_dtype=float_dtype, rngs=rngs)
        self.blocks = module_list(DecoderBlock(d_model, num_heads, rngs=rngs) for _ in range(num_layers))
        self.ln_f = nnx.LayerNorm(d_model, rngs=rngs)

    def __call__(self, token_ids: jax.Array) -> jax.Array:
        t = token_ids.shape[1]
        h = self.wte(token_ids) + self.wpe(jnp.arange(t))[None]
        for block in self.blocks:
            h = block(h)
        h = self.ln_f(h)
        wte = self.wte.embedding[...].astype(h.dtype)
        return h @ wte.T  # tied output projection


def _token_ids(rng: np.random.Generator, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    return rng.integers(0, VOCAB, size=shape).astype(dtype)


def _tied_embedding_stored_once(model: onnx.ModelProto, variant: Variant) -> None:
    """The tied embedding table is one weight: no second (e.g. pre-transposed) copy in the model."""
    tables = [i.name for i in model.graph.initializer if int(np.prod(i.dims)) == VOCAB * D_MODEL]
    tables += [n.output[0] for n in model.graph.node
               if n.op_type == "Constant" and any(int(np.prod(a.t.dims)) == VOCAB * D_MODEL for a in n.attribute)]
    assert len(tables) == 1, f"the tied embedding ({VOCAB}x{D_MODEL}) should be stored once, found {tables}"
    out = model.graph.output[0].type.tensor_type.shape.dim
    assert [d.dim_value or d.dim_param for d in out][1:] == [CONTEXT, VOCAB], out


components = [
    Component(
        name="GPT2",
        kind="example",
        description="A GPT-2-style causal decoder (token ids → logits, tied embedding, causal mask).",
        onnx=["Gather", "LayerNormalization", "MatMul", "Softmax", "Where", "Gelu"],
        since="v0.1.0",
        testcases=[
            Testcase(
                "gpt2_causal_decoder",
                factory=lambda: GPT2(rngs=nnx.Rngs(0)),
                input_shapes=[jax.ShapeDtypeStruct(("B", CONTEXT), jnp.int32)],
                input_generator=_token_ids,
                rtol=1e-3,
                atol=1e-4,
                check=_tied_embedding_stored_once,
            )
        ],
    )
]
