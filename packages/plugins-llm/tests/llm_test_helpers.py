"""Shared checks: onnxruntime-genai's greedy tokens equal the library's, for batch 1 and a padded batch."""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import uuid

import numpy as np
import onnx
import pytest
from jax2onnx import testing

NEW_TOKENS = 32
# Three prompts of different lengths: the batch is left-padded to the longest.
PROMPTS = [[5, 6, 7, 8, 9, 10, 11], [12, 13, 14], [20, 21, 22, 23, 24]]


def remembered(reference, *identity):
    """``reference(prompts) -> tokens`` (a library's greedy generation, the expensive side of a
    token test: its generate loop compiled anew for every model object), answered once per session
    for each ``identity`` (what the tokens depend on besides the prompts: the model's fingerprint,
    the end token) and prompts. Tests that rebuild the same tiny model (same class, config and
    weights, e.g. per cache or target) compare with the same tokens, computed once. Shared by the
    xdist workers through the folder ``REFERENCE_DIR`` names (conftest.py), else within the process."""
    def cached(prompts):
        key = hashlib.sha256(repr((identity, [[int(t) for t in p] for p in prompts], NEW_TOKENS)).encode()).hexdigest()
        if key not in _TOKENS:
            folder = os.environ.get(REFERENCE_DIR)
            path = os.path.join(folder, key + ".npy") if folder else None
            if path and os.path.exists(path):
                _TOKENS[key] = np.load(path)
            else:
                _TOKENS[key] = np.asarray(reference(prompts))
                if path:  # written whole under another name first: a worker reads a complete file or none
                    fd, partial = tempfile.mkstemp(dir=folder, suffix=".partial")
                    with os.fdopen(fd, "wb") as f:
                        np.save(f, _TOKENS[key])
                    os.replace(partial, path)
        return _TOKENS[key].copy()

    return cached


REFERENCE_DIR = "JAX2ONNX_LLM_TEST_REFERENCE_DIR"
_TOKENS: dict[str, np.ndarray] = {}


def built_once(name: str, build):
    """``build(root) -> value``: a module fixture's export written under the empty folder ``root`` and
    what its tests compare it with (the library's tokens, inputs: picklable), made once per session for
    ``name`` in the session folder ``REFERENCE_DIR`` names and answered as ``(root, value)``
    (``jax2onnx.testing.built_once``: the other xdist workers wait for and read the first's)."""
    return testing.built_once(name, build, os.environ.get(REFERENCE_DIR))


def keras_fingerprint(model) -> str:
    """What a KerasHub CausalLM's greedy tokens depend on: its classes, configs, every layer's dtype
    policy (``quantize`` changes them) and every variable's values, in order. Not the names: Keras
    numbers them per model built (``llama_backbone_3``), the same model built again has others."""
    def unnamed(config):
        if isinstance(config, dict):
            return {k: unnamed(v) for k, v in config.items() if k != "name"}
        return [unnamed(v) for v in config] if isinstance(config, (list, tuple)) else config

    digest = hashlib.sha256()
    for obj in (model, model.backbone):
        digest.update(type(obj).__qualname__.encode())
        digest.update(json.dumps(unnamed(obj.get_config()), sort_keys=True, default=repr).encode())
    layers = model._flatten_layers()
    digest.update(repr([(type(layer).__qualname__, str(layer.dtype_policy), _instance_state(layer))
                        for layer in layers]).encode())
    digest.update(repr(type(getattr(model, "sampler", None))).encode())
    for v in model.weights:
        value = np.asarray(v.numpy())
        digest.update(f"{value.dtype} {value.shape}".encode())
        digest.update(np.ascontiguousarray(value).tobytes())
    return digest.hexdigest()


def _instance_state(layer) -> list:
    """What a test may set on one layer object that changes its computation but not its config or
    weights: public scalar attributes (``rotary_dim``, ``logit_soft_cap``, ...; not the per-build
    ``name``/``path``) and methods replaced on the instance (``layer.call = ...``), which make the
    fingerprint unique to that object: such a model's tokens are never shared."""
    state = []
    for key, value in sorted(vars(layer).items()):
        replaced = callable(value) and callable(getattr(type(layer), key, None)) and not hasattr(value, "weights")
        if replaced and not (getattr(value, "__module__", None) or "").startswith("keras"):  # (Keras wraps build, quantize)
            state.append((key, f"replaced on the instance {id(layer)}:{uuid.uuid4()}"))
        elif not key.startswith("_") and key not in ("name", "path") and (
                value is None or isinstance(value, (bool, int, float, str))):
            state.append((key, value))
    return state


