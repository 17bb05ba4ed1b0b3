"""Greedy tokens of a trained tiny LM (trained_lm.py, beside this file) under each precision: int4's default
(block 32 with zero points, float32 compute, the LM head and the embedding tables int4 too) keeps
at least 90% of 32 greedy tokens equal to float32 JAX's, and so does int4 with the int8 head and
tables of the options; the quantized weights shrink."""

from __future__ import annotations

import pathlib

import jax
import numpy as np
import onnx
import onnxruntime as ort
import pytest
import trained_lm as lm
from flax import nnx
from jax2onnx import GreedyCheck, Precision, to_onnx, verify
from jax2onnx.testing import built_once, xdist_session_folder
from jax2onnx.verification.greedy import GreedyCheckError
from jax2onnx.verification.precision import MIN_COSINE, cosine
from jax2onnx.verification.report import _tensor_nbytes


def _train_once_per_session(tmp_path_factory) -> tuple[lm.TinyLM, float]:
    """``lm.train()``, run once per pytest session: under pytest-xdist this module's tests spread
    over the workers, and each would train the same model (most of the module fixture's CPU). The
    first worker's trained parameters are kept in the session's shared folder (keyed by the training
    code and the library versions) and the others load them (``jax2onnx.testing.built_once``)."""
    import hashlib
    import importlib.metadata

    def train(_root):
        model, loss = lm.train()
        return [np.asarray(leaf) for leaf in jax.tree.leaves(nnx.split(model, nnx.Param, ...)[1])], float(loss)

    versions = [importlib.metadata.version(d) for d in ("jax", "jaxlib", "flax", "optax", "numpy")]
    with open(lm.__file__, "rb") as source:
        key = hashlib.sha256(source.read() + repr(versions).encode()).hexdigest()[:16]
    _, (leaves, loss) = built_once(f"trained_lm-{key}", train, xdist_session_folder(tmp_path_factory))
    graphdef, params, rest = nnx.split(lm.TinyLM(nnx.Rngs(0)), nnx.Param, ...)
    params = jax.tree.unflatten(jax.tree.structure(params), [jax.numpy.asarray(leaf) for leaf in leaves])
    return nnx.merge(graphdef, params, rest), loss


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    model, loss = _train_once_per_session(tmp_path_factory)
    fn = jax.jit(lambda ids: model(ids))
    reference = [lm.greedy(lambda ids: np.asarray(fn(ids)), s, k) for s, k in lm.PROMPTS]
    return model, loss, reference


@pytest.fixture(scope="module")
def exported(trained, tmp_path_factory):
    """``exported(precision)``: ``to_onnx(model, [lm.SPEC], target="onnxruntime", precision=precision)``
    of the trained model, each precision exported once per session (the int4, int8 and int8-head
    exports are read by several tests; under pytest-xdist the first worker to ask exports, the
    others load its file). Each call returns a fresh ModelProto, so a test may change what it gets."""
    import hashlib

    model = trained[0]
    folder = xdist_session_folder(tmp_path_factory)
    paths: dict[str, pathlib.Path] = {}

    def export(precision) -> onnx.ModelProto:
        # the key is the precision's repr, which leaves calibration data out: calibrated exports are the tests' own
        assert not getattr(precision, "calibration", ()), "exported() takes precisions without calibration data"
        key = hashlib.sha256(repr(precision).encode()).hexdigest()[:16]
        if key not in paths:
            def build(root):
                onnx.save(to_onnx(model, [lm.SPEC], target="onnxruntime", precision=precision), root / "model.onnx")

            root, _ = built_once(f"trained_lm-export-{key}", build, folder)
            paths[key] = root / "model.onnx"
        return onnx.load(paths[key])

    return export


def weight_bytes(model: onnx.ModelProto) -> int:
    return sum(_tensor_nbytes(t) for t in model.graph.initializer)


def _session(model: onnx.ModelProto) -> ort.InferenceSession:
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


def test_the_tiny_lm_learned_its_language(trained):
    """The measurement means something only if float32 itself continues the language."""
    _, loss, reference = trained
    truth = [list(lm.counting(s, k, lm.PROMPT + lm.NEW_TOKENS)[lm.PROMPT:]) for s, k in lm.PROMPTS]
    assert loss < 0.1, loss
    assert np.mean(np.asarray(reference) == np.asarray(truth)) >= 0.95


