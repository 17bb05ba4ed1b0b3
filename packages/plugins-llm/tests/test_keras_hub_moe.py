"""``precision="int4"`` (and ``"int8"``) on KerasHub's mixture-of-experts models quantizes the experts: on
``target="onnxruntime"`` the fused ``MoE`` of each layer becomes ``QMoE`` (4-bit blocks per
expert), on ``target="onnx"`` the library's dense expert bank reads its stacked ``[E, in, out]``
weights through one blocked ``DequantizeLinear`` each. The folders load and generate in
onnxruntime-genai (left-padded batch of three) and their logits stay close to the float32
export's (teacher-forced on the float32 export's own greedy continuation: a tiny random model's
free-running int4 tokens part from float32's at its first near tie, as in test_precision_llm.py).

The float32 tokens of these families (MoE on target onnxruntime, the library's code on onnx)
equal KerasHub's own greedy generation: test_keras_hub_families.py."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from jax2onnx.verification.precision import cosine
from llm_test_helpers import (
    MS,
    NEW_TOKENS,
    PROMPTS,
    assert_moe_fused,
    assert_same_tokens,
    built_once,
    check_folder,
    keras_hub_under_jax,
    op_counts,
    require_genai,
)

keras, _ = keras_hub_under_jax()

from jax2onnx_llm import export_causal_lm  # noqa: E402
from jax2onnx_llm.genai_run import greedy, prefill_logits  # noqa: E402
from test_keras_hub_families import exported_once, make  # noqa: E402

#: floors under the figures measured on these tiny random models (2 layers, 32 wide, 4 experts of
#: 16-64 wide), where every weight matmul is int4 too (attention, router, the 32-wide embedding rows
#: and LM head, one 4-bit block each: the bulk of the loss, as for test_precision_llm.py's 0.85):
#: Mixtral 0.866 (0.914 with int8 embeddings and head), Qwen 3 MoE 0.976, Qwen 3.5 MoE 0.911 (QMoE and its
#: shared expert in MatMulNBits; 0.941 on target onnx); int8 (8-bit QMoE): 0.9998
MIN_COSINE = {("mixtral", "int4"): 0.85, ("qwen3_moe", "int4"): 0.95, ("mixtral", "int8"): 0.999,
              ("qwen3_5_moe", "int4"): 0.90}

CASES = [("mixtral", "onnxruntime", "int4"), ("qwen3_moe", "onnx", "int4"), ("mixtral", "onnxruntime", "int8"),
         ("qwen3_5_moe", "onnxruntime", "int4"), ("qwen3_5_moe", "onnx", "int4")]


def _float32(family: str, target: str):
    """``(folder, ids, logits)``: the family's float32 export for ``target``, the first prompt with its
    greedy continuation there, and its logits over them; once a session (Mixtral's two precisions).
    On target onnxruntime the export is test_keras_hub_families' (the same options), made once for both."""
    def build(root):
        shared = exported_once(family, make(family), "concat", 1) if target == "onnxruntime" else None
        folder = shared or export_causal_lm(make(family), root / "f32", max_length=64, cache="concat", target=target,
                                            eos_token_id=1, pad_token_id=0)
        tokens = np.asarray(greedy(folder, PROMPTS[:1], NEW_TOKENS, pad_token_id=0))[0]
        ids = np.array([PROMPTS[0] + list(tokens)], np.int32)
        return shared, ids, prefill_logits(folder, ids)

    root, (shared, ids, logits) = built_once(f"test_keras_hub_moe-{family}-{target}", build)
    return shared or root / "f32", ids, logits


@pytest.mark.parametrize(("family", "target", "precision"), CASES)
def test_low_precision_quantizes_the_experts(tmp_path, family, target, precision):
    require_genai()
    f32, ids, f32_logits = _float32(family, target)
    folder = export_causal_lm(make(family), tmp_path / precision, max_length=64, cache="concat", target=target,
                              precision=precision, eos_token_id=1, pad_token_id=0)
    check_folder(folder)
    model = onnx.load(str(folder / "model.onnx"), load_external_data=False)
    detail = {p.key: p.value for p in model.metadata_props}["jax2onnx.precision.detail"]
    if target == "onnxruntime":
        assert_moe_fused(folder, layers=2, op="QMoE")
        qmoe = [n for n in model.graph.node if n.op_type == "QMoE"]
        bits = {a.i for n in qmoe for a in n.attribute if a.name == "expert_weight_bits"}
        assert bits == {int(precision[3:])}, bits
        assert f"2 stacked expert weight(s) {precision} per expert" in detail, detail
    else:
        ops = op_counts(folder)
        assert not any(domain == MS for domain, _ in ops), ops
        # per layer the bank's two stacked weights (gate|up [E, 32, 32], down [E, 16, 32]), decoded
        # by blocks along their input axis, and no float32 stacked weight left
        widen = [n for n in model.graph.node if n.op_type == "DequantizeLinear"
                 and {a.name: a.i for a in n.attribute}.get("axis") == 1]
        assert len(widen) == 4, [n.name for n in widen]
        inits = {t.name: t for t in model.graph.initializer}
        assert all(inits[n.input[0]].data_type == onnx.TensorProto.UINT4 and len(inits[n.input[0]].dims) == 3
                   for n in widen)
        scales = {n.input[1] for n in widen}
        assert not [t.name for t in model.graph.initializer if len(t.dims) == 3 and t.dims[0] == 4
                    and t.data_type == onnx.TensorProto.FLOAT and t.name not in scales]
        assert "4 stacked expert weight(s) int4 per expert" in detail, detail
    assert (folder / "model.onnx").stat().st_size < (f32 / "model.onnx").stat().st_size
    got = np.asarray(greedy(folder, PROMPTS, NEW_TOKENS, pad_token_id=0))  # a padded batch runs
    assert got.shape == (len(PROMPTS), NEW_TOKENS)
    figure = cosine(f32_logits, prefill_logits(folder, ids))
    print(f"{family} {precision} ({target}): logits cosine {figure:.4f} to float32")
    assert figure >= MIN_COSINE[family, precision]



def test_keras_int8_blocks_run_the_library_code(tmp_path):
    """Keras' own int8 quantization reaches the block's router and shared-expert Dense layers (not
    the block itself, whose ``quantization_mode`` stays unset; was an invalid graph, the int8
    router kernel read as the op's float32 one): declined on target onnxruntime, no MoE op, the
    library's code, KerasHub's tokens."""
    from test_keras_hub_families import keras_reference

    require_genai()
    model = make("qwen3_5_moe")
    model.quantize("int8")
    reference = keras_reference(model)
    seen = set(np.asarray(reference(PROMPTS)).ravel()) | set(np.asarray(reference(PROMPTS[:1])).ravel())
    eos = next(t for t in range(1, 128) if t not in seen)
    folder = export_causal_lm(model, tmp_path / "int8", max_length=64, cache="concat", eos_token_id=eos,
                              pad_token_id=0)
    check_folder(folder)
    ops = op_counts(folder)
    assert (MS, "MoE") not in ops and (MS, "QMoE") not in ops, ops
    assert_same_tokens(folder, reference, pad_token_id=0, eos=eos)


def test_float16_blocks_run_the_library_code(tmp_path):
    """float16 layers are declined (the op would route in float32 from float16 logits): no MoE op,
    the block's stacked expert weights read by the library's batched einsum. (Tokens are not
    compared: KerasHub's float16 generation does not run on JAX's CPU backend.)"""
    model = make("qwen3_5_moe")
    backbone = type(model.backbone).from_config({**model.backbone.get_config(), "dtype": "float16"})
    backbone.set_weights(model.backbone.get_weights())
    half = type(model)(backbone=backbone, preprocessor=None)
    assert half.backbone.transformer_layers[0].mlp.compute_dtype == "float16"
    folder = export_causal_lm(half, tmp_path / "f16", max_length=64, cache="concat", eos_token_id=1, pad_token_id=0)
    check_folder(folder)
    ops = op_counts(folder)
    assert (MS, "MoE") not in ops and (MS, "QMoE") not in ops, ops
    graph = onnx.load(str(folder / "model.onnx"), load_external_data=False).graph
    # per layer gate|up [4 experts, 32, 2 x 16] and down [4, 16, 32]
    stacked = {t.name for t in graph.initializer if list(t.dims) in ([4, 32, 32], [4, 16, 32])
               and t.data_type == onnx.TensorProto.FLOAT16}
    read_by = {n.op_type for n in graph.node for name in n.input if name in stacked}
    assert len(stacked) == 4 and read_by == {"Einsum"}, (stacked, read_by)
