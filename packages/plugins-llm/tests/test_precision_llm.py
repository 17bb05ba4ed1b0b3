"""export_causal_lm(..., precision=...) on the tiny decoder: each precision exports a folder that
onnxruntime-genai loads and generates from, and whose logits stay close to the float32 export's.

The tiny decoder is random (32 wide, 96 tokens): its top logits are often within 1e-3 of each
other, so free-running greedy tokens part ways with float32 at the first near tie, whatever the
precision; the logits' cosine on the float32 continuation (teacher-forced) is the accuracy figure.
The wide-model figures are in packages/plugins-nnx/tests/test_precision.py and bench/precision_bench.py.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from jax2onnx import Precision
from jax2onnx.verification.precision import cosine
from jax2onnx_llm import export_causal_lm
from jax2onnx_llm.genai_run import greedy, prefill_logits
from llm_test_helpers import NEW_TOKENS, PROMPTS, check_folder, require_genai
from test_spec import tiny_jax_decoder

#: core's floors (jax2onnx.verification.precision.MIN_COSINE) hold for float16/bfloat16; int8 and
#: int4 get this model's own (measured 0.9992 for weight-only int8 under either target, 0.931 with
#: activations="dynamic" (quantized per tensor over 32 features) and 0.85 for int4: blocks as wide as
#: the model, its embedding rows and LM head included (one 4-bit block per 32-wide table row: 0.91
#: with Precision("int4", embeddings="int8", lm_head="int8"))
MIN_COSINE = {"float16": 0.9999, "bfloat16": 0.999, "int8": 0.999, "int8 dynamic": 0.9, "int4": 0.8}
#: (precision, target): each precision in the standard form; int8 also as onnxruntime's 8-bit MatMulNBits
CASES = [(kind, "onnx") for kind in MIN_COSINE] + [("int8", "onnxruntime")]


@pytest.fixture(scope="module")
def float32_run(tmp_path_factory):
    require_genai()
    folder = export_causal_lm(tiny_jax_decoder(), tmp_path_factory.mktemp("f32") / "m", max_length=64, target="onnx")
    tokens = np.asarray(greedy(folder, PROMPTS[:1], NEW_TOKENS, pad_token_id=0))[0]
    ids = np.array([PROMPTS[0] + list(tokens)], np.int32)
    return folder, ids


@pytest.mark.parametrize(("name", "target"), CASES)
def test_tiny_lm_in_each_precision_generates_and_stays_close(float32_run, name, target, tmp_path):
    f32_folder, ids = float32_run
    precision = Precision("int8", activations="dynamic") if name == "int8 dynamic" else name
    folder = export_causal_lm(tiny_jax_decoder(), tmp_path / "m", max_length=64, precision=precision, target=target)
    check_folder(folder)
    model = onnx.load(str(folder / "model.onnx"), load_external_data=False)
    meta = {p.key: p.value for p in model.metadata_props}
    assert meta["jax2onnx.precision"] == name.split()[0]
    if name == "int8":  # weight-only: genai runs 8-bit MatMulNBits (onnxruntime) or DequantizeLinear + MatMul
        bits = [next(a.i for a in n.attribute if a.name == "bits") for n in model.graph.node if n.op_type == "MatMulNBits"]
        widened = [n for n in model.graph.node if n.op_type == "DequantizeLinear"]
        assert (bits and set(bits) == {8} and not widened) if target == "onnxruntime" else (widened and not bits)
    io = [*model.graph.input, *model.graph.output]
    assert all(v.type.tensor_type.elem_type in (onnx.TensorProto.FLOAT, onnx.TensorProto.INT32) for v in io)
    got = np.asarray(greedy(folder, PROMPTS, NEW_TOKENS, pad_token_id=0))  # onnxruntime-genai loads and runs it
    assert got.shape == (len(PROMPTS), NEW_TOKENS)
    reference = prefill_logits(f32_folder, ids)
    logits = prefill_logits(folder, ids)
    assert cosine(reference, logits) >= MIN_COSINE[name]
    assert (folder / "model.onnx").stat().st_size < (f32_folder / "model.onnx").stat().st_size


def test_greedy_agreement_of_an_exported_folder(float32_run, tmp_path):
    """The float32 folder generates JAX's tokens (agreement 1.0, ok); the random decoder under int4
    parts ways at its first near tie, and the figure says so by failing its floor."""
    from jax2onnx_llm.greedy_check import greedy_agreement

    f32_folder, _ = float32_run
    same = greedy_agreement(tiny_jax_decoder(), f32_folder, PROMPTS)
    assert same.tokens == len(PROMPTS) * NEW_TOKENS and same.agreement == 1.0 and same.ok
    folder = export_causal_lm(tiny_jax_decoder(), tmp_path / "m", max_length=64, precision="int4", target="onnx")
    low = greedy_agreement(tiny_jax_decoder(), folder, PROMPTS)
    print(f"random tiny decoder, int4: {low.agreement:.1%} of {low.tokens} greedy tokens equal float32's")
    assert low.agreement < 0.9 and not low.ok
