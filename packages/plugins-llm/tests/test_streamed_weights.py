"""export_causal_lm(..., weights=<safetensors>): the model gives only the structure, the weights are
read from the file while model.onnx.data is written; the folder generates the tokens of the model
built with those weights in memory."""

from __future__ import annotations

import jax
import numpy as np
import onnx
import pytest
from flax import nnx
from jax2onnx_examples.llama import Llama, LlamaConfig
from jax2onnx_llm import WeightsError, export_causal_lm
from jax2onnx_llm.genai_run import prefill_logits
from jax2onnx_llm.weights import save_safetensors, weight_names, write_safetensors
from llm_test_helpers import assert_same_tokens, check_folder

CFG = LlamaConfig(vocab_size=96, eos_token_id=95)


def test_streamed_from_safetensors_generates_the_same_tokens(tmp_path):
    model = Llama(CFG, rngs=nnx.Rngs(3))
    source = tmp_path / "weights.safetensors"
    save_safetensors(model, source)
    abstract = nnx.eval_shape(lambda: Llama(CFG, rngs=nnx.Rngs(0)))  # no arrays: shapes only
    folder = export_causal_lm(abstract, tmp_path / "out", max_length=48, cache="shared", weights=source)
    check_folder(folder)
    # every weight is in model.onnx.data, read from the file (the abstract model has no values);
    # external data at this small size too: streamed weights are written one at a time (issue #32)
    proto = onnx.load(str(folder / "model.onnx"), load_external_data=False)
    external = _external_weights(proto)
    matrices = {name for name, leaf in weight_names(abstract).items() if len(leaf.shape) == 2}
    assert len(matrices) == 7 * CFG.num_layers + 2 and matrices <= external  # (norm scales: fused, renamed)
    assert_same_tokens(folder, lambda prompts: model.generate(*_padded(prompts), 32), CFG.pad_token_id,
                       CFG.eos_token_id)


def _external_weights(proto) -> set[str]:
    """The weights in the external data file; a packed initializer (a layer's q/k/v or gate/up as
    one matmul, packed_projections.py) holds several, named with "+" between them."""
    return {name for t in proto.graph.initializer if t.data_location == onnx.TensorProto.EXTERNAL
            for name in t.name.split("+")}


def test_streamed_export_logs_its_progress_when_asked_and_is_quiet_otherwise(tmp_path, capsys):
    source = tmp_path / "weights.safetensors"
    save_safetensors(Llama(CFG, rngs=nnx.Rngs(3)), source)
    abstract = nnx.eval_shape(lambda: Llama(CFG, rngs=nnx.Rngs(0)))
    export_causal_lm(abstract, tmp_path / "out", max_length=32, weights=source, precision="int4", progress=True)
    lines = capsys.readouterr().err.splitlines()  # not a terminal: plain lines
    stages = [line.removeprefix("jax2onnx: ").removesuffix(" ...") for line in lines if line.endswith(" ...")]
    assert stages == ["check", "trace", "lower", "optimize", "write", "genai_config.json"], lines
    writing = next(line for line in lines if line.startswith("jax2onnx: writing "))
    count, total = int(writing.split()[2]), writing.split("(")[1].rstrip(")")  # "writing N tensors (size)"
    proto = onnx.load(str(tmp_path / "out" / "model.onnx"), load_external_data=False)
    assert count == sum(t.data_location == onnx.TensorProto.EXTERNAL for t in proto.graph.initializer) > 0
    assert f"jax2onnx:   {count}/{count} tensors, {total} of {total}" in lines, lines
    assert lines[-1].startswith("jax2onnx: done in ")
    export_causal_lm(abstract, tmp_path / "out", max_length=32, weights=source, precision="int4", progress=False)
    export_causal_lm(abstract, tmp_path / "out", max_length=32, weights=source, precision="int4")  # None: a log, quiet
    assert capsys.readouterr().err == ""