#: int4 with the options that keep the LM head and the embedding tables int8
INT8_HEAD_INT4 = Precision("int4", embeddings="int8", lm_head="int8")


@pytest.mark.parametrize("precision", ["int4", "int8", "float16", "bfloat16", INT8_HEAD_INT4],
                         ids=lambda p: p if isinstance(p, str) else "int4-int8-head")
def test_greedy_tokens_agree_with_float32(trained, exported, precision):
    model, _, reference = trained
    onnx_model = exported(precision)
    onnx.checker.check_model(onnx_model, full_check=True)
    session = _session(onnx_model)
    name = session.get_inputs()[0].name
    agreement = lm.greedy_agreement(lambda ids: session.run(None, {name: ids})[0], reference)
    assert agreement >= 0.9, f"{precision}: {agreement:.2f} of the greedy tokens equal float32's"
    ids = np.stack([lm.counting(s, k, lm.CONTEXT) for s, k in lm.PROMPTS[:1]])
    kind = precision if isinstance(precision, str) else precision.kind
    assert cosine(np.asarray(model(ids)), session.run(None, {name: ids})[0]) >= MIN_COSINE[kind]


def test_gptq_halves_int4s_perplexity_gap(trained, exported):
    """Calibrated int4 (GPTQ on 32 sequences of the language) keeps the perplexity on held-out
    sequences at most half as far from float32's as round-to-nearest int4, in the same graph."""
    model, _, reference = trained
    rng = np.random.default_rng(1)
    calibration = [(lm._batch(rng, 1),) for _ in range(32)]
    held_out = lm._batch(np.random.default_rng(2), 64)
    fn = jax.jit(lambda ids: model(ids))
    ppl_f32 = lm.perplexity(lambda ids: np.asarray(fn(ids)), held_out)
    gaps, ops = {}, {}
    for method in ("rtn", "gptq"):
        if method == "rtn":  # plain "int4" rounds to nearest (without calibration data)
            onnx_model = exported("int4")
        else:
            onnx_model = to_onnx(model, [lm.SPEC], target="onnxruntime",
                                 precision=Precision("int4", method=method, calibration=calibration))
        session = _session(onnx_model)
        name = session.get_inputs()[0].name
        gaps[method] = lm.perplexity(lambda ids, s=session, n=name: s.run(None, {n: ids})[0], held_out) - ppl_f32
        ops[method] = [n.op_type for n in onnx_model.graph.node]
        assert lm.greedy_agreement(lambda ids, s=session, n=name: s.run(None, {n: ids})[0], reference) >= 0.9
    assert ops["gptq"] == ops["rtn"]
    assert 0 < gaps["rtn"] and gaps["gptq"] <= 0.5 * gaps["rtn"], gaps


def test_auto_accuracy_level_on_the_language_goes_to_4_and_keeps_the_tokens(trained):
    """accuracy_level="auto" checked on 16 sequences of the language (calibration=): most layers
    go to level 4 (int8 activations), and the greedy tokens are level 1's (the same codes with
    every MatMulNBits at level 1). On the random-token probe the same model keeps every layer at
    1: its logits there are near ties (docs/guide/precision.md)."""
    model, _, reference = trained
    rng = np.random.default_rng(1)
    calibration = [(lm._batch(rng, 1),) for _ in range(16)]
    onnx_model = to_onnx(model, [lm.SPEC], target="onnxruntime", precision=Precision("int4", calibration=calibration))
    onnx.checker.check_model(onnx_model, full_check=True)
    nbits = [n for n in onnx_model.graph.node if n.op_type == "MatMulNBits"]
    levels = [{a.name: a.i for a in n.attribute}["accuracy_level"] for n in nbits]
    assert levels.count(4) > len(levels) // 2, levels
    assert "16 calibration batch(es)" in {p.key: p.value for p in onnx_model.metadata_props}["jax2onnx.precision.detail"]
    level_1 = onnx.ModelProto()
    level_1.CopyFrom(onnx_model)
    for n in level_1.graph.node:
        for a in n.attribute:
            if n.op_type == "MatMulNBits" and a.name == "accuracy_level":
                a.i = 1
    tokens = []
    for m in (onnx_model, level_1):
        session = _session(m)
        name = session.get_inputs()[0].name
        tokens.append([lm.greedy(lambda ids, s=session, n=name: s.run(None, {n: ids})[0], s0, k) for s0, k in lm.PROMPTS])
    assert np.array_equal(np.asarray(tokens[0]), np.asarray(tokens[1]))
    assert np.mean(np.asarray(tokens[0]) == np.asarray(reference)) >= 0.9  # and float32's, as plain int4 does


