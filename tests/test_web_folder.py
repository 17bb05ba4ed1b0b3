"""An encoder exported with ``to_onnx(..., target="web")`` written as a transformers.js folder
(``jax2onnx.targets.web.write_pipeline_folder``): a tiny random Hugging Face Flax BERT, its WordPiece
tokenizer built here, run by transformers.js' ``pipeline("feature-extraction", folder)`` in Node
(onnxruntime-node on CPU) and compared with the Flax model on the same ids."""

from __future__ import annotations

import json
import pathlib
import shutil
import subprocess

import jax
import jax.numpy as jnp
import numpy as np
import onnx
import pytest
from jax2onnx import to_onnx
from jax2onnx.errors import InputSpecError
from jax2onnx.targets.web.folder import REPORT_FILE, write_pipeline_folder

transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")

NODE_DIR = pathlib.Path(__file__).parent / "web"
RUNNER = NODE_DIR / "transformers_pipeline.mjs"
WORDS = ["the", "cat", "sat", "on", "mat", "dog", "ran", "far", "a", "red", "##s", "##ed"]
TEXTS = ["the cat sat on the mat", "a red dog ran far", "cats"]


def bert_tokenizer():
    """A WordPiece tokenizer as BERT's (lower-casing, [CLS] ... [SEP]) over a dozen words, no download."""
    from tokenizers import Tokenizer, normalizers, pre_tokenizers, processors
    from tokenizers.models import WordPiece

    vocab = {t: i for i, t in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS])}
    tok = Tokenizer(WordPiece(vocab, unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B [SEP]", special_tokens=[("[CLS]", 2), ("[SEP]", 3)])
    return transformers.BertTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]",
                                          cls_token="[CLS]", sep_token="[SEP]", mask_token="[MASK]")


@pytest.fixture(scope="module")
def bert():
    config = transformers.BertConfig(vocab_size=32, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                     intermediate_size=64, max_position_embeddings=64)
    model = transformers.FlaxBertModel(config, seed=0)

    def encode(input_ids, attention_mask, token_type_ids):
        return model(input_ids, attention_mask, token_type_ids).last_hidden_state

    ids = jax.ShapeDtypeStruct(jax.export.symbolic_shape("batch_size, sequence_length"), jnp.int32)
    proto = to_onnx(encode, [ids] * 3, input_names=["input_ids", "attention_mask", "token_type_ids"],
                    output_names=["last_hidden_state"], target="web")
    return config, encode, proto


def test_bert_feature_extraction_in_transformers_js(bert, tmp_path):
    if shutil.which("node") is None:
        pytest.skip("Node.js is not installed: transformers.js cannot run the folder")
    if not (NODE_DIR / "node_modules" / "@huggingface" / "transformers").is_dir():
        pytest.skip("@huggingface/transformers is not installed: npm ci --ignore-scripts --prefix tests/web")
    config, encode, proto = bert
    tokenizer = bert_tokenizer()
    folder = write_pipeline_folder(proto, tmp_path / "tiny-bert", model_type="bert", tokenizer=tokenizer,
                                   config=config.to_dict())
    model_file = folder / "onnx" / "model.onnx"
    onnx.checker.check_model(str(model_file), full_check=True)
    graph = onnx.load(str(model_file)).graph
    assert {i.name: i.type.tensor_type.elem_type for i in graph.input} == dict.fromkeys(
        ["input_ids", "attention_mask", "token_type_ids"], onnx.TensorProto.INT64)
    assert json.loads((folder / "config.json").read_text())["model_type"] == "bert"

    run = subprocess.run(["node", str(RUNNER), str(folder), "feature-extraction", json.dumps(TEXTS)],
                         cwd=NODE_DIR, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-3000:]
    result = json.loads(run.stdout.strip().splitlines()[-1])
    assert len(result["ids"]) == len(result["outputs"]) == len(TEXTS)
    for text, ids, features in zip(TEXTS, result["ids"], result["outputs"]):
        assert ids == tokenizer(text)["input_ids"], text  # transformers.js reads the tokenizer as transformers does
        row = jnp.asarray([ids], jnp.int32)
        want = np.asarray(encode(row, jnp.ones_like(row), jnp.zeros_like(row)))[0]
        np.testing.assert_allclose(np.asarray(features, np.float32), want, rtol=1e-4, atol=1e-4, err_msg=text)


