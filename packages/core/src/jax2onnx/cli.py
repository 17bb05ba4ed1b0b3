"""The ``jax2onnx`` command line.

    jax2onnx convert my_pkg.models:make_model --input B,30 -o model.onnx --verify
    jax2onnx packs
    jax2onnx quickstart          (needs jax2onnx-examples)
    jax2onnx coverage --results R --output docs/coverage.md
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from typing import Any


def _parse_shape(text: str) -> tuple[Any, ...]:
    dims: list[Any] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        dims.append(int(part) if part.lstrip("-").isdigit() else part)
    return tuple(dims)


def _load_callable(ref: str, call_factory: bool) -> Any:
    module_name, _, attr = ref.partition(":")
    if not attr:
        raise SystemExit(f"jax2onnx: expected MODULE:CALLABLE, got {ref!r}")
    obj: Any = importlib.import_module(module_name)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj() if call_factory else obj


def _cmd_convert(args: argparse.Namespace) -> int:
    import numpy as np

    from . import allclose, to_onnx

    fn = _load_callable(args.callable, args.factory)
    inputs = [_parse_shape(s) for s in args.input]
    params = {}
    for item in args.param:
        name, _, value = item.partition("=")
        params[name] = {"true": True, "false": False}.get(value.lower(), None)
        if params[name] is None:
            params[name] = float(value) if "." in value else int(value)
    model = to_onnx(fn, inputs, input_params=params or None, opset=args.opset,
                    enable_double_precision=args.double, output_path=args.output)
    print(f"wrote {args.output} ({len(model.graph.node)} nodes)")
    if args.verify:
        rng = np.random.default_rng(0)
        dtype = np.float64 if args.double else np.float32
        concrete = [rng.standard_normal([d if isinstance(d, int) else 3 for d in s]).astype(dtype) for s in inputs]
        result = allclose(fn, model, concrete, params or None)
        print(f"verification: {result}")
        return 0 if result else 1
    return 0


def _cmd_packs(args: argparse.Namespace) -> int:
    from .registry import get_registry

    for info in get_registry().describe():
        status = f"FAILED: {info.error}" if info.error else f"{len(info.lowered)} lowerings"
        print(f"{info.name} {info.version} ({info.module}): {status}")
        if args.verbose and info.lowered:
            print("    " + ", ".join(info.lowered))
    return 0


def _cmd_quickstart(args: argparse.Namespace) -> int:
    try:
        quickstart = importlib.import_module("jax2onnx_examples.quickstart")
    except ImportError as exc:
        raise SystemExit(f"jax2onnx quickstart needs the examples pack: pip install jax2onnx-examples ({exc})") from exc
    return int(quickstart.main(args.output))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="jax2onnx", description="Convert JAX functions and Flax NNX models to ONNX.")
    sub = parser.add_subparsers(dest="command", required=True)

    conv = sub.add_parser("convert", help="convert MODULE:CALLABLE to ONNX")
    conv.add_argument("callable", help="MODULE:CALLABLE (a function, module instance, or with --factory a zero-arg builder)")
    conv.add_argument("--input", "-i", action="append", required=True, help="one input shape, e.g. B,30 (repeat per input)")
    conv.add_argument("--param", "-p", action="append", default=[], help="runtime input param NAME=DEFAULT")
    conv.add_argument("--output", "-o", required=True)
    conv.add_argument("--opset", type=int, default=23)
    conv.add_argument("--double", action="store_true", help="enable_double_precision")
    conv.add_argument("--factory", action="store_true", help="call CALLABLE() to build the model first")
    conv.add_argument("--verify", action="store_true", help="compare with JAX in onnxruntime on random inputs")
    conv.set_defaults(func=_cmd_convert)

    packs = sub.add_parser("packs", help="list installed plugin packs and what they lower")
    packs.add_argument("--verbose", "-v", action="store_true")
    packs.set_defaults(func=_cmd_packs)

    quick = sub.add_parser("quickstart", help="convert and verify the quickstart MLP (needs jax2onnx-examples)")
    quick.add_argument("--output", "-o", default="quickstart_mlp.onnx")
    quick.set_defaults(func=_cmd_quickstart)

    try:
        from .coverage import add_coverage_subcommand
    except ImportError:
        pass
    else:
        add_coverage_subcommand(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