def _int8_tables(onnx_model: onnx.ModelProto) -> int:
    """How many Gathers read an int8 initializer (an int8 embedding table)."""
    int8 = {t.name for t in onnx_model.graph.initializer if t.data_type == onnx.TensorProto.INT8}
    return sum(n.op_type == "Gather" and n.input[0] in int8 for n in onnx_model.graph.node)


def _nbits(onnx_model: onnx.ModelProto) -> list[int]:
    """The ``bits`` of each MatMulNBits (int8 weight matmuls are 8-bit ones under target="onnxruntime")."""
    return [next(a.i for a in n.attribute if a.name == "bits") for n in onnx_model.graph.node if n.op_type == "MatMulNBits"]


def test_int4_default_quantizes_the_head_and_embeddings_int4(exported):
    onnx_model = exported("int4")
    ops = [n.op_type for n in onnx_model.graph.node]
    # q|k|v, out, fc1, fc2 of two blocks and the head (it writes the logits): all int4
    assert _nbits(onnx_model).count(4) >= 9 and 8 not in _nbits(onnx_model)
    nbits = [n for n in onnx_model.graph.node if n.op_type == "MatMulNBits"]
    assert all(len(n.input) > 3 and n.input[3] for n in nbits)  # zero points: asymmetric by default
    # accuracy_level "auto" (the default): 4 (int8 activations) or, where the check keeps it, 1 (float32 compute)
    assert all({a.name: a.i for a in n.attribute}["accuracy_level"] in (1, 4) for n in nbits)
    assert "accuracy_level auto on the probe set" in {p.key: p.value for p in onnx_model.metadata_props}[
        "jax2onnx.precision.detail"]
    # the token embedding: 4-bit rows gathered by GatherBlockQuantized (the position table, indexed
    # by a constant arange at this fixed length, is folded into a small constant addend)
    assert ops.count("GatherBlockQuantized") == 1 and _int8_tables(onnx_model) == 0
    assert "int4 embeddings" in {p.key: p.value for p in onnx_model.metadata_props}["jax2onnx.precision.detail"]


def test_int8_options_keep_the_head_and_tables_int8(exported):
    onnx_model = exported(INT8_HEAD_INT4)
    ops = [n.op_type for n in onnx_model.graph.node]
    assert _nbits(onnx_model).count(4) >= 8 and _nbits(onnx_model).count(8) == 1  # the head
    assert ops.count("GatherBlockQuantized") == 0 and _int8_tables(onnx_model) == 1
    head_only = exported(Precision("int4", lm_head="int8"))
    ops = [n.op_type for n in head_only.graph.node]
    assert _nbits(head_only).count(8) == 1 and ops.count("GatherBlockQuantized") == 1
    tables_only = exported(Precision("int4", embeddings="int8"))
    assert 8 not in _nbits(tables_only) and _int8_tables(tables_only) == 1
    # int8 precision: tables int8 as ever ("auto" is the precision's own width)
    int8 = exported("int8")
    assert _int8_tables(int8) == 1 and not any(n.op_type == "GatherBlockQuantized" for n in int8.graph.node)
    floats = exported(Precision("int4", embeddings=None))
    assert _int8_tables(floats) == 0 and not any(n.op_type == "GatherBlockQuantized" for n in floats.graph.node)


def test_int4_default_is_smaller_than_the_int8_head_option(exported):
    default = exported("int4")
    int8_head = exported(INT8_HEAD_INT4)
    assert weight_bytes(default) < weight_bytes(int8_head)


