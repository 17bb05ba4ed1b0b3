"""``jax2onnx llm``: export a causal LM from the command line (a verb this pack adds to core's CLI
through the ``jax2onnx.cli`` entry-point group; nothing heavy is imported until it runs).

    jax2onnx llm my_pkg.models:make_model -o out/tiny --max-length 128 --cache shared
    jax2onnx llm my_pkg.models:make_model -o out/tiny --max-length 128 --generate 5,6,7 --new-tokens 16
"""

from __future__ import annotations

import argparse
from typing import Any


def register(sub: Any) -> None:
    p = sub.add_parser("llm", help="export a causal LM (Hugging Face Flax, KerasHub, NNX, DecoderSpec) as an "
                                   "onnxruntime-genai model folder")
    p.add_argument("factory", help="pkg.module:fn or path/to/file.py:fn, a zero-argument function returning the model "
                                   "(or the model object itself)")
    p.add_argument("--output", "-o", required=True, help="the model folder to write (replaced as a whole)")
    p.add_argument("--max-length", type=int, required=True, help="the most tokens a sequence may reach")
    p.add_argument("--cache", default="concat", choices=["concat", "shared"], help="KV-cache layout (default concat)")
    p.add_argument("--target", default="onnxruntime", choices=["onnxruntime", "onnx"],
                   help="onnxruntime: fused contrib ops; onnx: standard ONNX only")
    p.add_argument("--precision", default="float32", help="float32, or what jax2onnx.to_onnx's precision= takes")
    p.add_argument("--tokenizer", default=None, help="a folder holding tokenizer.json to copy into the model folder")
    p.add_argument("--eos-token-id", type=int, default=None, help="the end token, where the model names none")
    p.add_argument("--pad-token-id", type=int, default=None, help="the padding token, where the model names none")
    p.add_argument("--generate", default=None, metavar="IDS",
                   help="after exporting, generate greedily in onnxruntime-genai from these comma-separated token ids")
    p.add_argument("--new-tokens", type=int, default=16, help="how many tokens --generate adds (default 16)")
    p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help="show the full traceback on errors")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from jax2onnx.cli.commands import CliError, load_target

    from .export import export_causal_lm

    target = load_target(args.factory)
    model = target() if isinstance(target, type) or (callable(target) and not _is_model(target)) else target
    folder = export_causal_lm(model, args.output, max_length=args.max_length, cache=args.cache, target=args.target,
                              precision=args.precision, tokenizer=args.tokenizer, eos_token_id=args.eos_token_id,
                              pad_token_id=args.pad_token_id)
    print(f"wrote {folder}")
    if args.generate:
        from .genai_config import FILE
        from .genai_run import greedy

        try:
            prompt = [int(t) for t in args.generate.split(",") if t.strip()]
        except ValueError:
            raise CliError(f"--generate {args.generate!r}: give comma-separated token ids, e.g. 5,6,7") from None
        import json

        pad = json.loads((folder / FILE).read_text())["model"]["pad_token_id"]
        tokens = greedy(folder, [prompt], args.new_tokens, pad_token_id=pad)[0]
        print(" ".join(str(t) for t in tokens))
    return 0


def _is_model(obj: Any) -> bool:
    """A model object rather than a factory: models are callable too, so tell them by what they carry."""
    from .spec import DecoderSpec

    module = type(obj).__module__ or ""
    return (isinstance(obj, DecoderSpec) or hasattr(obj, "__jax2onnx_decoder__")
            or module.startswith(("transformers.", "keras_hub.")))