def flax_fingerprint(model) -> str:
    """What a transformers Flax model's greedy tokens depend on: its class, config, dtype and parameters."""
    import jax

    digest = hashlib.sha256()
    digest.update(f"{type(model).__qualname__} {model.dtype} {model.config.to_json_string()}".encode())
    for path, value in jax.tree_util.tree_flatten_with_path(model.params)[0]:
        value = np.asarray(value)
        digest.update(f"{jax.tree_util.keystr(path)} {value.dtype} {value.shape}".encode())
        digest.update(np.ascontiguousarray(value).tobytes())
    return digest.hexdigest()


def require_genai():
    return pytest.importorskip("onnxruntime_genai", reason="onnxruntime-genai runs the exported folder")


def check_folder(folder) -> dict:
    """The folder's model passes the full ONNX check; its config names the graph's inputs/outputs."""
    path = folder / "model.onnx"
    onnx.checker.check_model(str(path), full_check=True)
    config = json.loads((folder / "genai_config.json").read_text())
    model = onnx.load(str(path), load_external_data=False)
    names = {i.name for i in model.graph.input} | {o.name for o in model.graph.output}
    dec = config["model"]["decoder"]
    for key in ("input_ids", "attention_mask"):
        assert dec["inputs"][key] in names
    assert dec["outputs"]["logits"] in names
    for i in range(dec["num_hidden_layers"]):
        assert dec["inputs"]["past_key_names"] % i in names and dec["outputs"]["present_value_names"] % i in names
    return config


def check_multimodal_graphs(folder, config: dict, submodels: dict[str, str]) -> None:
    """Each sub-model of a multimodal folder passes the full ONNX check and holds every input and output
    its genai config section names (the per-layer ``%d`` patterns aside)."""
    for section, filename in submodels.items():
        onnx.checker.check_model(str(folder / filename), full_check=True)
        graph = onnx.load(str(folder / filename)).graph
        names = {v.name for v in graph.input} | {v.name for v in graph.output}
        wanted = {v for v in (*config[section]["inputs"].values(), *config[section]["outputs"].values()) if "%d" not in v}
        assert wanted <= names, (section, wanted - names)


def assert_same_tokens(folder, reference, pad_token_id: int | None, eos) -> None:
    """``reference(prompts) -> (batch, NEW_TOKENS)`` greedy tokens of the library; genai must match,
    for the first prompt alone and for the batch of three, left-padded (as genai's users pad) with
    the folder's own ``genai_config.json`` pad id, which must be ``pad_token_id`` when given. Each
    row of the batch also generates what its prompt does alone. The sequences must vary (a model
    repeating one token would prove little)."""
    from jax2onnx_llm.genai_run import LoadedFolder, greedy, until_eos

    require_genai()
    loaded = LoadedFolder(folder)  # one genai model for the four generations (and the folder's pad id)
    if pad_token_id is not None:
        assert loaded.pad_token_id == pad_token_id, "genai_config.json names another pad id"
    for prompts in (PROMPTS[:1], PROMPTS):
        expected = np.asarray(reference(prompts))
        got = greedy(loaded, prompts, NEW_TOKENS)
        for row, p in enumerate(prompts):
            want = until_eos(expected[row], eos)
            assert until_eos(got[row], eos) == want, f"prompt {row} of {len(prompts)}: genai {got[row]} vs {want}"
            assert len(want) == NEW_TOKENS, f"prompt {row} ends after {len(want)} tokens: pick another eos id"
        assert len(set(until_eos(expected[0], eos))) > 4, f"the tiny model repeats itself: {expected[0]}"
    alone = [greedy(loaded, [p], NEW_TOKENS)[0] for p in PROMPTS[1:]]
    assert alone == got[1:], f"padding changed a row's tokens: alone {alone}, in the batch {got[1:]}"


