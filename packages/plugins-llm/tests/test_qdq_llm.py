"""export_causal_lm(..., target="qdq"): the tiny NNX Llama as static prefill and decode QDQ graphs.

The pack's own loop (jax2onnx_llm.qdq.loop, genai's sliding-window scheme) drives the graphs on
onnxruntime's CPU provider, and onnxruntime-genai 0.18 generates the same tokens from the folder. Accuracy is measured side by side with onnxruntime's quantize_static applied to the same
graphs exported in float32 (the anchor), calibrated on the same probe inputs.
"""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from jax2onnx import ExportProgram
from jax2onnx_llm import export_causal_lm
from jax2onnx_llm.frontends import decoder_spec
from jax2onnx_llm.qdq import prefill_window
from jax2onnx_llm.qdq.layout import io_names
from jax2onnx_llm.qdq.loop import greedy
from jax2onnx_llm.qdq.probe import calibration_batches
from jax2onnx_llm.qdq.window import window_specs, window_step
from jax2onnx_llm.reference import greedy_generate
from llm_test_helpers import built_once

ort = pytest.importorskip("onnxruntime")
PROMPT = [5, 6, 7, 8, 9, 10, 11]
MAX_LENGTH, NEW_TOKENS = 48, 32


def _llama():
    from flax import nnx
    from jax2onnx_examples.llama import Llama, LlamaConfig

    return Llama(LlamaConfig(), rngs=nnx.Rngs(0))


#: the sessions' optimization level, as core's QDQ accuracy checks: with optimizations on, onnxruntime's CPU may
#: fuse the pairs into its own integer kernels, which saturate on AVX2 machines without VNNI (an NPU computes the graph)
LEVEL = "ORT_DISABLE_ALL"


def _tokens(prefill, decode, spec, window):
    runs = []
    for path in (prefill, decode):
        options = ort.SessionOptions()
        options.graph_optimization_level = getattr(ort.GraphOptimizationLevel, LEVEL)
        session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        names = [i.name for i in session.get_inputs()]
        runs.append(lambda xs, s=session, n=names: s.run(None, dict(zip(n, xs))))
    return greedy(*runs, PROMPT, NEW_TOKENS, spec=spec, window=window, max_length=MAX_LENGTH)


def _head(path) -> str:
    """The float model's matmul computing the logits (through ops that only move data)."""
    graph = onnx.load(str(path)).graph
    producers = {o: n for n in graph.node for o in n.output}
    node = producers[graph.output[0].name]
    while node.op_type not in ("MatMul", "Gemm"):
        node = producers[node.input[0]]
    return node.name


def _leading_match(a, b) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


@pytest.fixture(scope="module")
def exported():
    def build(root):  # once per session, not per xdist worker
        export_causal_lm(_llama(), root / "m", max_length=MAX_LENGTH, target="qdq", tokenizer=False)

    return built_once("test_qdq_llm", build)[0] / "m", decoder_spec(_llama())