# -- the export report's greedy-token figure (verify(..., greedy=...)) -------------------------------

#: prompts of the language the model learned: a random prompt is out of its distribution, where
#: even the trained logits have small margins
PROMPTS = [list(lm.counting(s, k, lm.PROMPT)) for s, k in lm.PROMPTS]


@pytest.mark.parametrize("precision", ["int4", "int8"])
def test_report_shows_greedy_agreement(trained, exported, precision):
    model, _, reference = trained
    onnx_model = exported(precision)
    report = verify(model, onnx_model, [lm.SPEC], greedy=GreedyCheck(prompts=PROMPTS))
    greedy = report.precision.greedy
    assert greedy.tokens == len(lm.PROMPTS) * lm.NEW_TOKENS
    assert greedy.agreement >= 0.9 and greedy.ok and report
    # the report decodes as the hand-written loop of trained_lm.py does
    session = _session(onnx_model)
    name = session.get_inputs()[0].name
    assert greedy.agreement == lm.greedy_agreement(lambda ids: session.run(None, {name: ids})[0], reference)
    assert report.to_dict()["precision"]["greedy"]["ok"] is True
    assert "greedy tokens vs float32: output" in str(report)


def _shifted_logits(onnx_model: onnx.ModelProto) -> onnx.ModelProto:
    """The model with its vocabulary rolled by one: every logit moves to the next token id, so every
    argmax names another token (a broken LM head, as a wrong transpose of it would be)."""
    broken = onnx.ModelProto()
    broken.CopyFrom(onnx_model)
    graph = broken.graph
    out = graph.output[0].name
    graph.node[-1].output[list(graph.node[-1].output).index(out)] = "unshifted"
    graph.initializer.append(onnx.numpy_helper.from_array(np.roll(np.arange(lm.VOCAB), 1).astype(np.int64), "shift"))
    graph.node.append(onnx.helper.make_node("Gather", ["unshifted", "shift"], [out], axis=2))
    onnx.checker.check_model(broken, full_check=True)
    return broken


def test_report_fails_when_greedy_tokens_differ(trained, exported):
    model, _, _ = trained
    broken = _shifted_logits(exported("int8"))
    report = verify(model, broken, [lm.SPEC], greedy=GreedyCheck(prompts=PROMPTS))
    greedy = report.precision.greedy
    assert greedy.agreement < 0.2 and not greedy.ok
    assert not report.precision.ok and not report
    assert "greedy tokens equal the float32 function's, under the floor 90%" in report.failures()


def test_greedy_option_names_the_problem(trained):
    model, _, _ = trained
    onnx_model = to_onnx(model, [lm.SPEC])
    with pytest.raises(GreedyCheckError, match="no output named 'logits'"):
        verify(model, onnx_model, [lm.SPEC], greedy="logits")
    with pytest.raises(GreedyCheckError, match="leave no room"):
        verify(model, onnx_model, [lm.SPEC], greedy=GreedyCheck(prompts=[[1] * lm.CONTEXT]))
    # a float32 export asked for the figure gets a precision section holding it
    report = verify(model, onnx_model, [lm.SPEC], greedy=GreedyCheck(prompts=PROMPTS[:1], new_tokens=8))
    assert report.precision.kind == "float32" and report.precision.greedy.agreement == 1.0 and report


def test_to_onnx_verify_takes_a_greedy_check(trained):
    """The export's own report (to_onnx(verify=...)) runs the same check and raises below the floor."""
    from jax2onnx import VerificationError

    model, _, _ = trained
    check = GreedyCheck(prompts=PROMPTS[:2], new_tokens=16)
    to_onnx(model, [lm.SPEC], target="onnxruntime", precision="int4", verify=check)  # passes: raises nothing
    with pytest.raises(VerificationError, match="greedy tokens equal the float32 function's") as info:
        to_onnx(model, [lm.SPEC], target="onnxruntime", precision="int4", verify=GreedyCheck(prompts=PROMPTS[:2], new_tokens=16,
                                                                       min_agreement=1.01))
    assert info.value.report.precision.greedy.agreement >= 0.9
    with pytest.raises(TypeError, match="GreedyCheck"):
        to_onnx(model, [lm.SPEC], verify="yes")
