"""Every argument of one ``to_onnx`` call, checked once, and the ``Export`` the stages share.

``ExportOptions.check(...)`` is the only place an argument is validated: each message names the
argument and the fix (the 0.17-compatible ones raise :class:`OptionTypeError`, both an
``InputSpecError`` and the ``TypeError`` 0.17 raised). The stages (``trace`` → ``lower`` →
``optimize`` → ``write`` → ``verify``, see :mod:`jax2onnx.export.conversion`) read the checked,
immutable options from the :class:`Export` and never re-check them.

Adding an option: a field with its default here, its check in :meth:`ExportOptions.check` (same
order as the signature), the keyword in ``to_onnx`` (keyword-only, with that default), and the
stage that reads it.

Front-end options (:data:`FRONT_END_OPTIONS`) are the exception: fields a front-end built on the
stages sets (the LLM pack's causal-LM export, for one), checked here like the rest but not ``to_onnx``
keywords, because a user calling ``to_onnx`` has a simpler way (transform the returned model, name
the file) and the keywords stay the published 0.17 signature plus the documented additions:

- ``rewrite_passes``: pass factories, each ``factory(options) -> onnx_ir.passes.PassBase``, run in
  the optimize stage's rewrite slot after the built-in rewrites (:mod:`jax2onnx.export.optimize`);
- ``external_data_file``: the external-data file's fixed name beside ``output_path`` instead of
  ``<model file>.<hash>.data``, for a front-end that writes into a staging folder it renames into
  place as a whole (the folder rename is then what keeps model and weights a pair).
"""

from __future__ import annotations

import dataclasses
import os
import types
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import onnx_ir as ir

from ..errors import InputSpecError, require_onnxruntime
from ..ir.opsets import MIN_OPSET, max_opset
from ..lower.registry import PluginRegistry
from ..precision import Precision, parse_precision
from ..targets import DEFAULT_TARGET, Target, available_targets, default_target, get_target
from ..verification.greedy import GreedyCheck
from ..verification.options import Verify, is_verify_option
from .specs import check_output_path
from .weights import Weights

RETURN_MODES = ("proto", "ir", "file")
EXPORT_MODES = ("standard", "web")
NORMALIZATION_MODES = ("auto", "prefer_native", "force_decomposed")
#: The fields of :class:`ExportOptions` a front-end sets that are not ``to_onnx`` keywords.
FRONT_END_OPTIONS = ("rewrite_passes", "external_data_file")

#: Builds one pass of the rewrite slot from the export's checked options.
PassFactory = Callable[["ExportOptions"], ir.passes.PassBase]


class OptionTypeError(InputSpecError, TypeError):
    """An option of the wrong type (0.17 raised TypeError here; this is both)."""