def test_source_without_a_weight_is_one_clear_error(tmp_path):
    abstract = nnx.eval_shape(lambda: Llama(CFG, rngs=nnx.Rngs(0)))
    names = weight_names(abstract)
    source = tmp_path / "partial.safetensors"
    first = sorted(names)[0]
    write_safetensors(source, [(n, s.shape, np.float32, lambda s=s: np.zeros(s.shape, np.float32))
                               for n, s in names.items() if n != first])
    with pytest.raises(WeightsError, match=f"lacks 1 of the model's {len(names)} weights.*{first}"):
        export_causal_lm(abstract, tmp_path / "out", max_length=32, weights=source)
    assert not (tmp_path / "out").exists()


def test_source_with_a_wrong_shape_is_one_clear_error(tmp_path):
    abstract = nnx.eval_shape(lambda: Llama(CFG, rngs=nnx.Rngs(0)))
    names = weight_names(abstract)
    name = "embed.embedding.value" if "embed.embedding.value" in names else sorted(names)[0]
    source = tmp_path / "wrong.safetensors"
    write_safetensors(source, [(n, (1, *s.shape) if n == name else s.shape, np.float32,
                                lambda n=n, s=s: np.zeros((1, *s.shape) if n == name else s.shape, np.float32))
                               for n, s in names.items()])
    with pytest.raises(WeightsError, match=f"{name}.*write the model's shapes"):
        export_causal_lm(abstract, tmp_path / "out", max_length=32, weights=source)


def test_hugging_face_model_without_arrays_streams_its_weights(tmp_path):
    """transformers' _do_init=False builds no arrays; its weights come from the file."""
    transformers = pytest.importorskip("transformers", reason="transformers provides the Flax Llama")
    from jax2onnx_llm.frontends import decoder_spec
    from jax2onnx_llm.reference import greedy_generate

    config = transformers.LlamaConfig(num_hidden_layers=2, hidden_size=32, intermediate_size=64,
                                      num_attention_heads=4, num_key_value_heads=2, vocab_size=128,
                                      max_position_embeddings=128, eos_token_id=127, pad_token_id=0)
    model = transformers.FlaxLlamaForCausalLM(config, seed=0)
    model.params = jax.tree_util.tree_map(lambda w: w * 3.0 if w.ndim == 2 else w, model.params)  # varied tokens
    source = tmp_path / "llama.safetensors"
    save_safetensors(model, source)
    empty = transformers.FlaxLlamaForCausalLM(config, _do_init=False)
    with pytest.raises(WeightsError, match="no weight values.*pass weights="):
        export_causal_lm(empty, tmp_path / "no", max_length=48)
    folder = export_causal_lm(empty, tmp_path / "out", max_length=48, weights=source)
    spec = decoder_spec(model)
    assert_same_tokens(folder, lambda prompts: greedy_generate(spec, *_padded(prompts, 0), 32), 0, 127)


def _padded(prompts, pad=CFG.pad_token_id):
    from jax2onnx_llm.genai_run import left_pad

    return left_pad(prompts, pad)


# An 8-device run saves the Llama's nnx.state with its kernels sharded over a 2x4 mesh (replicated
# where a dimension does not divide), as a training job would.
SAVE_SHARDED_LLAMA = r"""
import os
import jax, numpy as np, orbax.checkpoint as ocp
from flax import nnx
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
from jax2onnx_examples.llama import Llama, LlamaConfig

assert len(jax.devices()) == 8
mesh = Mesh(np.array(jax.devices()).reshape(2, 4), ("a", "b"))
state = nnx.state(Llama(LlamaConfig(vocab_size=96, eos_token_id=95), rngs=nnx.Rngs(3)))

def place(x):
    axes = [name if d % size == 0 else None for d, (name, size) in zip(x.shape, (("a", 2), ("b", 4)))]
    return jax.device_put(x, NamedSharding(mesh, P(*axes)))

sharded = jax.tree_util.tree_map(place, state)
checkpointer = ocp.StandardCheckpointer()
checkpointer.save(os.environ["CKPT"], sharded)
checkpointer.wait_until_finished()
print(sum(len({str(s.index) for s in x.addressable_shards}) > 1 for x in jax.tree_util.tree_leaves(sharded)))
"""


