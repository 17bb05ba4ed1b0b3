"""``jax2onnx llm``: export a causal LM from the command line (a verb this pack adds to core's CLI
through the ``jax2onnx.cli`` entry-point group; nothing heavy is imported until it runs).

    jax2onnx llm my_pkg.models:make_model -o out/tiny --max-length 128 --cache shared
    jax2onnx llm my_pkg.models:make_model -o out/tiny --max-length 128 --generate 5,6,7 --new-tokens 16
"""

from __future__ import annotations

import argparse
import os
from typing import Any


def _positive_int(text: str) -> int:
    """--max-length/--new-tokens: an int >= 1 (argparse makes the ArgumentTypeError a usage error)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}")
    return value


def register(sub: Any) -> None:
    from jax2onnx.frontend import PRECISION_KINDS as KINDS  # light: core's CLI has imported jax2onnx already

    p = sub.add_parser("llm", help="export a causal LM (Hugging Face Flax, KerasHub, NNX, DecoderSpec) as an "
                                   "onnxruntime-genai model folder")
    p.add_argument("factory", help="pkg.module:fn or path/to/file.py:fn, a zero-argument function returning the model "
                                   "(or the model object itself)")
    p.add_argument("--output", "-o", required=True, help="the model folder to write (replaced as a whole)")
    p.add_argument("--max-length", type=_positive_int, required=True, help="the most tokens a sequence may reach")
    p.add_argument("--cache", default="concat", choices=["concat", "shared"], help="KV-cache layout (default concat)")
    p.add_argument("--target", default="onnxruntime", choices=["onnxruntime", "onnx"],
                   help="onnxruntime: fused contrib ops; onnx: standard ONNX only")
    p.add_argument("--precision", default="float32", choices=KINDS,
                   help="weights and compute as jax2onnx.to_onnx's precision= (default float32)")
    p.add_argument("--tokenizer", default=None, help="a folder holding tokenizer.json to copy into the model folder")
    p.add_argument("--eos-token-id", type=int, default=None, help="the end token, where the model names none")
    p.add_argument("--pad-token-id", type=int, default=None, help="the padding token, where the model names none")
    p.add_argument("--generate", default=None, metavar="IDS",
                   help="after exporting, generate greedily in onnxruntime-genai from these comma-separated token ids")
    p.add_argument("--new-tokens", type=_positive_int, default=16, help="how many tokens --generate adds (default 16)")
    p.add_argument("--quiet", "-q", action="store_true",
                   help="no progress bar on stderr (shown on a terminal for an export of more than a few seconds)")
    p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help="show the full traceback on errors")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from jax2onnx.cli import CliError, check_writable, load_target

    from .attention_report import attention_fusions, describe
    from .export import export_causal_lm

    # everything the command line says is checked before the export, so a mistake writes nothing
    prompt = _prompt(args.generate, CliError) if args.generate is not None else None
    check_writable(args.output, folder=True)
    if args.tokenizer is not None and not os.path.isdir(args.tokenizer):
        raise CliError(f"--tokenizer {args.tokenizer}: no such folder; give the folder holding tokenizer.json")
    if prompt is not None:
        from .genai_run import require_genai

        require_genai()  # --generate needs onnxruntime-genai: said before minutes of exporting
    target = load_target(args.factory)
    model = target() if isinstance(target, type) or (callable(target) and not _is_model(target)) else target
    folder = export_causal_lm(model, args.output, max_length=args.max_length, cache=args.cache, target=args.target,
                              precision=args.precision, tokenizer=args.tokenizer, eos_token_id=args.eos_token_id,
                              pad_token_id=args.pad_token_id, progress=False if args.quiet else None)
    print(f"wrote {folder}")
    for line in describe(attention_fusions(folder)):
        print(f"  attention {line}")
    if prompt is not None:
        import json

        from .genai_config import FILE
        from .genai_run import greedy

        pad = json.loads((folder / FILE).read_text())["model"]["pad_token_id"]
        tokens = greedy(folder, [prompt], args.new_tokens, pad_token_id=pad)[0]
        print(" ".join(str(t) for t in tokens))
    return 0


def _prompt(text: str, error: type[Exception]) -> list[int]:
    """--generate's token ids: ``5,6,7``, each a whole number >= 0, none left out."""
    parts = [t.strip() for t in text.split(",")]
    if not all(t.isdigit() for t in parts):
        raise error(f"--generate {text!r}: give comma-separated token ids (whole numbers >= 0), e.g. 5,6,7")
    return [int(t) for t in parts]


def _is_model(obj: Any) -> bool:
    """A model object rather than a factory: models are callable too, so tell them by what they carry."""
    from .spec import DecoderSpec

    module = type(obj).__module__ or ""
    return (isinstance(obj, DecoderSpec) or hasattr(obj, "__jax2onnx_decoder__")
            or module.startswith(("transformers.", "keras_hub.")))
