"""An LLM exported from a model whose parameters live on a TPU or GPU (issue #34): the examples
pack's NNX Llama through the LLM pack's ``export_causal_lm``. The folder's prefill logits, run by
onnxruntime on the CPU, equal the model's on the accelerator at highest matmul precision; where
onnxruntime-genai is installed, its greedy tokens are the model's greedy choices."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from accelerator_models import assert_on_the_accelerator, at_highest, requires_accelerator

pytestmark = requires_accelerator

PROMPT = [5, 6, 7, 8, 9, 10, 11]
NEW_TOKENS = 16
#: a near tie: genai's token is the model's argmax unless another logit is within this of it
TIE = 1e-3


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    nnx = pytest.importorskip("flax.nnx")
    pytest.importorskip("jax2onnx_llm", reason="the LLM pack exports the folder")
    llama = pytest.importorskip("jax2onnx_examples.llama", reason="the examples pack holds the NNX Llama")
    from jax2onnx_llm import export_causal_lm

    model = llama.Llama(llama.LlamaConfig(), rngs=nnx.Rngs(0))
    assert_on_the_accelerator(model)
    folder = export_causal_lm(model, tmp_path_factory.mktemp("llm") / "llama", max_length=64)
    onnx.checker.check_model(str(folder / "model.onnx"), full_check=True)
    assert_on_the_accelerator(model)
    return model, folder


def _model_logits(model, ids: np.ndarray) -> np.ndarray:
    """The model's logits for every position of ``ids`` (one row, no padding), without a cache."""
    import jax.numpy as jnp
    from jax2onnx_llm.spec import KVCache, position_ids_from_mask

    spec = model.__jax2onnx_decoder__()
    mask = np.ones(ids.shape, np.int32)

    def forward(params, ids, mask):
        empty = [jnp.zeros((ids.shape[0], spec.num_kv_heads, 0, spec.head_size))] * spec.num_layers
        cache = KVCache(empty, empty, mask, "concat")
        return spec.step(params, ids, mask, position_ids_from_mask(mask, ids.shape[1]), cache)[0]

    return at_highest(forward, spec.params, ids, mask)


def test_prefill_logits_equal_the_models_on_the_accelerator(exported):
    from jax2onnx_llm.genai_run import prefill_logits  # the fixture skipped without the LLM pack

    model, folder = exported
    ids = np.array([PROMPT], np.int32)
    want = _model_logits(model, ids)
    got = prefill_logits(folder, ids)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_genai_generates_the_models_greedy_tokens(exported):
    pytest.importorskip("onnxruntime_genai", reason="onnxruntime-genai is not installed here; the prefill logits "
                                                    "test compares the folder with onnxruntime instead")
    from jax2onnx_llm.genai_run import greedy

    model, folder = exported
    tokens = [int(t) for t in greedy(folder, [PROMPT], NEW_TOKENS, pad_token_id=0)[0]]
    assert len(tokens) == NEW_TOKENS and len(set(tokens)) > 4, tokens
    # Teacher-forced on genai's own continuation: each of its tokens is the model's argmax there,
    # up to a near tie (the tiny random model's top logits can be closer than the devices' rounding).
    logits = _model_logits(model, np.array([PROMPT + tokens], np.int32))[0]
    for step, token in enumerate(tokens):
        row = logits[len(PROMPT) - 1 + step]
        assert row[token] >= row.max() - TIE, f"token {step}: genai {token}, the model's argmax {int(row.argmax())}"