def test_streamed_from_an_orbax_checkpoint_of_a_sharded_run(tmp_path):
    """weights=<Orbax folder>: read array by array (no full restore, no mesh: this process has one
    device); the prefill logits and the generated tokens are the restored model's."""
    import os
    import subprocess
    import sys

    import jax.numpy as jnp
    ocp = pytest.importorskip("orbax.checkpoint", reason="orbax-checkpoint writes the checkpoint")
    from jax2onnx_llm.frontends import decoder_spec
    from jax2onnx_llm.spec import KVCache, position_ids_from_mask

    ckpt = tmp_path / "ckpt"
    env = {**os.environ, "XLA_FLAGS": os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8", "JAX_PLATFORMS": "cpu",
           "CKPT": str(ckpt)}
    done = subprocess.run([sys.executable, "-c", SAVE_SHARDED_LLAMA], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    assert int(done.stdout.strip().splitlines()[-1]) >= 7 * CFG.num_layers, "the kernels were saved sharded"

    abstract = nnx.eval_shape(lambda: Llama(CFG, rngs=nnx.Rngs(0)))
    graphdef, abstract_state = nnx.split(abstract)
    # the reference: Orbax's own full restore (onto the host), merged into a model
    restored_state = ocp.PyTreeCheckpointer().restore(str(ckpt), args=ocp.args.PyTreeRestore(
        item=abstract_state,
        restore_args=jax.tree_util.tree_map(lambda _: ocp.RestoreArgs(restore_type=np.ndarray), abstract_state)))
    restored = nnx.merge(graphdef, jax.tree_util.tree_map(jnp.asarray, restored_state))

    folder = export_causal_lm(abstract, tmp_path / "out", max_length=48, weights=ckpt, external_data=True)
    check_folder(folder)
    proto = onnx.load(str(folder / "model.onnx"), load_external_data=False)
    external = _external_weights(proto)
    matrices = {name for name, leaf in weight_names(abstract).items() if len(leaf.shape) == 2}
    assert matrices <= external

    ids = np.array([[5, 6, 7, 8, 9, 10, 11]], np.int32)
    spec = decoder_spec(restored)
    mask = np.ones(ids.shape, np.int32)
    empty = [jnp.zeros((1, spec.num_kv_heads, 0, spec.head_size))] * spec.num_layers
    want, _ = spec.step(spec.params, jnp.asarray(ids), mask, position_ids_from_mask(jnp.asarray(mask), ids.shape[1]),
                        KVCache(empty, empty, jnp.asarray(mask), "concat"))
    np.testing.assert_allclose(prefill_logits(folder, ids), np.asarray(want), rtol=1e-4, atol=1e-4)
    assert_same_tokens(folder, lambda prompts: restored.generate(*_padded(prompts), 32), CFG.pad_token_id,
                       CFG.eos_token_id)


def test_orbax_checkpoint_of_another_model_is_refused_before_writing(tmp_path):
    ocp = pytest.importorskip("orbax.checkpoint", reason="orbax-checkpoint writes the checkpoint")
    other = Llama(LlamaConfig(vocab_size=128, eos_token_id=95), rngs=nnx.Rngs(0))  # another vocabulary
    checkpointer = ocp.StandardCheckpointer()
    checkpointer.save(tmp_path / "ckpt", nnx.state(other))
    checkpointer.wait_until_finished()
    abstract = nnx.eval_shape(lambda: Llama(CFG, rngs=nnx.Rngs(0)))
    with pytest.raises(WeightsError, match=r"'embed.embedding.value' is float32\[128, .*\] there but the model's is "
                                           r"float32\[96, .*2 weights differ.*lm_head"):
        export_causal_lm(abstract, tmp_path / "out", max_length=32, weights=tmp_path / "ckpt")
    assert not (tmp_path / "out").exists()