def test_static_graphs_are_qdq_with_shared_weights_and_pass_the_check(exported, capsys):
    from jax2onnx.cli import main

    folder, spec = exported
    config = json.loads((folder / "genai_config.json").read_text())["model"]["decoder"]
    window = config["sliding_window"]["window_size"]
    assert window == prefill_window(MAX_LENGTH) == MAX_LENGTH // 2
    stages = [next(iter(s.values())) for s in config["pipeline"]]
    assert [s["filename"] for s in stages] == ["prefill.onnx", "decode.onnx"]
    referenced: dict[str, set] = {}
    for name, w in (("prefill.onnx", window), ("decode.onnx", 1)):
        onnx.checker.check_model(str(folder / name), full_check=True)
        model = onnx.load(str(folder / name), load_external_data=False)
        shapes = {v.name: [d.dim_value if d.HasField("dim_value") else d.dim_param for d in v.type.tensor_type.shape.dim]
                  for v in [*model.graph.input, *model.graph.output]}
        assert shapes["input_ids"] == [1, w] and shapes["present.0.value"] == [1, spec.num_kv_heads, MAX_LENGTH, spec.head_size]
        assert all(isinstance(d, int) and d > 0 for dims in shapes.values() for d in dims), shapes
        producers = {o: n for n in model.graph.node for o in n.output}
        matmuls = [n for n in model.graph.node if n.op_type in ("MatMul", "Gemm", "Einsum")]
        float_ones = [n for n in matmuls if any(producers.get(i) is None or producers[i].op_type != "DequantizeLinear"
                                                for i in n.input)]
        # the LM head alone stays float, marked with the reason the check prints
        assert len(float_ones) == 1 and float_ones[0].metadata_props[0].key == "jax2onnx.qdq.keep_float", float_ones
        assert len(matmuls) > 4 * spec.num_layers
        meta = {p.key: p.value for p in model.metadata_props}
        assert "the probe set: 4 prompts of random token ids" in meta["jax2onnx_llm.calibration"], meta
        referenced[name] = {tuple((e.key, e.value) for e in t.external_data) for t in model.graph.initializer
                            if t.data_location == onnx.TensorProto.EXTERNAL}
        status = main(["check", "--target", "qdq", str(folder / name)])
        printed = "".join(capsys.readouterr())
        assert status == 0, printed
        assert "left float by the export: the LM head" in printed
    # one copy of the weights: every large tensor of the decode graph points at bytes the prefill graph
    # reads too (the prefill graph alone holds its window-sized constants), and the file holds each once
    assert referenced["decode.onnx"] and referenced["decode.onnx"] <= referenced["prefill.onnx"]
    stored = sum(int(dict(r)["length"]) for r in referenced["prefill.onnx"])
    assert (folder / "model.onnx.data").stat().st_size < stored + 64 * len(referenced["prefill.onnx"])


def test_greedy_tokens_follow_jax_as_far_as_quantize_static_does(exported, tmp_path):
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    folder, spec = exported
    window = prefill_window(MAX_LENGTH)
    expected = greedy_generate(spec, np.array([PROMPT]), np.ones((1, len(PROMPT))), NEW_TOKENS)[0].tolist()
    ours = _tokens(folder / "prefill.onnx", folder / "decode.onnx", spec, window)
    assert len(set(expected)) > 4, f"the tiny model repeats itself: {expected}"

    # the anchor: the same two graphs in float32, quantized by onnxruntime on the same probe inputs
    batches, _ = calibration_batches(spec, None, None, window=window, max_length=MAX_LENGTH)
    inputs, outputs = io_names(spec.num_layers)
    anchor = {}
    for w in (window, 1):
        float_path, path = tmp_path / f"float{w}.onnx", tmp_path / f"anchor{w}.onnx"
        ExportProgram(window_step(spec), window_specs(spec, w, MAX_LENGTH), opset=21, input_names=inputs,
                      output_names=outputs, target="onnx", return_mode="file", output_path=float_path).write()

        class Reader(CalibrationDataReader):
            def __init__(self, feeds):
                self.feeds = iter(feeds)

            def get_next(self):
                return next(self.feeds, None)

        quantize_static(str(float_path), str(path), Reader([dict(zip(inputs, b)) for b in batches[w]]),
                        quant_format=QuantFormat.QDQ, activation_type=QuantType.QUInt16, weight_type=QuantType.QInt8,
                        per_channel=True, nodes_to_exclude=[_head(float_path)])  # its LM head float as ours
        anchor[w] = path
    theirs = _tokens(anchor[window], anchor[1], spec, window)
    ours_match, anchor_match = _leading_match(ours, expected), _leading_match(theirs, expected)
    print(f"leading tokens equal to JAX's: ours {ours_match}/{NEW_TOKENS}, quantize_static {anchor_match}/{NEW_TOKENS}")
    assert ours_match >= max(anchor_match, 1), (ours, theirs, expected)