def op_counts(folder) -> dict[tuple[str, str], int]:
    """``{(domain, op_type): count}`` of the folder's model (``""`` for standard ONNX)."""
    from collections import Counter

    graph = onnx.load(str(folder / "model.onnx"), load_external_data=False).graph
    return dict(Counter((n.domain if n.domain not in ("ai.onnx",) else "", n.op_type) for n in graph.node))


MS = "com.microsoft"


def assert_fused_attention(folder, target: str, layers: int, *, rotary: str | None, cache: str | None = None) -> None:
    """The fusion fired: one fused attention per layer, of the target's kind, and the rotation of
    ``rotary`` (``"gqa"``: inside GroupQueryAttention; ``"op"``: a RotaryEmbedding on q and k per
    layer; None: no rotary op), so a declined fusion cannot pass unseen. ``cache``: for standard
    ONNX, ``"concat"`` uses Attention's past_key/past_value → present_key/present_value and
    ``"shared"`` scatters into the buffer and attends over it."""
    ops = op_counts(folder)
    graph = onnx.load(str(folder / "model.onnx"), load_external_data=False).graph
    if target == "onnxruntime":
        assert ops.get((MS, "GroupQueryAttention"), 0) == layers, ops
        assert ops.get(("", "Attention"), 0) == 0, ops
        do_rotary = {a.i for n in graph.node if n.op_type == "GroupQueryAttention" for a in n.attribute if a.name == "do_rotary"}
        assert do_rotary == {1 if rotary == "gqa" else 0}, do_rotary
        assert ops.get((MS, "RotaryEmbedding"), 0) == (2 * layers if rotary == "op" else 0), ops
    else:
        assert ops.get(("", "Attention"), 0) == layers, ops
        assert not any(domain == MS for domain, _ in ops), ops
        assert ops.get(("", "RotaryEmbedding"), 0) == (2 * layers if rotary else 0), ops
        attention = [n for n in graph.node if n.op_type == "Attention"]
        if cache == "concat":
            assert all(len(n.input) >= 6 and n.input[4] and n.input[5] and len(n.output) >= 3 for n in attention)
        elif cache == "shared":
            assert all(len(n.input) == 4 for n in attention) and ops.get(("", "ScatterElements"), 0) == 2 * layers


def assert_packed_projections(folder, layers: int, mlp_matmuls: int = 2, packed_query: bool = True) -> None:
    """The projections' packing fired (``packed_projections.py``, ``target="onnxruntime"``): a
    layer's q/k/v are one weight matmul and a gated MLP's gate and up another, so a layer runs
    ``2 + mlp_matmuls`` weight matmuls (q/k/v, out, gate/up, down). ``packed_query``: every
    GroupQueryAttention takes that matmul (``(heads + 2 kv_heads) * head_size`` columns) as its
    packed query, key and value omitted (else q and k are rotated in the graph between, and a
    Split hands them out)."""
    graph = onnx.load(str(folder / "model.onnx"), load_external_data=False).graph
    producer = {out: n for n in graph.node for out in n.output}
    matmuls = [n for n in graph.node if n.op_type in ("MatMul", "MatMulNBits")]
    attention = [n for n in graph.node if n.op_type == "GroupQueryAttention"]
    assert len(attention) == layers
    for node in attention if packed_query else ():
        attrs = {a.name: a.i for a in node.attribute}
        assert list(node.input[1:3]) == ["", ""], f"{node.name}: key/value not packed into the query"
        qkv = producer[node.input[0]]
        assert qkv.op_type in ("MatMul", "MatMulNBits"), qkv.op_type
        if qkv.op_type == "MatMulNBits":  # as wide as q, k and v: (heads + 2 kv_heads) * the out-projection's K / heads
            out_proj = next(n for n in matmuls if n.input[0] == node.output[0])
            head_size = {a.name: a.i for a in out_proj.attribute}["K"] // attrs["num_heads"]
            width = {a.name: a.i for a in qkv.attribute}["N"]
            assert width == (attrs["num_heads"] + 2 * attrs["kv_num_heads"]) * head_size, (width, head_size, attrs)
    assert len(matmuls) == layers * (2 + mlp_matmuls) + 1, [n.name for n in matmuls]  # + the LM head


#: KerasHub's mixture-of-experts families (keras_moe.py): their sparse blocks' op per layer
MOE_FAMILIES = ("mixtral", "qwen_moe", "qwen3_moe", "gpt_oss", "qwen3_5_moe")