ENCODER_FILE = """
import jax.numpy as jnp
import numpy as np

TABLE = np.linspace(-1.0, 1.0, 32 * 8, dtype=np.float32).reshape(32, 8)

def encode(input_ids, attention_mask):
    return jnp.tanh(jnp.asarray(TABLE)[input_ids] * attention_mask[..., None].astype(jnp.float32))
"""


def test_convert_cli_writes_the_folder(tmp_path, capsys):
    """``jax2onnx convert ... --target web --web-folder bert --tokenizer DIR``: the same folder from the command line
    (a graph without token_type_ids, which transformers.js then does not feed); its features are the function's."""
    import importlib.util

    from jax2onnx.cli import main

    (tmp_path / "enc.py").write_text(ENCODER_FILE)
    tokenizer = bert_tokenizer()
    tokenizer.save_pretrained(str(tmp_path / "tok"))
    out = tmp_path / "enc-web"
    argv = ["convert", f"{tmp_path / 'enc.py'}:encode", "-i", "batch_size,sequence_length:int32",
            "-i", "batch_size,sequence_length:int32", "--input-name", "input_ids", "--input-name", "attention_mask",
            "--output-name", "last_hidden_state", "--target", "web", "--web-folder", "bert", "--tokenizer",
            str(tmp_path / "tok"), "-o", str(out), "-q"]
    assert main(argv) == 0, capsys.readouterr().err
    assert f"wrote {out / 'onnx' / 'model.onnx'}" in capsys.readouterr().out
    assert {"config.json", "tokenizer.json", "tokenizer_config.json", REPORT_FILE} <= {p.name for p in out.iterdir()}
    onnx.checker.check_model(str(out / "onnx" / "model.onnx"), full_check=True)
    without_target = [a for a in argv if a not in ("--target", "web")]
    assert main([*without_target[:-3], "-o", str(tmp_path / "other"), "-q"]) == 2  # refused, nothing written
    assert "add --target web" in capsys.readouterr().err and not (tmp_path / "other").exists()
    as_vit = [*argv[:argv.index("--web-folder") + 1], "vit", *argv[argv.index("--web-folder") + 2:]]
    assert main(as_vit) == 2 and "add --preprocessor preprocessor_config.json" in capsys.readouterr().err

    if shutil.which("node") is None or not (NODE_DIR / "node_modules" / "@huggingface" / "transformers").is_dir():
        pytest.skip("Node.js or @huggingface/transformers is missing: the folder was checked, not run")
    run = subprocess.run(["node", str(RUNNER), str(out), "feature-extraction", json.dumps(TEXTS[:2])],
                         cwd=NODE_DIR, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-3000:]
    result = json.loads(run.stdout.strip().splitlines()[-1])
    spec = importlib.util.spec_from_file_location("enc", tmp_path / "enc.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert len(result["outputs"]) == 2
    for ids, features in zip(result["ids"], result["outputs"]):
        row = np.asarray([ids], np.int32)
        want = np.asarray(module.encode(row, np.ones_like(row)))[0]
        np.testing.assert_allclose(np.asarray(features, np.float32), want, rtol=1e-5, atol=1e-6)


def test_graph_under_other_names_is_refused(bert, tmp_path):
    _, _, proto = bert
    renamed = onnx.ModelProto()
    renamed.CopyFrom(proto)
    renamed.graph.output[0].name = "hidden"  # a dangling name is enough: the check reads only the names
    with pytest.raises(InputSpecError, match=r"last_hidden_state.*output_names"):
        write_pipeline_folder(renamed, tmp_path / "out", model_type="bert", tokenizer=bert_tokenizer())
    assert not (tmp_path / "out").exists()
    with pytest.raises(InputSpecError, match="pass tokenizer="):
        write_pipeline_folder(proto, tmp_path / "out", model_type="bert")
    with pytest.raises(InputSpecError, match="one of"):
        write_pipeline_folder(proto, tmp_path / "out", model_type="vit_mae", tokenizer=bert_tokenizer())


def test_folder_replaces_only_an_earlier_export(bert, tmp_path):
    _, _, proto = bert
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("keep")
    with pytest.raises(InputSpecError, match="not an earlier export"):
        write_pipeline_folder(proto, foreign, model_type="bert", tokenizer=bert_tokenizer())
    assert [p.name for p in foreign.iterdir()] == ["notes.txt"]
    out = write_pipeline_folder(proto, tmp_path / "bert", model_type="bert", tokenizer=bert_tokenizer())
    (out / "stale.txt").write_text("from before")
    write_pipeline_folder(proto, out, model_type="bert", tokenizer=bert_tokenizer())
    assert (out / REPORT_FILE).is_file() and not (out / "stale.txt").exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temp folder left


def test_vit_image_classification_in_transformers_js(tmp_path):
    """A tiny random Hugging Face Flax ViT classifier as ``model_type="vit"``: transformers.js'
    ``pipeline("image-classification", folder)`` on PNG files gives the softmax of the Flax model's logits
    on the pixels transformers' ``ViTImageProcessor`` makes of the same files."""
    if shutil.which("node") is None:
        pytest.skip("Node.js is not installed: transformers.js cannot run the folder")
    if not (NODE_DIR / "node_modules" / "@huggingface" / "transformers").is_dir():
        pytest.skip("@huggingface/transformers is not installed: npm ci --ignore-scripts --prefix tests/web")
    from PIL import Image

    config = transformers.ViTConfig(image_size=32, patch_size=8, num_channels=3, hidden_size=32, num_hidden_layers=2,
                                    num_attention_heads=4, intermediate_size=64, num_labels=5,
                                    initializer_range=0.5,  # logits that move with the pixels (0.02: all ~0.2)
                                    id2label={i: f"class_{i}" for i in range(5)},
                                    label2id={f"class_{i}": i for i in range(5)})
    model = transformers.FlaxViTForImageClassification(config, seed=0)

    def classify(pixel_values):
        return model(pixel_values).logits

    pixels = jax.ShapeDtypeStruct(jax.export.symbolic_shape("batch_size, 3, 32, 32"), jnp.float32)
    proto = to_onnx(classify, [pixels], input_names=["pixel_values"], output_names=["logits"], target="web")
    processor = transformers.ViTImageProcessor(size={"height": 32, "width": 32}, image_mean=[0.5, 0.4, 0.3],
                                               image_std=[0.2, 0.25, 0.3])
    with pytest.raises(InputSpecError, match="pass preprocessor="):
        write_pipeline_folder(proto, tmp_path / "vit", model_type="vit", config=config.to_dict())
    folder = write_pipeline_folder(proto, tmp_path / "vit", model_type="vit", config=config.to_dict(),
                                   preprocessor=processor)
    onnx.checker.check_model(str(folder / "onnx" / "model.onnx"), full_check=True)

    rng = np.random.default_rng(0)
    images = []
    for i in range(2):
        path = tmp_path / f"image_{i}.png"
        Image.fromarray(rng.integers(0, 256, size=(32, 32, 3), dtype=np.uint8)).save(path)
        images.append(str(path))
    run = subprocess.run(["node", str(RUNNER), str(folder), "image-classification", json.dumps(images)],
                         cwd=NODE_DIR, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-3000:]
    outputs = json.loads(run.stdout.strip().splitlines()[-1])["outputs"]
    assert len(outputs) == len(images)
    wants = []
    for path, labels in zip(images, outputs):
        pixel_values = processor(Image.open(path), return_tensors="np")["pixel_values"]
        want = np.asarray(jax.nn.softmax(classify(jnp.asarray(pixel_values)), axis=-1))[0]
        wants.append(want)
        got = {d["label"]: d["score"] for d in labels}
        assert sorted(got) == [f"class_{i}" for i in range(5)]
        np.testing.assert_allclose([got[f"class_{i}"] for i in range(5)], want, rtol=1e-4, atol=1e-5, err_msg=path)
    assert np.abs(wants[0] - wants[1]).max() > 0.005, f"the two images score alike, so the check is weak: {wants}"