def test_genai_generates_the_tokens_of_the_packs_loop(exported, tmp_path):
    """onnxruntime-genai 0.18 runs the folder as its decoder pipeline (the prompt padded on the left to
    one prefill window, then the decode graph over its shared past/present buffer) and generates what
    the pack's loop generates from the same graphs, with the same session options."""
    import shutil

    og = pytest.importorskip("onnxruntime_genai")
    folder, spec = exported
    window = prefill_window(MAX_LENGTH)
    copy = tmp_path / "m"
    shutil.copytree(folder, copy)
    config = json.loads((copy / "genai_config.json").read_text())
    config["model"]["decoder"]["session_options"]["graph_optimization_level"] = LEVEL
    (copy / "genai_config.json").write_text(json.dumps(config))
    model = og.Model(str(copy))
    generator = og.Generator(model, og.GeneratorParams(model))
    generator.append_tokens([PROMPT])
    while not generator.is_done():
        generator.generate_next_token()
    sequence = [int(t) for t in generator.get_sequence(0)]
    # genai keeps the padded window in the sequence and counts it in max_length: 24 tokens are left
    assert sequence[:window] == [spec.pad_token_id] * (window - len(PROMPT)) + PROMPT
    generated = sequence[window:]
    assert len(generated) == MAX_LENGTH - window
    assert generated == _tokens(folder / "prefill.onnx", folder / "decode.onnx", spec, window)[:len(generated)]


def test_the_window_loop_generates_what_jax_does_for_a_prompt_over_several_windows():
    """The sliding-window scheme itself (the loop over the JAX step, in float): a 30-token prompt runs
    as two prefill windows of 24 (the first padded on the left), then 16 decode steps, and generates
    the reference's tokens (jax2onnx_llm.reference, one static buffer)."""
    import jax

    spec = decoder_spec(_llama())
    step = jax.jit(window_step(spec))
    run = lambda xs: [np.asarray(x) for x in step(*xs)]  # noqa: E731
    prompt = [(7 * i + 3) % spec.vocab_size for i in range(30)]
    got = greedy(run, run, prompt, 16, spec=spec, window=prefill_window(MAX_LENGTH), max_length=MAX_LENGTH)
    expected = greedy_generate(spec, np.array([prompt]), np.ones((1, len(prompt))), 16)[0].tolist()
    assert got == expected


def test_given_calibration_prompts_become_each_graphs_inputs():
    spec = decoder_spec(_llama())
    window = prefill_window(MAX_LENGTH)
    batches, what = calibration_batches(spec, [np.array([[1, 2, 3], [4, 5, 6]])], None, window=window,
                                        max_length=MAX_LENGTH)
    assert what.startswith("2 given prompt(s)")
    # two prompts of 3 tokens: one prefill run each, then 7 decode runs each (8 tokens generated)
    assert len(batches[window]) == 2 and len(batches[1]) == 14
    for w, found in batches.items():
        shapes = [x.shape for x in found[0]]
        expected = [tuple(s.shape) for s in window_specs(spec, w, MAX_LENGTH)]
        assert shapes == expected
    ids, mask, *_ = batches[window][1]
    assert ids[0, -3:].tolist() == [4, 5, 6] and mask[0].tolist() == [0] * (MAX_LENGTH - 3) + [1, 1, 1]


@pytest.mark.parametrize(("kwargs", "error"), [
    ({"precision": "int8"}, "precision='int8': target='qdq' writes its own static form; use Precision\\('qdq'"),
    ({"max_length": 3}, "max_length=3: target='qdq' writes a prefill window of at least 2 tokens"),
])
def test_bad_options_are_refused_before_the_export(tmp_path, kwargs, error):
    from jax2onnx_llm.errors import LlmExportError

    with pytest.raises(LlmExportError, match=error):
        export_causal_lm(_llama(), tmp_path / "m", **{"max_length": MAX_LENGTH, "target": "qdq", "tokenizer": False,
                                                       **kwargs})
    assert not (tmp_path / "m").exists()
