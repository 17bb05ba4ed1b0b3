"""export_causal_lm(..., precision=...) on the tiny decoder: each precision exports a folder that
onnxruntime-genai loads and generates from, and whose logits stay close to the float32 export's.

The tiny decoder is random (32 wide, 96 tokens): its top logits are often within 1e-3 of each
other, so free-running greedy tokens part ways with float32 at the first near tie, whatever the
precision; the logits' cosine on the float32 continuation (teacher-forced) is the accuracy figure.
The wide-model figures are in packages/plugins-nnx/tests/test_precision.py and bench/precision_bench.py.
"""

from __future__ import annotations

import re

import numpy as np
import onnx
import pytest
from jax2onnx import Precision
from jax2onnx.verification.precision import cosine
from jax2onnx_llm import export_causal_lm
from jax2onnx_llm.genai_run import greedy, prefill_logits
from llm_test_helpers import NEW_TOKENS, PROMPTS, assert_packed_projections, built_once, check_folder, require_genai
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
def float32_run():
    require_genai()

    def build(root):  # once per session, not per xdist worker
        folder = export_causal_lm(tiny_jax_decoder(), root / "m", max_length=64, target="onnx")
        return np.asarray(greedy(folder, PROMPTS[:1], NEW_TOKENS, pad_token_id=0))[0]

    root, tokens = built_once("test_precision_llm-float32", build)
    return root / "m", np.array([PROMPTS[0] + list(tokens)], np.int32)


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


# -- int4's accuracy level, chosen per layer (Precision(accuracy_level="auto"), the default) -------

AUTO_TOKENS = 64


def _nnx_llama():
    from flax import nnx
    from jax2onnx_examples.llama import Llama, LlamaConfig

    return Llama(LlamaConfig(), rngs=nnx.Rngs(0))


def _keras_llama3():
    import test_keras_hub_families as keras_families

    return keras_families.make("llama3")


def _hf_llama():
    import test_transformers_flax as hf_families

    return hf_families.make("llama")


def _levels(folder) -> tuple[list[tuple[str, int]], str]:
    """((weight, accuracy_level) of each MatMulNBits, the precision's detail) of a folder's model."""
    model = onnx.load(str(folder / "model.onnx"), load_external_data=False)
    # a packed MatMulNBits (a layer's q/k/v, gate/up: packed_projections.py) holds its weights'
    # names with "+" between them, each at the op's level
    levels = [(re.sub(r"_q4(_\d+)?$", "", name), {a.name: a.i for a in n.attribute}["accuracy_level"])
              for n in model.graph.node if n.op_type == "MatMulNBits" for name in n.input[1].split("+")]
    return levels, {p.key: p.value for p in model.metadata_props}["jax2onnx.precision.detail"]


def _listed_at_level_1(detail: str) -> list[str]:
    """The weights the detail lists at level 1: after each "kept at level 1 ...: " / "at level 1
    unchecked ...: ", names separated by ", " (a measured error in parentheses after each)."""
    names = []
    for part in detail.split("; "):
        if "at level 1" in part and "): " in part:
            names += [re.sub(r" \([^)]*\)$", "", item) for item in part.split("): ", 1)[1].split(", ")]
    return sorted(names)


