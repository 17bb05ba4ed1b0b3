"""The ``jax2onnx`` command line.

    jax2onnx convert my_pkg.models:make_model --factory -i B,30 -o model.onnx --verify
    jax2onnx convert path/to/model.py:fn -i B,T:int32 -o model.onnx
    jax2onnx packs
    jax2onnx check --target tensorrt model.onnx
    jax2onnx quickstart          (the demo of that name, from the examples pack)
    jax2onnx demo [NAME]         (the ready-made models the installed packs offer)
    jax2onnx coverage --results R --output docs/coverage.md
    jax2onnx --version

Errors print one line on stderr, the parser's too (``--debug`` shows the traceback), and write
nothing. Exit codes: see :data:`EXIT_CODES`.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.metadata as metadata
import importlib.util
import json
import os
import re
import sys
import time
import warnings
from collections.abc import Iterator, Sequence
from typing import Any

from .._version import __version__
from ..errors import InputSpecError, Jax2OnnxError, MissingDependencyError, require_onnxruntime
from ..export.conversion import to_onnx
from ..export.options import ExportOptions, check_opset
from ..lower import pack_catalog
from ..lower.registry import get_registry
from ..precision.options import KINDS as PRECISION_KINDS
from ..targets import find_target, get_target, target_names
from ..targets.web.folder import ARCHITECTURES as WEB_ARCHITECTURES
from ..targets.web.folder import ONNX_FOLDER, write_pipeline_folder
from ..verification.report import summarize, verify
from .usage import CliError, check_writable

#: What each exit status means (also in ``jax2onnx --help``).
EXIT_CODES = {
    0: "success (and, with --verify, the model matches JAX; check: nothing the target cannot take)",
    1: "--verify ran and the model does not match JAX within tolerance; check found what the target cannot take; packs found a broken install",
    2: "bad command line: unknown option, malformed input spec, unsupported --opset, target not found, a model builder without --factory, a missing or unreadable input file, an output path that cannot be written, a value the model cannot take (a verb's option)",
    3: "the conversion failed (unsupported primitive, an error in the function or its module, inputs that do not fit it)",
    4: "a package the command needs is not installed (onnxruntime for --verify, a pack)",
    5: "an unexpected internal error (a bug: rerun with --debug and report the traceback)",
}


# ---------------------------------------------------------------------------------------------
# Input specs: "B,30", "B,T:int32", ":float32" (a scalar), "3" (a vector)

_DIM = re.compile(r"^[A-Za-z_0-9+\-*/() ]+$")


def parse_input_spec(text: str) -> Any:
    """``B,T:int32`` → ``jax.ShapeDtypeStruct(("B", "T"), int32)``; without ``:dtype`` a shape tuple
    (float32, or float64 under --double). Dims are ints, symbols (``B``) or expressions (``2*B``)."""
    shape_text, sep, dtype_text = text.rpartition(":") if ":" in text else (text, "", "")
    bare = shape_text.strip()
    if bare[:1] in "([" and bare[-1:] in ")]" and bare:
        raise CliError(f"input spec {text!r}: write the dims without brackets, separated by commas: -i {bare[1:-1].replace(' ', '')}{sep}{dtype_text}")
    dims: list[Any] = []
    for index, part in enumerate(shape_text.split(",") if bare else []):  # "" (":float32"): a scalar
        part = part.strip()
        if not part:  # "B,,4" or ",B,4": a dim left out, not a shape to guess
            raise CliError(f"input spec {text!r}: dim {index} is empty; write one size, symbol or expression "
                           "between each pair of commas, e.g. -i B,4")
        if part.lstrip("-").isdigit():
            if int(part) < 0:
                raise CliError(f"input spec {text!r}: dim {index} is {part}; sizes are >= 0 "
                               "(a symbol such as B makes a dim dynamic)")
            dims.append(int(part))
        elif _DIM.match(part) and _is_dim_expression(part):
            dims.append(part)
        else:
            raise CliError(f"input spec {text!r}: cannot read the dim {part!r}{_dim_hint(part)}; "
                           "dims are sizes (30), symbols (B) or expressions (2*B), separated by commas")
    if not sep:
        return tuple(dims)
    dtype = _parse_dtype(dtype_text.strip(), text)
    import jax

    return jax.ShapeDtypeStruct(tuple(dims), dtype)


def _is_dim_expression(part: str) -> bool:
    """Whether JAX's symbolic-shape parser reads ``part`` as one dim (checked here, so a typo is a
    bad command line, exit 2, and not a conversion failure with the parser's own wording)."""
    import jax

    try:
        return len(jax.export.symbolic_shape(part)) == 1
    except Exception:  # noqa: BLE001 - any parser refusal (ValueError, tokenize.TokenError) means: not a dim
        return False