@dataclasses.dataclass(frozen=True)
class ExportOptions:
    """The checked arguments of one ``to_onnx`` call (all but ``fn`` and ``inputs``), immutable.

    Build it with :meth:`check`; the defaults are ``to_onnx``'s."""

    input_params: Mapping[str, Any] | None = None
    model_name: str = "jax_model"
    opset: int = 23
    enable_double_precision: bool = False
    record_primitive_calls_file: str | None = None
    return_mode: str = "proto"
    output_path: str | None = None
    inputs_as_nchw: tuple[int, ...] = ()
    outputs_as_nchw: tuple[int, ...] = ()
    input_names: tuple[str, ...] | None = None
    output_names: tuple[str, ...] | None = None
    export_mode: str = "standard"
    normalization_mode: str = "auto"
    optimize: bool = True
    #: None: decided by :func:`jax2onnx.export.write.write` from the weights' size; ``export_mode="web"``
    #: sets it to False here.
    external_data: bool | None = None
    #: True, a Verify (the reference's matmul precision, verification/options.py), or a GreedyCheck:
    #: verify and also report an LM's greedy tokens (verification/greedy.py)
    verify: bool | GreedyCheck | Verify = False
    #: float16/bfloat16/int8/int4: the precision stage (jax2onnx.precision) in optimize's rewrite slot
    precision: Precision = Precision()
    #: the runtime the graph is tuned for (:mod:`jax2onnx.targets`): every stage asks this object
    target: Target = dataclasses.field(default_factory=default_target)
    #: None: a bar on a terminal for a long export; True: a bar, or plain lines when not a terminal;
    #: False: nothing (:mod:`jax2onnx.progress`)
    progress: bool | None = None
    #: True: a float max pool whose input may hold NaN keeps XLA's NaN (a window holding one is NaN)
    #: through a check of its input (jax2onnx.fusion.max_pool); False: the bare MaxPool, whose NaN
    #: handling is the runtime kernel's
    max_pool_nan_guard: bool = True
    #: front-end only (FRONT_END_OPTIONS): extra rewrite passes, after precision=, before the I/O names
    rewrite_passes: tuple[PassFactory, ...] = ()
    #: front-end only: the external-data file's name beside output_path (None: <model file>.<hash>.data)
    external_data_file: str | None = None

    @classmethod
    def check(
        cls,
        *,
        inputs: Any,
        input_params: Mapping[str, Any] | None = None,
        model_name: str = "jax_model",
        opset: Any = 23,
        enable_double_precision: bool = False,
        record_primitive_calls_file: Any = None,
        return_mode: Any = "proto",
        output_path: Any = None,
        inputs_as_nchw: Any = None,
        outputs_as_nchw: Any = None,
        input_names: Any = None,
        output_names: Any = None,
        export_mode: Any = "standard",
        normalization_mode: Any = "auto",
        optimize: bool = True,
        external_data: bool | None = None,
        verify: Any = False,
        precision: Any = "float32",
        target: Any = DEFAULT_TARGET,
        progress: Any = None,
        max_pool_nan_guard: Any = True,
        rewrite_passes: Any = (),
        external_data_file: Any = None,
    ) -> ExportOptions:
        """Check what can be checked before tracing; raises :class:`InputSpecError` naming the fix.

        ``inputs`` is only counted (``input_names``, ``inputs_as_nchw``); when it is not a list the
        input-spec check of the trace stage names that problem."""
        opset = check_opset(opset)
        # Graph inputs only: a Weights entry becomes initializers, so input_names skips it.
        n_inputs = (sum(1 for spec in inputs if not isinstance(spec, Weights))
                    if isinstance(inputs, Sequence) and not isinstance(inputs, (str, bytes)) else None)
        mode = _choice(return_mode, RETURN_MODES, "return_mode")
        path = None
        if output_path is not None:
            if not isinstance(output_path, (str, os.PathLike)):
                raise OptionTypeError(f"output_path must be a str or os.PathLike, got {type(output_path).__name__}")
            path = os.fspath(output_path)
        if mode == "file" and path is None:
            raise InputSpecError("return_mode='file' writes the model to output_path: pass output_path='model.onnx'")
        in_names = _names(input_names, "input_names")
        out_names = _names(output_names, "output_names")
        if in_names is not None and n_inputs is not None and len(in_names) != n_inputs:
            raise InputSpecError(
                f"input_names has {len(in_names)} name(s) but there are {n_inputs} positional input(s); "
                "give one name per entry of inputs but Weights (input_params keep their own names)"
            )
        params = list(input_params or ())
        for arg, names in (("input_names", in_names), ("output_names", out_names)):
            clash = sorted(set(names or ()) & set(params))
            if clash:
                raise InputSpecError(f"{arg} {clash} collide with input_params names; ONNX graph inputs and outputs need unique names")
        both = sorted(set(in_names or ()) & set(out_names or ()))
        if both:
            raise InputSpecError(f"{both} named both as an input and as an output; ONNX values need unique names")
        record = None
        if record_primitive_calls_file is not None:
            if not isinstance(record_primitive_calls_file, (str, os.PathLike)):
                raise OptionTypeError(f"record_primitive_calls_file must be a path, got {record_primitive_calls_file!r}")
            record = os.fspath(record_primitive_calls_file)
        export = _choice(export_mode, EXPORT_MODES, "export_mode")
        target, export, opset = _resolve_target(target, export, opset)
        normalization = _choice(normalization_mode, NORMALIZATION_MODES, "normalization_mode")
        nchw_in = check_indices(inputs_as_nchw, "inputs_as_nchw", n_inputs)
        nchw_out = check_indices(outputs_as_nchw, "outputs_as_nchw", None)  # outputs are counted after tracing
        if path is not None:
            check_output_path(path)  # before minutes of tracing, not after them
        if not is_verify_option(verify):
            raise OptionTypeError(f"verify must be True, False, a jax2onnx.Verify(reference=...) or a jax2onnx.GreedyCheck "
                                  f"(an LM's greedy tokens too), got {type(verify).__name__} {verify!r}")
        if verify:
            require_onnxruntime("to_onnx(..., verify=True)")  # before converting, not after it
        checked_precision = target.fit_precision(
            parse_precision(precision, enable_double_precision=enable_double_precision), opset)
        if export == "web":
            if external_data:
                raise InputSpecError("export_mode='web' writes one self-contained file; drop external_data=True")
            external_data = False
        factories = pass_factories(rewrite_passes)
        data_file = _data_file_name(external_data_file, path)
        return cls(
            input_params=None if input_params is None else types.MappingProxyType(dict(input_params)),
            model_name=model_name,
            opset=opset,
            enable_double_precision=enable_double_precision,
            record_primitive_calls_file=record,
            return_mode=mode,
            output_path=path,
            inputs_as_nchw=nchw_in,
            outputs_as_nchw=nchw_out,
            input_names=in_names,
            output_names=out_names,
            export_mode=export,
            normalization_mode=normalization,
            optimize=optimize,
            external_data=external_data,
            verify=verify,
            precision=checked_precision,
            target=target,
            progress=_progress_option(progress),
            max_pool_nan_guard=_max_pool_nan_guard_option(max_pool_nan_guard),
            rewrite_passes=factories,
            external_data_file=data_file,
        )


