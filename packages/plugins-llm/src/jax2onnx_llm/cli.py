"""``jax2onnx llm``: export a causal LM from the command line (a verb this pack adds to core's CLI
through the ``jax2onnx.cli`` entry-point group; nothing heavy is imported until it runs).

    jax2onnx llm my_pkg.models:make_model -o out/tiny --max-length 128 --cache shared
    jax2onnx llm my_pkg.models:make_model -o out/tiny --max-length 128 --generate 5,6,7 --new-tokens 16
    jax2onnx llm my_pkg.models:make_abstract -o out/big --max-length 2048 --weights big.safetensors --precision int4
    jax2onnx llm my_pkg.models:make_model -o out/web --max-length 128 --target web --precision float32,q4f16

Every keyword of ``export_causal_lm`` that takes a value has its option here (tests/test_cli.py
compares the two), and a value it refuses is a bad command line (exit status 2).
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


def _token_ids(text: str) -> int | list[int]:
    """--eos-token-id: one id, or several comma-separated (``2,32000``); each a whole number >= 0."""
    parts = [t.strip() for t in text.split(",")]
    if not all(t.isdigit() for t in parts):
        raise argparse.ArgumentTypeError(f"expected a token id (a whole number >= 0), or several comma-separated, got {text!r}")
    return int(parts[0]) if len(parts) == 1 else [int(t) for t in parts]


def _token_id(text: str) -> int:
    """--bos-token-id/--pad-token-id: one whole number >= 0."""
    if not text.strip().isdigit():
        raise argparse.ArgumentTypeError(f"expected a token id (a whole number >= 0), got {text!r}")
    return int(text)


def _precisions(kinds: list[str]) -> Any:
    """--precision: one kind, or several comma-separated for a browser folder (one file each)."""

    def parse(text: str) -> str | tuple[str, ...]:
        parts = [t.strip() for t in text.split(",")]
        wrong = [t for t in parts if t not in kinds]
        if wrong:
            raise argparse.ArgumentTypeError(f"invalid choice: {wrong[0]!r} (choose from {', '.join(kinds)}; "
                                             "several comma-separated for --target web)")
        return parts[0] if len(parts) == 1 else tuple(parts)

    return parse


def register(sub: Any) -> None:
    from jax2onnx.frontend import PRECISION_KINDS  # light: core's CLI has imported jax2onnx already

    from .genai_targets import genai_targets, web_targets

    p = sub.add_parser("llm", help="export a causal LM (Hugging Face Flax, KerasHub, NNX, DecoderSpec) as an "
                                   "onnxruntime-genai model folder, or with --target web the folder transformers.js loads")
    p.add_argument("factory", help="pkg.module:fn or path/to/file.py:fn, a zero-argument function returning the model "
                                   "(or the model object itself)")
    p.add_argument("--output", "-o", required=True, help="the model folder to write (replaced as a whole)")
    p.add_argument("--max-length", type=_positive_int, required=True, help="the most tokens a sequence may reach")
    p.add_argument("--cache", default="concat", choices=["concat", "shared"], help="KV-cache layout (default concat)")
    targets = [*genai_targets(), *web_targets()]
    p.add_argument("--target", default=None, choices=[t.name for t in targets],
                   help="; ".join(f"{t.name}: {t.summary}" for t in targets)
                   + " (default: the one running onnxruntime-genai's fused attention; web: a transformers.js folder)")
    p.add_argument("--precision", default="float32", type=_precisions([*PRECISION_KINDS, "q4f16"]),
                   help="weights and compute as jax2onnx.to_onnx's precision= (default float32); for --target web "
                        "also q4f16, and several comma-separated (float32,int4), one file each")
    p.add_argument("--tokenizer", default=None,
                   help="a folder holding tokenizer.json (or that file) to copy into the model folder")
    p.add_argument("--bos-token-id", type=_token_id, default=None, help="the start token, where the model names none")
    p.add_argument("--eos-token-id", type=_token_ids, default=None,
                   help="the end token, where the model names none (several: comma-separated)")
    p.add_argument("--pad-token-id", type=_token_id, default=None, help="the padding token, where the model names none")
    p.add_argument("--weights", default=None, metavar="PATH",
                   help="read the weights from a .safetensors file or an Orbax checkpoint folder while writing, one at "
                        "a time (the factory then only gives their structure, e.g. built under nnx.eval_shape)")
    p.add_argument("--params", default=None, metavar="pkg.module:fn",
                   help="for a model that holds no weights itself (the gemma library's Linen transformers): a "
                        "zero-argument function returning its parameters (e.g. loading a checkpoint), as the factory")
    p.add_argument("--opset", type=int, default=23, help="the default-domain opset (default 23)")
    p.add_argument("--external-data", action=argparse.BooleanOptionalAction, default=None,
                   help="weights in model.onnx.data beside the model (default: when they exceed 2 GB)")
    p.add_argument("--search", action="append", default=None, metavar="NAME=VALUE",
                   help="a genai_config.json search option to set, e.g. --search do_sample=true --search top_k=40")
    p.add_argument("--generate", default=None, metavar="IDS",
                   help="after exporting, generate greedily in onnxruntime-genai from these comma-separated token ids")
    p.add_argument("--new-tokens", type=_positive_int, default=16, help="how many tokens --generate adds (default 16)")
    shown = p.add_mutually_exclusive_group()
    shown.add_argument("--quiet", "-q", dest="progress", action="store_const", const=False, default=None,
                       help="no progress on stderr (by default a bar on a terminal for an export of more than a few seconds)")
    shown.add_argument("--progress", dest="progress", action="store_const", const=True,
                       help="progress on stderr from the start: a bar on a terminal, plain lines otherwise (a log)")
    p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help="show the full traceback on errors")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from jax2onnx import InputSpecError
    from jax2onnx.cli import CliError, check_writable, load_target
    from jax2onnx.frontend import check_opset

    from .attention_report import attention_fusions, describe
    from .errors import CacheLayoutError, MaxLengthError, TokenizerError
    from .export import export_causal_lm
    from .genai_config import SEARCH_FIELDS, check_search
    from .genai_targets import web_targets

    # everything the command line says is checked before the export, so a mistake writes nothing
    prompt = _prompt(args.generate, CliError) if args.generate is not None else None
    check_writable(args.output, folder=True)
    if args.tokenizer is not None and not os.path.exists(args.tokenizer):
        raise CliError(f"--tokenizer {args.tokenizer}: no such folder; give the folder holding tokenizer.json")
    if args.weights is not None and not os.path.exists(args.weights):
        raise CliError(f"--weights {args.weights}: no such file or folder; give a .safetensors file or an Orbax "
                       "checkpoint folder")
    search = _search(args.search, CliError, SEARCH_FIELDS) if args.search is not None else None
    try:
        check_opset(args.opset)
    except InputSpecError as exc:
        raise CliError(f"--opset {args.opset}: {exc}") from None
    try:
        check_search(search, max_length=args.max_length)
    except InputSpecError as exc:
        raise CliError(f"--search: {exc}") from None
    web = args.target is not None and any(t.name == args.target for t in web_targets())
    if isinstance(args.precision, tuple) and not web:
        raise CliError(f"--precision {','.join(args.precision)}: several precisions (a file each) are for --target web; "
                       "give one")
    if prompt is not None and web:
        raise CliError("--generate runs the folder in onnxruntime-genai; a --target web folder is run by "
                       "transformers.js: drop --generate")
    if prompt is not None:
        from .genai_run import require_genai

        require_genai()  # --generate needs onnxruntime-genai: said before minutes of exporting
    target = load_target(args.factory)
    model = target() if isinstance(target, type) or (callable(target) and not _is_model(target)) else target
    params = None
    if args.params is not None:
        source = load_target(args.params)
        params = source() if callable(source) else source
    try:
        folder = export_causal_lm(
            model, args.output, max_length=args.max_length, precision=args.precision, cache=args.cache,
            target=args.target, tokenizer=args.tokenizer, opset=args.opset, external_data=args.external_data,
            search=search, bos_token_id=args.bos_token_id, eos_token_id=args.eos_token_id,
            pad_token_id=args.pad_token_id, weights=args.weights, params=params, progress=args.progress)
    except (InputSpecError, MaxLengthError, CacheLayoutError, TokenizerError) as exc:
        # a value the export refuses (out of the model's vocabulary or positions, a layout it cannot
        # run, weights or a tokenizer that do not fit it) is a bad command line, not a failed conversion
        raise CliError(str(exc)) from exc
    print(f"wrote {folder}")
    for line in [] if web else describe(attention_fusions(folder)):
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


def _search(items: list[str], error: type[Exception], fields: dict[str, type]) -> dict[str, Any]:
    """--search's ``NAME=VALUE`` items, each value read as its field's type (true/false, a whole
    number, a number)."""
    search: dict[str, Any] = {}
    for item in items:
        name, eq, text = (part.strip() for part in item.partition("="))
        if not eq or name not in fields:
            raise error(f"--search {item!r}: give NAME=VALUE with NAME one of {', '.join(sorted(fields))}")
        kind = fields[name]
        try:
            if kind is bool:
                if text.lower() not in ("true", "false"):
                    raise ValueError(text)
                search[name] = text.lower() == "true"
            else:
                search[name] = kind(text)
        except ValueError:
            want = "true or false" if kind is bool else "a whole number" if kind is int else "a number"
            raise error(f"--search {item!r}: {name} takes {want}") from None
    return search


def _is_model(obj: Any) -> bool:
    """A model object rather than a factory: models are callable too, so a model is what a registered
    front-end claims."""
    from .frontends.registry import claiming

    return claiming(obj) is not None