def _dim_hint(part: str) -> str:
    if re.fullmatch(r"\d+(\s*[xX×]\s*\d+)+", part):
        return f" (for a {part} shape write {re.sub(r'[xX×]', ',', part.replace(' ', ''))})"
    return ""


def _parse_dtype(name: str, spec: str) -> Any:
    import jax.numpy as jnp
    import numpy as np

    try:
        return np.dtype(getattr(jnp, name)) if hasattr(jnp, name) else np.dtype(name)
    except TypeError:
        raise CliError(
            f"input spec {spec!r}: unknown dtype {name!r}; use a numpy/JAX dtype name such as float32, int32, bool, bfloat16"
        ) from None


def _tolerance(text: str) -> float:
    """--rtol/--atol: a number >= 0 (argparse turns the ArgumentTypeError into a usage error)."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0:  # also refuses nan
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {text!r}")
    return value


def _parse_param(item: str) -> tuple[str, Any]:
    name, eq, value = item.partition("=")
    if not eq or not name.isidentifier():
        raise CliError(f"--param {item!r}: expected NAME=VALUE, e.g. --param deterministic=true")
    low = value.strip().lower()
    if low in ("true", "false"):
        return name, low == "true"
    try:
        return name, int(value)
    except ValueError:
        pass
    try:
        return name, float(value)
    except ValueError:
        raise CliError(f"--param {item!r}: the value must be true/false, an int or a float") from None


# ---------------------------------------------------------------------------------------------
# Targets: "pkg.mod:attr", "file.py:attr", "mymodel:fn" from the current folder


def load_target(ref: str) -> Any:
    """The object ``ref`` names: ``module:attr.path`` (the current folder is importable, as with
    ``python -m``) or ``path/to/file.py:attr`` (the file's folder is importable for its own imports)."""
    module_ref, sep, attr = ref.rpartition(":")
    if not sep or not module_ref or not attr:
        raise CliError(f"expected MODULE:CALLABLE or path/to/file.py:CALLABLE, got {ref!r}")
    if module_ref.endswith(".py") or os.sep in module_ref or "/" in module_ref:
        module = _import_file(module_ref)
    else:
        if "" not in sys.path and os.getcwd() not in sys.path:
            sys.path.insert(0, os.getcwd())
        try:
            module = importlib.import_module(module_ref)
        except ModuleNotFoundError as exc:
            if exc.name and module_ref.startswith(exc.name):
                raise CliError(
                    f"cannot import {module_ref!r} (looked in the current folder {os.getcwd()} and the installed "
                    f"packages); for a file elsewhere give its path: jax2onnx convert path/to/{module_ref.replace('.', '/')}.py:{attr}"
                ) from exc
            raise _import_failed(module_ref, exc) from exc
        except Exception as exc:
            raise _import_failed(module_ref, exc) from exc
    obj: Any = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            names = sorted(n for n in dir(obj) if not n.startswith("_"))
            raise CliError(f"{module_ref!r} has no attribute {attr!r} (its names: {', '.join(names[:20])})") from None
    return obj


def _import_file(path: str) -> Any:
    path = os.path.abspath(path)
    if not os.path.isfile(path):
        raise CliError(f"{path}: a folder, not a file; give the .py file that defines the callable"
                       if os.path.isdir(path) else f"no such file: {path}")
    folder = os.path.dirname(path)
    if folder not in sys.path:
        sys.path.insert(0, folder)  # the file's own imports of its neighbours work as with `python file.py`
    name = os.path.splitext(os.path.basename(path))[0]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise CliError(f"cannot import {path} as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses, pickling and flax look modules up by name
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        sys.modules.pop(name, None)
        raise _import_failed(path, exc) from exc
    return module


def _import_failed(what: str, exc: BaseException) -> CliError:
    """The user's module raised while being imported: their error, with their line."""
    import traceback

    frames = [f for f in traceback.extract_tb(exc.__traceback__) if "importlib" not in f.filename]
    where = f" ({frames[-1].filename}:{frames[-1].lineno})" if frames else ""
    return CliError(f"importing {what} raised {type(exc).__name__}: {exc}{where}", code=3)


# ---------------------------------------------------------------------------------------------
# Progress


class _Progress:
    """Stage lines on stderr (``converting … done in 1.2 s``), silent with --quiet."""

    def __init__(self, quiet: bool):
        self.quiet = quiet

    @contextlib.contextmanager
    def stage(self, what: str) -> Iterator[None]:
        start = time.perf_counter()
        if not self.quiet:
            print(f"jax2onnx: {what} ...", file=sys.stderr, flush=True)
        yield
        if not self.quiet:
            print(f"jax2onnx: {what}: done in {time.perf_counter() - start:.1f} s", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------
# Commands


def _cmd_convert(args: argparse.Namespace) -> int:
    progress = _Progress(args.quiet)

    try:
        check_opset(args.opset)  # a bad --opset is a bad command line, said before importing anything
    except InputSpecError as exc:
        raise CliError(f"--opset {args.opset}: {exc}") from None
    named = find_target(args.target)  # an unknown name is the export's to refuse, naming the choices
    if named is not None and named.one_file and args.external_data:
        raise CliError(f"--target {args.target} writes one self-contained file: drop --external-data")
    inputs = [parse_input_spec(s) for s in args.input]
    params = dict(_parse_param(p) for p in args.param)
    if args.input_name and len(args.input_name) != len(inputs):
        raise CliError(f"{len(args.input_name)} --input-name for {len(inputs)} --input: give one name per --input, in order")
    if args.report and not args.verify:
        # the report is the verification's; written without it, it would look like a check that passed
        raise CliError(f"--report {args.report}: the report is what --verify finds; add --verify")
    folder = _check_web_folder(args)
    output = args.output or args.callable.rpartition(':')[2].split('.')[-1] + ("" if folder else ".onnx")
    check_writable(output, folder=folder)
    if args.report:  # said now, not after minutes of converting and verifying
        check_writable(args.report, flag="--report")
    options: dict[str, Any] = dict(
        input_params=params or None, model_name=args.model_name or "jax_model", opset=args.opset,
        enable_double_precision=args.double, output_path=None if folder else output, input_names=args.input_name or None,
        output_names=args.output_name or None, external_data=True if args.external_data else None,
        precision=args.precision, **({"target": args.target} if args.target is not None else {}),
        progress=False if args.quiet else None,  # the bar on a terminal, for a long conversion
    )
    try:  # what to_onnx checks before tracing (a target's name, its opsets, ...), before importing the model
        ExportOptions.check(inputs=inputs, **options)
    except InputSpecError as exc:
        raise CliError(str(exc)) from None
    if args.verify:

        require_onnxruntime("--verify")  # before the conversion, not after minutes of it
    with progress.stage(f"importing {args.callable}"):
        fn = load_target(args.callable)
        if args.factory:
            fn = fn()
        else:
            _check_not_a_factory(fn, args.callable, len(inputs))

    with progress.stage("converting (trace, lower, optimize, write)"):
        model = to_onnx(fn, inputs, **options)
        if folder:
            written = write_pipeline_folder(model, output, model_type=args.web_folder, tokenizer=args.tokenizer,
                                            preprocessor=args.preprocessor)
            output = str(written / ONNX_FOLDER / "model.onnx")

    summary = summarize(output)
    ops = ", ".join(f"{op} {n}" for op, n in list(summary.op_histogram.items())[:8])
    print(f"wrote {os.path.abspath(output)}: {summary.node_count} nodes ({ops}), "
          f"inputs {'; '.join(map(str, summary.inputs))}, outputs {'; '.join(map(str, summary.outputs))}")
    if not args.verify:
        return 0

    with progress.stage("verifying against JAX in onnxruntime"):
        report = verify(fn, output, inputs, params or None, rtol=args.rtol, atol=args.atol,
                        enable_double_precision=args.double, reference=args.reference)
    report.print()
    if args.report:
        os.makedirs(os.path.dirname(os.path.abspath(args.report)), exist_ok=True)  # as -o's missing folders are made
        with open(args.report, "w", encoding="utf-8") as f:
            if args.report.endswith(".md"):
                f.write(report.to_markdown())
            else:
                json.dump(report.to_dict(), f, indent=2)
    return 0 if report else 1


def _check_web_folder(args: argparse.Namespace) -> bool:
    """--web-folder's companions, checked before converting: the web target, a tokenizer that exists,
    no --verify (the folder's graph reads int64 ids where the function takes int32)."""
    if args.web_folder is None:
        for flag, value in (("--tokenizer", args.tokenizer), ("--preprocessor", args.preprocessor)):
            if value is not None:
                raise CliError(f"{flag} goes with --web-folder (the transformers.js folder it is copied into)")
        return False
    named = find_target(args.target)
    if named is None or not named.can("transformers.js"):
        raise CliError(f"--web-folder {args.web_folder}: the folder is for transformers.js; add --target web")
    if args.verify:
        raise CliError("--web-folder: --verify compares the single .onnx file; run it without --web-folder to verify")
    if args.tokenizer is not None and not os.path.exists(args.tokenizer):
        raise CliError(f"--tokenizer {args.tokenizer}: no such file or folder; give a tokenizer.json or its folder")
    arch = WEB_ARCHITECTURES[args.web_folder]
    if arch.needs_tokenizer and args.tokenizer is None:
        raise CliError(f"--web-folder {args.web_folder}: its pipeline encodes text; add --tokenizer tokenizer.json")
    if arch.needs_preprocessor != (args.preprocessor is not None):
        raise CliError(f"--web-folder {args.web_folder}: " + ("its pipeline reads images; add --preprocessor "
                       "preprocessor_config.json" if arch.needs_preprocessor else "it reads no image; drop --preprocessor"))
    if args.preprocessor is not None:
        try:
            with open(args.preprocessor, encoding="utf-8") as f:
                args.preprocessor = json.load(f)
        except (OSError, ValueError) as exc:
            raise CliError(f"--preprocessor {args.preprocessor}: not a readable JSON file ({exc})") from None
    return True


def _check_not_a_factory(fn: Any, ref: str, n_inputs: int) -> None:
    """A class, or a function taking none of the given inputs, is most likely a model builder:
    say --factory instead of letting the arity check count parameters."""
    import inspect

    name = ref.rpartition(":")[2]
    if isinstance(fn, type):
        raise CliError(f"{name} is a class: add --factory to convert {name}() (an instance), or name a model instance")
    if inspect.isfunction(fn) and n_inputs:
        params = inspect.signature(fn).parameters.values()
        if not any(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL) for p in params):
            raise CliError(f"{name}() takes no arguments but {n_inputs} --input spec(s) were given: "
                           f"if {name}() builds the model, add --factory")


def _cmd_packs(args: argparse.Namespace) -> int:
    """List packs; a broken install (a pack that does not load, a required or commonly needed pack
    missing, versions that do not fit, two packs claiming one primitive) is one ``problem:`` line
    each and exit 1, never a crash."""

    problems: list[str] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        registry = get_registry()  # loading the packs warns about a broken one: caught, reported below
        try:
            infos = registry.describe()
        except Jax2OnnxError as exc:  # e.g. two packs claiming one primitive at the same priority
            problems.append(str(exc))
            infos = list(registry.packs)
    problems += pack_catalog.problems(infos)
    # A pack that failed to load is reported above with its fix; other warnings (a misspelled hook) here.
    problems += [str(w.message) for w in caught if not any(i.error and f"'{i.name}'" in str(w.message) for i in infos)]
    # A registry that records conflicts instead of raising (only conversions using the contested
    # primitive fail) exposes them as ``conflicts``: name -> message (or the competing lowerings).
    conflicts = getattr(registry, "conflicts", None) or {}
    for name, detail in (conflicts.items() if isinstance(conflicts, dict) else enumerate(conflicts)):
        problems.append(str(detail) if isinstance(detail, (str, Exception)) else f"'{name}' is claimed by {detail}")
    for info in infos:
        status = f"FAILED: {info.error}" if info.error else f"{len(info.lowered)} lowerings"
        print(f"{info.name} {info.version} ({info.module}): {status}")
        if args.verbose and info.lowered:
            print("    " + ", ".join(info.lowered))
    for pack in pack_catalog.not_installed():
        if not any(pack.distribution in p for p in problems):
            print(f"not installed: {pack.distribution} ({pack.what}): pip install {pack.distribution}")
    for p in dict.fromkeys(problems):
        print(f"problem: {p}")
    return 1 if problems else 0


def _cmd_demo(args: argparse.Namespace) -> int:
    """Run a ready-made model a pack offers (its ``jax2onnx_demos`` hook), or list them; core names
    no pack: ``quickstart`` is the demo of that name, from whichever pack offers it."""

    demos = {demo.name: (pack, demo) for pack, demo in get_registry().demos()}
    name = getattr(args, "name", None) or getattr(args, "demo_name", None)
    if name is None:
        for demo_name, (pack, demo) in sorted(demos.items()):
            print(f"{demo_name} ({pack}): {demo.help}")
        if not demos:
            print("no installed plugin pack offers a demo (the examples pack does)")
        return 0
    if name not in demos:
        offered = ", ".join(sorted(demos)) or "none"
        raise CliError(f"no installed plugin pack offers the demo '{name}' (offered: {offered}); install the "
                       "pack that does (the examples pack offers 'quickstart')", code=4)
    if args.output is not None:
        check_writable(args.output)
    return demos[name][1].run(args.output)


def _version_text() -> str:

    parts = []
    for dist in ("jax", "flax", "onnx", "onnxruntime", "onnxruntime-gpu"):
        try:
            parts.append(f"{dist} {metadata.version(dist)}")
        except metadata.PackageNotFoundError:
            if dist == "onnxruntime":
                parts.append("onnxruntime not installed")
    packs = ", ".join(f"{name} {version}" for name, version in pack_catalog.installed_packs()) or "none installed"
    return f"jax2onnx-core {__version__} ({', '.join(parts)})\npacks: {packs}"


def _cmd_check(args: argparse.Namespace) -> int:
    """One line per node or setting the target cannot take; exit 1 when there is any."""
    import onnx


    if not os.path.isfile(args.model):
        raise CliError(f"{args.model}: {'a folder, not a file' if os.path.isdir(args.model) else 'no such file'}; "
                       "give the .onnx file to check")
    try:
        model = onnx.load(args.model, load_external_data=False)
    except Exception as exc:  # noqa: BLE001 - protobuf's DecodeError and kin: the file is not an ONNX model
        raise CliError(f"{args.model}: not an ONNX model (onnx cannot read it: {type(exc).__name__}); "
                       "give the .onnx file an export wrote") from None
    if not model.HasField("graph") or not model.opset_import:  # protobuf reads many files as an empty message
        raise CliError(f"{args.model}: not an ONNX model (no graph or no opset); give the .onnx file an export wrote")
    import onnx_ir as ir

    target = get_target(args.target)
    loaded = ir.serde.deserialize_model(model)
    findings = target.findings(loaded)
    for finding in findings:
        print(f"{args.model}: {finding}")
    for note in target.notes(loaded):
        print(f"{args.model}: note: {note}")
    if not findings:
        print(f"{args.model}: nothing that target={target.name!r} ({target.summary}) cannot take")
    return 1 if findings else 0


class _Parser(argparse.ArgumentParser):
    """argparse's parser with its errors as one line (the usage is what ``--help`` is for), so that
    every error of the CLI, the parser's too, is one line on stderr. Subparsers (a pack's verb too)
    are made of the parser's own class."""

    def error(self, message: str) -> Any:  # noqa: D102 - argparse's hook
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    codes = "\n".join(f"  {k}  {v}" for k, v in EXIT_CODES.items())
    parser = _Parser(
        prog="jax2onnx",
        description="Convert JAX functions and Flax NNX models to ONNX.",
        epilog=f"exit codes:\n{codes}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=_version_text())
    parser.add_argument("--debug", action="store_true", help="show the full traceback on errors")
    sub = parser.add_subparsers(dest="command", required=True)

    conv = sub.add_parser("convert", help="convert MODULE:CALLABLE (or FILE.py:CALLABLE) to ONNX")
    conv.add_argument("callable", help="pkg.module:fn, module:fn (current folder), or path/to/file.py:fn; "
                                       "a function, a model instance, or with --factory a zero-argument builder")
    conv.add_argument("--input", "-i", action="append", required=True,
                      help="one input: a shape with optional dtype, e.g. B,30 or B,T:int32 or :float32 (scalar); repeat per input")
    conv.add_argument("--param", "-p", action="append", default=[], help="runtime input param NAME=DEFAULT (true/false, int, float)")
    conv.add_argument("--output", "-o", help="the .onnx file (default: CALLABLE.onnx), with --web-folder the folder")
    conv.add_argument("--input-name", action="append", default=[], help="graph input name, one per --input, in order")
    conv.add_argument("--output-name", action="append", default=[], help="graph output name, one per output, in order")
    conv.add_argument("--model-name", help="the ONNX graph name (default: jax_model)")
    conv.add_argument("--opset", type=int, default=23, help="the ONNX opset to export (see docs/opsets.md)")
    conv.add_argument("--double", action="store_true", help="enable_double_precision: float64 end to end")
    conv.add_argument("--external-data", action="store_true", help="weights in OUTPUT.data beside the model")
    conv.add_argument("--precision", default="float32", choices=PRECISION_KINDS,
                      help="weights and compute in float16/bfloat16, or int8/int4 weight matmuls (see the guide's Precision page)")
    # no argparse choices: the names are to_onnx's (and a pack's registered targets), checked by it
    conv.add_argument("--target", default=None,
                      help="the runtime the graph is tuned for, as to_onnx(target=) (default: its default, standard "
                           "ONNX): onnxruntime (also its contrib ops), tensorrt (what TensorRT 10 parses; fails naming "
                           "what it cannot take), web (one self-contained file)")
    conv.add_argument("--web-folder", default=None, metavar="MODEL_TYPE", choices=sorted(WEB_ARCHITECTURES),
                      help="with --target web: write OUTPUT as the folder a transformers.js pipeline loads for this Hugging "
                           "Face architecture (bert: feature-extraction, vit: image-classification; the graph's input/output "
                           "names must be its own)")
    conv.add_argument("--tokenizer", default=None, metavar="PATH",
                      help="--web-folder: the tokenizer.json (or a folder holding it and tokenizer_config.json) to copy in")
    conv.add_argument("--preprocessor", default=None, metavar="PATH",
                      help="--web-folder vit: the preprocessor_config.json (how an image becomes pixel_values) to copy in")
    conv.add_argument("--factory", action="store_true", help="call CALLABLE() to build the model first")
    conv.add_argument("--verify", action="store_true",
                      help="compare with JAX in onnxruntime (two sizes per symbolic dim) and print the report")
    conv.add_argument("--rtol", type=_tolerance, default=None, help="--verify tolerance (default by dtype)")
    conv.add_argument("--atol", type=_tolerance, default=None, help="--verify tolerance (default by dtype)")
    conv.add_argument("--reference", default="highest", choices=["highest", "accelerator-default"],
                      help="--verify: JAX's float32 matmuls at highest precision (default), or at the accelerator's "
                           "default (bfloat16 passes on a TPU) with looser tolerances")
    conv.add_argument("--report", help="with --verify (refused without it): also write the report here "
                                       "(.json, or .md for markdown)")
    conv.add_argument("--quiet", "-q", action="store_true", help="no progress lines or bar on stderr")
    # Also accepted after the subcommand; SUPPRESS keeps it from resetting a --debug given before it.
    conv.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help="show the full traceback on errors")
    conv.set_defaults(func=_cmd_convert)

    packs = sub.add_parser("packs", help="list installed plugin packs, what they lower, and any problem")
    packs.add_argument("--verbose", "-v", action="store_true")
    packs.set_defaults(func=_cmd_packs)

    check = sub.add_parser("check", help="list what an ONNX file uses that a target runtime cannot parse")
    check.add_argument("model", help="the .onnx file")
    check.add_argument("--target", required=True, choices=target_names(),
                       help="the runtime to check against (its op domains and opsets, and TensorRT's op table)")
    check.set_defaults(func=_cmd_check)

    quick = sub.add_parser("quickstart", help="convert and verify the quickstart MLP (needs the examples pack)")
    quick.add_argument("--output", "-o", default="quickstart_mlp.onnx")
    quick.set_defaults(func=_cmd_demo, demo_name="quickstart")

    demo = sub.add_parser("demo", help="list the ready-made models the installed packs offer, or run one")
    demo.add_argument("name", nargs="?", help="the demo to run (none: list them)")
    demo.add_argument("--output", "-o", default=None, help="where the demo writes its model (its own default if not given)")
    demo.set_defaults(func=_cmd_demo)

    try:
        from .coverage import add_coverage_subcommand
    except ImportError:
        pass
    else:
        add_coverage_subcommand(sub)
    _add_pack_commands(sub)
    return parser


#: Entry-point group of command-line verbs packs add: ``name = "pkg.cli:register"``, where
#: ``register(subparsers)`` adds the verb's parser and sets its ``func`` (as the verbs above do).
#: Its module is imported on every ``jax2onnx`` run, so it must stay light (no JAX at import).
CLI_ENTRY_POINTS = "jax2onnx.cli"


def _add_pack_commands(sub: Any) -> None:
    for ep in metadata.entry_points(group=CLI_ENTRY_POINTS):
        try:
            ep.load()(sub)
        except Exception as exc:  # noqa: BLE001 - a broken pack must not take the whole CLI down
            warnings.warn(f"the command-line verb '{ep.name}' of {ep.value} could not be added: "
                          f"{type(exc).__name__}: {exc}; reinstall that pack", stacklevel=2)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except Exception as exc:  # noqa: BLE001 - every error becomes one line and a documented exit status
        if args.debug:
            raise
        if isinstance(exc, CliError):
            code = exc.code
        elif isinstance(exc, MissingDependencyError):
            code = 4
        elif isinstance(exc, Jax2OnnxError):
            code = 3
        else:
            code = 5
        text = str(exc) if code != 5 else f"internal error: {type(exc).__name__}: {exc}"
        hint = " (rerun with --debug for the traceback)" if code in (3, 5) else ""
        print(f"jax2onnx: error: {text}{hint}", file=sys.stderr)  # one line, the hint on it
        return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
