"""``allclose`` and ``allclose_onnxruntime_web`` with the published jax2onnx 0.17's signatures.

0.17 returned ``(is_match, message)``, sampled ``inputs`` given as shape tuples, took ``rtol`` and
``atol`` positionally and ``enable_double_precision`` / ``inputs_as_nchw`` / ``outputs_as_nchw``
as keywords. Code written for it (``is_match, msg = allclose(fn, path, [(5, 10)])``) runs here
unchanged. The comparison itself is :func:`jax2onnx.verification.compare.compare` (largest difference per
output, integers exact, NaN equals NaN); :func:`jax2onnx.verify` is the full report (several sizes
per symbolic dim, tolerances by dtype).

The result is an :class:`AllcloseResult`: a real 2-tuple (unpacking, indexing, ``==`` with a tuple
behave as in 0.17) whose truth value is ``is_match``, so ``assert allclose(...)`` checks what it
reads as (a plain non-empty tuple would always be true).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ..errors import InputSpecError
from ..targets.web.runner import dtype_problem, run_web, setup_problem
from ..verification import trials
from ..verification.compare import Comparison, as_onnx_value, compare, compare_outputs, run_onnx
from . import api_compat
from .options import ExportOptions, check_indices

#: The size a symbolic dim (a string in a shape tuple) is sampled at, as 0.17 did.
SAMPLED_SYMBOLIC_DIM = 2


class AllcloseResult(tuple):
    """``(is_match, message)``; truthy only when the outputs match. ``comparison`` holds the
    per-output figures (:class:`jax2onnx.verification.Comparison`) when both sides ran."""

    comparison: Comparison | None

    def __new__(cls, is_match: bool, message: str, comparison: Comparison | None = None) -> AllcloseResult:
        self = super().__new__(cls, (bool(is_match), str(message)))
        self.comparison = comparison
        return self

    @property
    def is_match(self) -> bool:
        return bool(self[0])

    @property
    def message(self) -> str:
        return str(self[1])

    def __bool__(self) -> bool:
        return self.is_match


def _is_shape(x: Any) -> bool:
    return isinstance(x, (tuple, list)) and all(isinstance(d, (int, str)) and not isinstance(d, bool) for d in x)


def sample_inputs(inputs: Sequence[Any], double: bool = False) -> list[Any]:
    """Each shape tuple in ``inputs`` as uniform random data in [0, 1) (float32, float64 with
    ``double``; a symbolic dim sampled at :data:`SAMPLED_SYMBOLIC_DIM`); arrays pass through.

    0.17 sampled only when every entry was a shape; a shape among arrays is sampled here too
    (taken as data it could only fail)."""
    rng = np.random.default_rng(0)
    dtype = np.float64 if double else np.float32
    out = []
    for x in inputs:
        if _is_shape(x):
            # Dims through the one trial engine, so "2*B" is twice the sampled B (0.17 took 2).
            shape = trials.concrete_shape(x, dict.fromkeys(trials.symbols([x]), SAMPLED_SYMBOLIC_DIM))
            out.append(rng.random(shape).astype(dtype))
        else:
            out.append(x)
    return out


def _check_inputs(inputs: Any) -> None:

    if inputs is None or isinstance(inputs, (str, bytes)) or not isinstance(inputs, Sequence):
        raise InputSpecError(
            f"allclose: inputs must be a list with one array (or shape tuple, sampled) per positional argument, "
            f"got {type(inputs).__name__}; e.g. allclose(fn, 'model.onnx', [(5, 10)])"
        )


def allclose(
    fn: Callable[..., Any],
    onnx_model_path: Any,
    inputs: Sequence[Any],
    input_params: Mapping[str, Any] | None = None,
    rtol: float = 1e-3,
    atol: float = 1e-5,
    *,
    enable_double_precision: bool = False,
    inputs_as_nchw: Sequence[int] | None = None,
    outputs_as_nchw: Sequence[int] | None = None,
    base_dir: str | os.PathLike[str] | None = None,
    jit: bool = True,
    threads: int | None = None,
    reference: str = "highest",
) -> AllcloseResult:
    """Run ``fn`` in JAX and the model in onnxruntime on the same inputs; ``(is_match, message)``.

    The published 0.17 signature. ``onnx_model_path``: a path, or a ``ModelProto`` (a proto
    with external data needs ``base_dir``, unless ``to_onnx`` just returned it). ``inputs``:
    arrays, or shape tuples that are sampled (``[(5, 10)]``, symbolic dims at 2).
    ``inputs_as_nchw`` / ``outputs_as_nchw``: the indices exported with those ``to_onnx``
    options; ``fn`` keeps taking and returning NHWC, the model is fed and read in NCHW.
    Floating outputs match within ``rtol``/``atol``; integer and bool outputs exactly. Float64
    inputs turn x64 on for the JAX side as ``enable_double_precision=True`` does.
    Keyword-only extras: ``base_dir``, ``jit``, ``threads``, ``reference`` (see
    :func:`jax2onnx.verification.compare.compare`): JAX's side runs at highest matmul precision
    unless ``reference="accelerator-default"``; the message names the device and precision it ran at.
    Needs onnxruntime (raises :class:`~jax2onnx.MissingDependencyError` naming the install).
    """
    _check_inputs(inputs)
    arrays = sample_inputs(inputs, double=enable_double_precision)
    reference_fn, model_inputs = fn, arrays
    if inputs_as_nchw or outputs_as_nchw:

        options = ExportOptions(
            inputs_as_nchw=check_indices(inputs_as_nchw, "inputs_as_nchw", len(arrays)),
            outputs_as_nchw=check_indices(outputs_as_nchw, "outputs_as_nchw", None),
        )
        # The model takes and returns NCHW; fn, wrapped to do the same, is compared with it as is.
        reference_fn = api_compat.with_layouts(fn, options)
        model_inputs = [np.transpose(np.asarray(a), api_compat.NHWC_TO_NCHW) if i in options.inputs_as_nchw else a
                        for i, a in enumerate(arrays)]
    double = True if enable_double_precision else None  # None: on when an input is float64
    result = compare(reference_fn, onnx_model_path, model_inputs, input_params, rtol=rtol, atol=atol,
                     enable_double_precision=double, base_dir=base_dir, jit=jit, threads=threads,
                     reference=reference)
    return AllcloseResult(result.ok, str(result), result)


# ---------------------------------------------------------------------------------------------
# onnxruntime-web


def allclose_onnxruntime_web(
    onnx_model_path: Any,
    inputs: Sequence[Any],
    input_params: Mapping[str, Any] | None = None,
    rtol: float = 1e-3,
    atol: float = 1e-5,
    *,
    inputs_as_nchw: Sequence[int] | None = None,
    node_command: str = "node",
    runner: str | None = None,
    node_modules: str | os.PathLike[str] | None = None,
) -> AllcloseResult:
    """Run the model in onnxruntime (CPU) and in onnxruntime-web's wasm backend under Node.js and
    compare; ``(is_match, message)`` as in 0.17 (a setup problem is ``(False, what to install)``).

    The published 0.17 signature. ``runner``: ``"node"`` (default; also read from
    ``JAX2ONNX_ONNXRUNTIME_WEB_RUNNER``); 0.17's ``"chrome"`` runner is not available and says so.
    ``node_modules``: the folder holding ``node_modules/onnxruntime-web`` (``npm install
    onnxruntime-web`` there); default ``$JAX2ONNX_ORT_WEB_DIR``, else the current folder.
    ``inputs_as_nchw`` transposes those NHWC inputs to NCHW for both runtimes.
    """
    _check_inputs(inputs)
    arrays = [np.asarray(a) for a in sample_inputs(inputs)]
    for i in inputs_as_nchw or ():
        if 0 <= i < len(arrays) and arrays[i].ndim == 4:
            arrays[i] = np.transpose(arrays[i], (0, 3, 1, 2))
    params = dict(input_params or {})
    name = (runner if runner is not None else os.environ.get("JAX2ONNX_ONNXRUNTIME_WEB_RUNNER", "node")).strip().lower()
    if name != "node":
        return AllcloseResult(False, f"onnxruntime-web runner {name!r} is not available in this jax2onnx; use runner='node' (Node.js)")
    problem = setup_problem(node_command, node_modules)
    if problem is not None:
        return AllcloseResult(False, problem)
    if not isinstance(onnx_model_path, (str, os.PathLike)):
        return AllcloseResult(False, "allclose_onnxruntime_web reads the model from a file: pass its path "
                                     "(to_onnx(..., export_mode='web', output_path='model.onnx'))")
    path = os.path.abspath(os.fspath(onnx_model_path))
    # complex arrays travel as (real, imag) pairs, to both runtimes (run_onnx converts its own)
    values = [as_onnx_value(v) for v in [*arrays, *params.values()]]
    problem = dtype_problem(values)
    if problem is not None:
        return AllcloseResult(False, problem)
    expected = [np.asarray(e) for e in run_onnx(path, arrays, params)]
    try:  # the web target's verification runner (jax2onnx.targets.web.runner)
        got = run_web(path, values, node_command=node_command, node_modules=node_modules)
    except RuntimeError as exc:
        return AllcloseResult(False, str(exc))
    result = compare_outputs(expected, got, rtol=rtol, atol=atol)
    return AllcloseResult(result.ok, f"onnxruntime-web vs onnxruntime CPU: {result}", result)