@pytest.mark.parametrize("family", ["nnx-llama", "keras-llama3", "hf-llama"])
def test_auto_accuracy_level_keeps_level_1s_greedy_tokens(family, tmp_path):
    """64 greedy tokens per prompt in onnxruntime-genai: int4 with accuracy_level="auto" (the
    default) generates level 1's. These tiny random models have near-tied logits, so level 4 in
    any one layer moves their tokens (level 4 everywhere is shown to): the check keeps level 1
    where its head check saw the argmax move on the probe set, and the detail names each layer
    it kept; the test prints them."""
    require_genai()
    model = {"nnx-llama": _nnx_llama, "keras-llama3": _keras_llama3, "hf-llama": _hf_llama}[family]()
    tokens, levels = {}, {}
    for name, precision in (("level 1", Precision("int4", accuracy_level=1)), ("level 4", Precision("int4", accuracy_level=4)),
                            ("auto", "int4")):
        folder = export_causal_lm(model, tmp_path / name.replace(" ", ""), max_length=80, precision=precision,
                                  pad_token_id=0, eos_token_id=127)
        check_folder(folder)
        if name != "auto":  # one level everywhere: each layer's q/k/v and gate/up are one MatMulNBits
            # (the NNX Llama's feeding GQA's packed query; the others rotate q and k in the graph:
            # head size 8, or KerasHub's own rotary)
            assert_packed_projections(folder, layers=2, packed_query=family == "nnx-llama")
        tokens[name] = greedy(folder, PROMPTS, AUTO_TOKENS)
        levels[name] = _levels(folder)
    assert all(len(row) == AUTO_TOKENS for row in tokens["level 1"])
    assert tokens["auto"] == tokens["level 1"]
    moved = sum(a != b for x, y in zip(tokens["level 4"], tokens["level 1"]) for a, b in zip(x, y))
    chosen, detail = levels["auto"]
    assert {level for _, level in levels["level 1"][0]} == {1} and len(chosen) == len(levels["level 1"][0])
    # the detail lists each layer the check kept at level 1, and no other
    kept = sorted(name for name, level in chosen if level == 1)
    assert kept == _listed_at_level_1(detail), detail
    print(f"{family}: level 4 everywhere changed {moved} of {3 * AUTO_TOKENS} tokens; auto kept {len(kept)} of "
          f"{len(chosen)} MatMulNBits at level 1: {detail.split('accuracy_level auto on ')[-1]}")


@pytest.mark.parametrize("lm_head", ["int4", "int8"])
def test_lm_head_option_runs_in_genai_with_auto_levels(lm_head, tmp_path):
    """Precision("int4", lm_head=...) under the default accuracy_level="auto": the head is a
    4-bit MatMulNBits (int4) or an 8-bit one (int8, weight-only), the embedding a 4-bit
    GatherBlockQuantized; onnxruntime-genai generates from the folder and its prefill logits
    stay close to float32's."""
    require_genai()
    from llm_test_helpers import op_counts

    model = _nnx_llama()
    ref = export_causal_lm(model, tmp_path / "f32", max_length=80)
    folder = export_causal_lm(model, tmp_path / lm_head, max_length=80, precision=Precision("int4", lm_head=lm_head))
    check_folder(folder)
    ops = op_counts(folder)
    assert ops.get(("com.microsoft", "GatherBlockQuantized")) == 1
    assert ops.get(("com.microsoft", "DynamicQuantizeMatMul"), 0) == 0  # int8 is weight-only
    levels, detail = _levels(folder)
    model = onnx.load(str(folder / "model.onnx"), load_external_data=False)
    bits = sorted({a.name: a.i for a in n.attribute}["bits"] for n in model.graph.node if n.op_type == "MatMulNBits")
    assert bits.count(8) == (lm_head == "int8")  # the int8 head: an 8-bit MatMulNBits at its own fixed level
    four_bit = {re.sub(r"_q4(_\d+)?$", "", name) for n in model.graph.node if n.op_type == "MatMulNBits" and
                {a.name: a.i for a in n.attribute}["bits"] == 4 for name in n.input[1].split("+")}
    levels = [(name, level) for name, level in levels if name in four_bit]
    assert len(levels) == (15 if lm_head == "int4" else 14) and "accuracy_level auto on the probe set" in detail
    assert sorted(name for name, level in levels if level == 1) == _listed_at_level_1(detail)
    got = greedy(folder, PROMPTS, NEW_TOKENS)
    assert [len(row) for row in got] == [NEW_TOKENS] * len(PROMPTS)
    ids = np.array([PROMPTS[0] + got[0]], np.int32)
    assert cosine(prefill_logits(ref, ids), prefill_logits(folder, ids)) >= MIN_COSINE["int4"]