def _progress_option(progress: Any) -> bool | None:
    if progress is not None and not isinstance(progress, bool):
        raise OptionTypeError(f"progress must be True (a bar on a terminal, plain lines otherwise), False (nothing) or "
                              f"None (a bar on a terminal for a long export), got {type(progress).__name__} {progress!r}")
    return progress


def _max_pool_nan_guard_option(guard: Any) -> bool:
    if not isinstance(guard, bool):
        raise OptionTypeError(f"max_pool_nan_guard must be True (a window holding NaN pools to NaN, as in JAX) or False "
                              f"(the bare MaxPool: the runtime's NaN handling), got {type(guard).__name__} {guard!r}")
    return guard


def _resolve_target(target: Any, export_mode: str, opset: int) -> tuple[Target, str, int]:
    """(target, export_mode, opset) after checking they agree: ``export_mode="web"`` is
    ``target="web"`` (the default target then becomes it), a target's own export mode is taken, and
    the opset is lowered to the target's ceiling (TensorRT's parser)."""
    resolved = get_target(target)
    default = isinstance(target, str) and resolved is default_target()
    if export_mode != "standard" and resolved.export_mode != export_mode:
        moded = [t for t in available_targets() if t.export_mode == export_mode]
        if not default or not moded:
            implied = moded[0].name if moded else export_mode
            raise InputSpecError(f"export_mode={export_mode!r} is target={implied!r}; "
                                 f"it cannot be combined with target={resolved.name!r}")
        resolved = moded[0]
    return resolved, resolved.export_mode or export_mode, resolved.resolve_opset(opset)


@dataclasses.dataclass(frozen=True)
class Export:
    """One export in progress: its checked options and the plugin registry it lowers with.

    Every stage takes it first. The registry travels here rather than being looked up: the front
    door (``to_onnx``) reads :func:`jax2onnx.lower.registry.get_registry` once, and nothing below
    it reaches a module-global registry."""

    options: ExportOptions
    registry: PluginRegistry


def _choice(value: Any, allowed: Sequence[str], arg: str) -> str:
    if not isinstance(value, str):
        raise OptionTypeError(f"{arg} must be one of {list(allowed)}, got {type(value).__name__} {value!r}")
    mode = value.strip().lower()
    if mode not in allowed:
        raise InputSpecError(f"{arg}={value!r} is not supported; use one of {list(allowed)}")
    return mode