def assert_moe_fused(folder, layers: int, experts: int = 4, op: str = "MoE") -> None:
    """One ``com.microsoft`` ``op`` (``MoE``, or ``QMoE`` under int4) per decoder layer, and no
    dense expert computation left beside it: every stacked float32 ``[experts, ...]`` weight is read
    only by the op (through data movement), not by the library's batched einsum over all experts;
    under ``QMoE`` none is left, the op reading uint8 codes."""
    ops = op_counts(folder)
    assert ops.get((MS, op), 0) == layers, ops
    assert ops.get((MS, "MoE" if op == "QMoE" else "QMoE"), 0) == 0, ops
    graph = onnx.load(str(folder / "model.onnx"), load_external_data=False).graph
    readers: dict[str, list] = {}
    for node in graph.node:
        for name in node.input:
            readers.setdefault(name, []).append(node)
    moving = {"Transpose", "Reshape", "Concat", "Unsqueeze", "Squeeze", "Identity"}
    stacked = [t.name for t in graph.initializer
               if len(t.dims) == 3 and t.dims[0] == experts and t.data_type == onnx.TensorProto.FLOAT]
    if op == "QMoE":
        inits = {t.name: t for t in graph.initializer}
        codes = [inits.get(n.input[i]) for n in graph.node if n.op_type == "QMoE" for i in (2, 5)]
        assert all(c is not None and c.data_type == onnx.TensorProto.UINT8 for c in codes), "QMoE reads no int4 codes"
        stacked = [name for name in stacked if not all(r.op_type == "QMoE" for r in readers.get(name, []))]
        assert not stacked, f"float32 stacked weights left beside QMoE: {stacked}"
        return
    assert stacked, "no stacked expert weight found"
    for name in stacked:
        frontier, ends = [name], set()
        while frontier:
            for node in readers.get(frontier.pop(), []):
                if node.op_type in moving:
                    frontier.extend(node.output)
                else:
                    ends.add(node.op_type)
        assert ends <= {op}, f"{name} is read by {ends}, not only by {op}"


GQA_OP, ATTENTION_OP = f"{MS}.GroupQueryAttention", "Attention"


def assert_layer_fusions(folder, expected: list[str]) -> None:
    """Per decoder layer, what its attention became: ``expected[i]`` is the fused op's name (one
    node of it tagged with layer ``i`` in the graph, and the export's report saying so) or a piece
    of the reason the report gives for running the library's own attention (no fused node)."""
    from jax2onnx_llm.attention_report import FUSED_OPS, TAG, attention_fusions

    graph = onnx.load(str(folder / "model.onnx"), load_external_data=False).graph
    per_layer: dict[int, list[str]] = {}
    for node in graph.node:
        name = FUSED_OPS.get((node.domain if node.domain != "ai.onnx" else "", node.op_type))
        if name is not None:
            tags = {p.key: p.value for p in node.metadata_props}
            per_layer.setdefault(int(tags.get(TAG, -1)), []).append(name)
    report = attention_fusions(folder)
    assert [entry["layer"] for entry in report] == list(range(len(expected))), report
    for i, want in enumerate(expected):
        entry = report[i]
        if want in FUSED_OPS.values():
            assert per_layer.get(i) == [want], f"layer {i}: fused nodes {per_layer.get(i)}, want one {want}"
            assert entry["fused"] == want, entry
        else:
            assert i not in per_layer, f"layer {i}: {per_layer[i]} fused, but expected not fused ({want})"
            assert entry["fused"] is None and want in entry["reason"], (i, entry)
    assert -1 not in per_layer, f"fused attention nodes without a layer: {per_layer[-1]}"


def keras_hub_under_jax():
    """``(keras, keras_hub)`` for a test module, or the module skipped with the reason: KerasHub models
    export under the JAX backend only."""
    os.environ.setdefault("KERAS_BACKEND", "jax")
    keras = pytest.importorskip("keras", reason="KerasHub models need keras")
    keras_hub = pytest.importorskip("keras_hub", reason="keras-hub provides the models")
    if keras.backend.backend() != "jax":  # pragma: no cover
        pytest.skip("KerasHub models export under the JAX backend only (KERAS_BACKEND=jax)", allow_module_level=True)
    return keras, keras_hub
