"""A Llama-style decoder in Flax NNX (RMSNorm, RoPE, grouped-query attention, SwiGLU) with a KV cache.

It is the reference model of the LLM pack: ``__jax2onnx_decoder__`` hands the pack its step, and
``jax2onnx_llm.export_causal_lm(model, "out", max_length=64)`` writes an onnxruntime-genai folder.
Attention goes through ``jax2onnx_llm.attend``, so the cache layout (growing or static buffer) and
the target (standard ONNX or onnxruntime's ``GroupQueryAttention``) are the exporter's choice.
``generate`` is the model's own greedy generation (jitted, cached), for comparison and benchmarks.

It needs the LLM pack: ``pip install 'jax2onnx-examples[llm]'`` (the pack's other examples do not).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
from flax import nnx

try:
    from jax2onnx_llm import DecoderSpec, attend, rotary_tables
    from jax2onnx_llm.reference import greedy_generate
except ModuleNotFoundError as exc:  # only the LLM pack's absence gets this message, not a missing dependency of it
    if exc.name != "jax2onnx_llm":
        raise
    raise ModuleNotFoundError(
        "jax2onnx_examples.llama builds on the LLM pack (attend, rotary_tables, DecoderSpec), which is not installed: "
        "pip install 'jax2onnx-examples[llm]' (or jax2onnx-llm)", name=exc.name
    ) from exc


@dataclasses.dataclass(frozen=True)
class LlamaConfig:
    vocab_size: int = 128
    hidden_size: int = 64
    intermediate_size: int = 128
    num_layers: int = 2
    num_heads: int = 4
    num_kv_heads: int = 2
    max_positions: int = 256
    rope_theta: float = 10000.0
    rms_eps: float = 1e-6
    bos_token_id: int = 1
    eos_token_id: int = 2
    pad_token_id: int = 0

    @property
    def head_size(self) -> int:
        return self.hidden_size // self.num_heads


def _module_list(items: Any) -> Any:
    """Sub-modules as a list attribute: Flax 0.12 wants ``nnx.List``, Flax 0.10 has none."""
    items = list(items)
    return nnx.List(items) if hasattr(nnx, "List") else items


class LlamaBlock(nnx.Module):
    def __init__(self, cfg: LlamaConfig, init: Any, *, rngs: nnx.Rngs):
        d, hd = cfg.hidden_size, cfg.head_size
        self.cfg = cfg
        self.attn_norm = nnx.RMSNorm(d, epsilon=cfg.rms_eps, rngs=rngs)
        self.q = nnx.Linear(d, cfg.num_heads * hd, use_bias=False, kernel_init=init, rngs=rngs)
        self.k = nnx.Linear(d, cfg.num_kv_heads * hd, use_bias=False, kernel_init=init, rngs=rngs)
        self.v = nnx.Linear(d, cfg.num_kv_heads * hd, use_bias=False, kernel_init=init, rngs=rngs)
        self.o = nnx.Linear(cfg.num_heads * hd, d, use_bias=False, kernel_init=init, rngs=rngs)
        self.mlp_norm = nnx.RMSNorm(d, epsilon=cfg.rms_eps, rngs=rngs)
        self.gate = nnx.Linear(d, cfg.intermediate_size, use_bias=False, kernel_init=init, rngs=rngs)
        self.up = nnx.Linear(d, cfg.intermediate_size, use_bias=False, kernel_init=init, rngs=rngs)
        self.down = nnx.Linear(cfg.intermediate_size, d, use_bias=False, kernel_init=init, rngs=rngs)

    def __call__(self, x: jax.Array, rotary: tuple[jax.Array, jax.Array], cache: Any, layer: int) -> jax.Array:
        cfg = self.cfg
        b, s, _ = x.shape
        h = self.attn_norm(x)
        q = self.q(h).reshape(b, s, cfg.num_heads, cfg.head_size)
        k = self.k(h).reshape(b, s, cfg.num_kv_heads, cfg.head_size)
        v = self.v(h).reshape(b, s, cfg.num_kv_heads, cfg.head_size)
        a = attend(cache, layer, q, k, v, rotary=rotary)
        x = x + self.o(a.reshape(b, s, cfg.num_heads * cfg.head_size))
        h = self.mlp_norm(x)
        return x + self.down(nnx.silu(self.gate(h)) * self.up(h))


class Llama(nnx.Module):
    """Token ids → logits; ``step`` runs it on new tokens over a ``jax2onnx_llm.KVCache``."""

    def __init__(self, cfg: LlamaConfig = LlamaConfig(), *, rngs: nnx.Rngs, init_scale: float = 0.2):
        # Random weights at the usual 0.02 scale make every position predict nearly the same token;
        # a larger scale keeps tiny random models' greedy sequences varied (tests assert they are).
        init = nnx.initializers.normal(stddev=init_scale)
        self.cfg = cfg
        self.embed = nnx.Embed(cfg.vocab_size, cfg.hidden_size, embedding_init=nnx.initializers.normal(1.0), rngs=rngs)
        self.blocks = _module_list(LlamaBlock(cfg, init, rngs=rngs) for _ in range(cfg.num_layers))
        self.norm = nnx.RMSNorm(cfg.hidden_size, epsilon=cfg.rms_eps, rngs=rngs)
        self.lm_head = nnx.Linear(cfg.hidden_size, cfg.vocab_size, use_bias=False, kernel_init=init, rngs=rngs)

    def step(self, input_ids: jax.Array, position_ids: jax.Array, cache: Any) -> jax.Array:
        cfg = self.cfg
        x = self.embed(input_ids)
        rotary = rotary_tables(position_ids, cfg.head_size, cfg.rope_theta)
        for i, block in enumerate(self.blocks):
            x = block(x, rotary, cache, i)
        return self.lm_head(self.norm(x))

    def __jax2onnx_decoder__(self) -> Any:
        cfg = self.cfg
        graphdef, state = nnx.split(self)

        def step(params: Any, input_ids: Any, attention_mask: Any, position_ids: Any, cache: Any) -> Any:
            model = nnx.merge(graphdef, params)
            return model.step(input_ids, position_ids, cache), cache

        return DecoderSpec(
            step=step, params=state, num_layers=cfg.num_layers, num_heads=cfg.num_heads,
            num_kv_heads=cfg.num_kv_heads, head_size=cfg.head_size, hidden_size=cfg.hidden_size,
            vocab_size=cfg.vocab_size, max_positions=cfg.max_positions, bos_token_id=cfg.bos_token_id,
            eos_token_id=cfg.eos_token_id, pad_token_id=cfg.pad_token_id, model_type="llama", family="NNX Llama",
        )

    def generate(self, input_ids: Any, attention_mask: Any, max_new_tokens: int) -> Any:
        """Greedy tokens ``(batch, max_new_tokens)`` after left-padded prompts, jitted with a KV cache."""
        return greedy_generate(self.__jax2onnx_decoder__(), input_ids, attention_mask, max_new_tokens)