def _names(names: Any, arg: str) -> tuple[str, ...] | None:
    if names is None:
        return None
    if isinstance(names, (str, bytes)) or not isinstance(names, Sequence):
        raise OptionTypeError(f"{arg} must be a list of strings, one per value, e.g. ['x'], got {names!r}")
    out: list[str] = []
    for i, name in enumerate(names):
        if not isinstance(name, str):
            raise OptionTypeError(f"{arg}[{i}] must be a string, got {type(name).__name__} {name!r}")
        if not name.strip():
            raise InputSpecError(f"{arg}[{i}] is empty; ONNX values need a non-empty name")
        if name in out:
            raise InputSpecError(f"{arg} names {name!r} twice; ONNX graph inputs and outputs need unique names")
        out.append(name)
    return tuple(out)


def pass_factories(factories: Any) -> tuple[PassFactory, ...]:
    if isinstance(factories, (str, bytes)) or not isinstance(factories, Sequence):
        raise OptionTypeError(f"rewrite_passes must be a list of pass factories (options -> onnx_ir pass), got {factories!r}")
    for i, factory in enumerate(factories):
        if isinstance(factory, ir.passes.PassBase) or not callable(factory):
            raise OptionTypeError(
                f"rewrite_passes[{i}] must be a callable taking the ExportOptions and returning a new onnx_ir pass "
                f"(e.g. lambda options: MyPass()), got {type(factory).__name__} {factory!r}"
            )
    return tuple(factories)


def _data_file_name(name: Any, output_path: str | None) -> str | None:
    if name is None:
        return None
    if not isinstance(name, str):
        raise OptionTypeError(f"external_data_file must be a file name (str), got {type(name).__name__} {name!r}")
    if not name or name != os.path.basename(name) or name in (".", ".."):
        raise InputSpecError(f"external_data_file={name!r} must be a plain file name (it is written beside output_path)")
    if output_path is None:
        raise InputSpecError("external_data_file names the weights file beside output_path: pass output_path=... too")
    if name == os.path.basename(output_path):
        raise InputSpecError(f"external_data_file={name!r} is the model file's own name; give the weights another name")
    return name


def check_indices(indices: Any, arg: str, upper: int | None) -> tuple[int, ...]:
    """``indices`` as distinct 0-based ints below ``upper`` (None: no bound known yet)."""
    if indices is None:
        return ()
    if isinstance(indices, (str, bytes)) or not isinstance(indices, Sequence):
        raise OptionTypeError(f"{arg} must be a list of 0-based indices, e.g. [0], got {indices!r}")
    out: list[int] = []
    for raw in indices:
        if isinstance(raw, bool) or not isinstance(raw, (int, np.integer)):
            raise OptionTypeError(f"{arg} entries must be ints (0-based indices), got {raw!r}")
        i = int(raw)
        if i < 0 or (upper is not None and i >= upper):
            bound = f"0..{upper - 1}" if upper else "none: there are no such values"
            raise InputSpecError(f"{arg} index {i} is out of range (valid: {bound})")
        if i in out:
            raise InputSpecError(f"{arg} lists index {i} twice")
        out.append(i)
    return tuple(out)


def check_opset(opset: Any) -> int:
    """``opset`` as an int in ``MIN_OPSET..max_opset()``, else :class:`InputSpecError` naming the range."""
    top = max_opset()
    if isinstance(opset, bool) or not isinstance(opset, (int, np.integer)):
        raise OptionTypeError(f"opset must be an int from {MIN_OPSET} to {top}, got {type(opset).__name__} {opset!r}")
    opset = int(opset)
    if not MIN_OPSET <= opset <= top:
        newer = (f"; opset {opset} is newer than the installed onnx {_onnx_version()} knows: upgrade onnx"
                 if opset > top else "")
        raise InputSpecError(f"opset={opset} is not supported: jax2onnx exports opsets {MIN_OPSET} to {top}{newer}")
    return opset


def _onnx_version() -> str:
    import onnx

    return str(onnx.__version__)
