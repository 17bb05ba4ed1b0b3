"""A tiny causal LM trained for a few seconds on a deterministic language, for greedy-token checks.

A random-weight LM has near-flat logits: its top two tokens are often within 1e-3, so any rounding
flips the argmax and greedy agreement with float32 says little about a quantizer (0.09 measured at
int4). This one is trained (optax Adam, a few hundred steps) on *counting by a step*: each sequence
is ``start, start + k, start + 2k, ... (mod VOCAB)`` with ``k`` in 1..3 fixed per sequence, so the
next token depends on the last two (attention is needed, not just a bigram table) and the trained
logits have real margins, as a deployed LM's do. The bench (bench/precision_bench.py) reuses it.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

VOCAB, DIM, CONTEXT, HEADS, LAYERS = 64, 64, 40, 4, 2
PROMPT, NEW_TOKENS = 8, 32


class Block(nnx.Module):
    def __init__(self, rngs: nnx.Rngs):
        self.ln1 = nnx.LayerNorm(DIM, rngs=rngs)
        self.attn = nnx.MultiHeadAttention(num_heads=HEADS, in_features=DIM, decode=False, rngs=rngs)
        self.ln2 = nnx.LayerNorm(DIM, rngs=rngs)
        self.fc1 = nnx.Linear(DIM, 4 * DIM, rngs=rngs)
        self.fc2 = nnx.Linear(4 * DIM, DIM, rngs=rngs)

    def __call__(self, x, mask):
        x = x + self.attn(self.ln1(x), mask=mask)
        return x + self.fc2(nnx.gelu(self.fc1(self.ln2(x))))


class TinyLM(nnx.Module):
    """GPT's shape at toy size: token + position embeddings, causal pre-LN blocks, LM head."""

    def __init__(self, rngs: nnx.Rngs):
        self.wte = nnx.Embed(VOCAB, DIM, rngs=rngs)
        self.wpe = nnx.Embed(CONTEXT, DIM, rngs=rngs)
        blocks = [Block(rngs) for _ in range(LAYERS)]
        self.blocks = nnx.List(blocks) if hasattr(nnx, "List") else blocks  # Flax 0.10 has no nnx.List
        self.ln = nnx.LayerNorm(DIM, rngs=rngs)
        self.head = nnx.Linear(DIM, VOCAB, use_bias=False, rngs=rngs)

    def __call__(self, ids):
        x = self.wte(ids) + self.wpe(jnp.arange(ids.shape[1]))
        mask = nnx.make_causal_mask(ids)
        for block in self.blocks:
            x = block(x, mask)
        return self.head(self.ln(x))


def counting(start: int, step: int, n: int) -> np.ndarray:
    """The language: ``n`` tokens counting from ``start`` by ``step`` modulo the vocabulary."""
    return ((start + step * np.arange(n)) % VOCAB).astype(np.int32)


def _batch(rng: np.random.Generator, size: int) -> np.ndarray:
    return np.stack([counting(int(s), int(k), CONTEXT) for s, k in zip(rng.integers(0, VOCAB, size),
                                                                        rng.integers(1, 4, size))])


def train(steps: int = 200, seed: int = 0) -> tuple[TinyLM, float]:
    """The trained model and its last training loss. Parameters go through optax as a pytree
    (nnx.split/merge), which every supported Flax version runs the same way."""
    graphdef, params, rest = nnx.split(TinyLM(nnx.Rngs(seed)), nnx.Param, ...)
    tx = optax.adam(3e-3)
    opt_state = tx.init(params)

    def loss_fn(p, ids):
        logits = nnx.merge(graphdef, p, rest)(ids[:, :-1])
        # the first target needs two tokens of context to know the step
        return optax.softmax_cross_entropy_with_integer_labels(logits[:, 1:], ids[:, 2:]).mean()

    def step(p, o, ids):
        loss, grads = jax.value_and_grad(loss_fn)(p, ids)
        updates, o = tx.update(grads, o, p)
        return optax.apply_updates(p, updates), o, loss

    step = _optimized(step, params, opt_state, jax.ShapeDtypeStruct((32, CONTEXT), jnp.int32))
    rng = np.random.default_rng(seed)
    loss = jnp.inf
    for _ in range(steps):
        params, opt_state, loss = step(params, opt_state, _batch(rng, 32))
    return nnx.merge(graphdef, params, rest), float(loss)


#: XLA's default CPU compilation. The test suite compiles at LLVM -O0 without fusion emitters
#: (pyproject.toml's jax2onnx_xla_flags: JAX's side of each comparison compiles faster so), where the
#: 200 training steps ran at half the speed: the step alone is compiled as XLA would by default.
_DEFAULT_COMPILE = {"xla_backend_optimization_level": 3, "xla_cpu_use_fusion_emitters": True}


def _optimized(step: Callable, *example) -> Callable:
    """``step`` jitted and compiled with :data:`_DEFAULT_COMPILE` for ``example``'s shapes; plainly
    jitted where this JAX takes no per-compilation options."""
    try:
        return jax.jit(step).lower(*example).compile(_DEFAULT_COMPILE)
    except Exception:  # noqa: BLE001 - an option this jaxlib does not know: the process's own flags
        return jax.jit(step)


def perplexity(logits_of: Callable[[np.ndarray], np.ndarray], sequences: np.ndarray) -> float:
    """exp of the mean next-token cross-entropy over ``sequences`` ``[n, CONTEXT]`` (one at a time,
    shape ``(1, CONTEXT)``), from the third token on (two tokens give the step), as in training."""
    nll = []
    for seq in sequences:
        logits = np.asarray(logits_of(seq[None, :]), np.float64)[0, 1:-1]
        logits = logits - logits.max(-1, keepdims=True)
        logp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
        nll.append(-logp[np.arange(len(seq) - 2), seq[2:]].mean())
    return float(np.exp(np.mean(nll)))


#: prompts of PROMPT tokens: (start, step) each
PROMPTS = [(3, 1), (10, 2), (50, 3), (0, 1)]


def greedy(logits_of: Callable[[np.ndarray], np.ndarray], start: int, step: int) -> list[int]:
    """NEW_TOKENS tokens generated greedily after the prompt ``counting(start, step, PROMPT)``.
    The input is a fixed ``(1, CONTEXT)`` buffer (the model is causal: later slots do not change
    earlier logits), so one ONNX shape and one JAX compilation serve every step."""
    ids = np.zeros((1, CONTEXT), np.int32)
    ids[0, :PROMPT] = counting(start, step, PROMPT)
    out = []
    for i in range(NEW_TOKENS):
        pos = PROMPT + i
        token = int(np.argmax(logits_of(ids)[0, pos - 1]))
        out.append(token)
        ids[0, pos] = token
    return out


def greedy_agreement(logits_of: Callable[[np.ndarray], np.ndarray], reference: list[list[int]]) -> float:
    """The share of greedy tokens equal to ``reference`` (one list per prompt of :data:`PROMPTS`)."""
    got = [greedy(logits_of, s, k) for s, k in PROMPTS]
    return float(np.mean(np.asarray(got) == np.asarray(reference)))


SPEC = jax.ShapeDtypeStruct((1, CONTEXT), jnp.int32)
