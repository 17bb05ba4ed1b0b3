"""Run the exported model in onnxruntime and JAX side by side."""

from __future__ import annotations

import collections
import dataclasses
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import numpy as np
import onnx

from ..compat import x64_enabled
from ..errors import require_onnxruntime
from ..ir import complex_io
from ..passes.rewrite import TARGET_KEY
from ..targets import Target, default_target, find_target, get_target
from .reference import (
    ACCELERATOR_DEFAULT,
    HIGHEST,
    PrecisionRecheck,
    ReferenceInfo,
    check_reference,
    precision_scope,
    reference_info,
    tolerance,
)

#: The last protos returned for external-data models, with the file they were read from (the
#: export's write stage tells, :func:`remember_saved`), so that ``allclose(fn, proto)`` and
#: ``verify`` find the weights: a ModelProto cannot carry its folder, nor be weakly referenced.
#: Such protos hold no weights, so keeping a few alive costs little.
_SAVED: collections.deque[tuple[onnx.ModelProto, str]] = collections.deque(maxlen=16)


def remember_saved(proto: onnx.ModelProto, path: str | os.PathLike[str]) -> None:
    """``proto`` was read from ``path`` (its external data lies beside it)."""
    _SAVED.append((proto, os.path.abspath(os.fspath(path))))


def saved_path(proto: onnx.ModelProto) -> str | None:
    """The file ``proto`` was read from, if this process saved it with external data."""
    for saved, path in reversed(_SAVED):
        if saved is proto:
            return path
    return None


def uses_external_data(proto: onnx.ModelProto) -> bool:
    return any(t.data_location == onnx.TensorProto.EXTERNAL for t in proto.graph.initializer)


@dataclasses.dataclass
class Comparison:
    """Largest absolute difference per output, and whether all are within tolerance."""

    ok: bool
    max_abs_diff: list[float]
    messages: list[str]
    #: where and at which matmul precision the JAX side ran (None: compared without running JAX)
    reference: ReferenceInfo | None = None
    #: a mismatch against the accelerator's default numbers, rechecked at highest precision
    recheck: PrecisionRecheck | None = None

    def __bool__(self) -> bool:
        return self.ok

    def __str__(self) -> str:
        diffs = ", ".join(f"{d:.3g}" for d in self.max_abs_diff)
        status = "match" if self.ok else "MISMATCH"
        text = f"{status} (max abs diff per output: {diffs})" + ("" if self.ok else ": " + "; ".join(self.messages))
        if self.reference is not None:
            text += f"; reference: {self.reference}"
        if self.recheck is not None:
            text += f". {self.recheck.explanation()}"
        return text


def run_onnx(
    model: onnx.ModelProto | str | os.PathLike[str] | bytes,
    inputs: Sequence[Any],
    params: Mapping[str, Any] | None = None,
    *,
    base_dir: str | os.PathLike[str] | None = None,
    threads: int | None = None,
    target: Any = None,
) -> list[np.ndarray]:
    """Run ``model`` (a proto, serialized bytes or a path) on its target's verification providers
    (:func:`runner_target`; every built-in target's: onnxruntime's CPU provider).

    A proto whose weights are external data is loaded with its folder as the base: ``base_dir``,
    or the folder it was saved to when ``to_onnx`` returned it. ``threads``: onnxruntime's
    intra-op thread count (``None``: its default, one per core). ``1`` suits many small models
    run once each, as a test suite runs them: starting the default thread pool costs several
    times the CPU such a model takes to run.
    """
    ort = require_onnxruntime("jax2onnx.verification.compare.run_onnx")
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    if threads is not None:
        opts.intra_op_num_threads = threads
    sess = _session(ort, model, opts, base_dir, target)
    graph_inputs = sess.get_inputs()
    values = list(inputs) + [np.asarray(v) for v in (params or {}).values()]
    if len(values) != len(graph_inputs):
        raise ValueError(f"model has {len(graph_inputs)} inputs, got {len(values)} values")
    return sess.run(None, _feeds(sess, values, _complex_inputs(sess)))


def onnx_runner(
    model: onnx.ModelProto | str | os.PathLike[str] | bytes, params: Mapping[str, Any] | None = None,
    target: Any = None, *, threads: int | None = None,
) -> Callable[..., list[np.ndarray]]:
    """``run(*inputs) -> outputs`` over one onnxruntime session, for a caller that runs the model
    many times (greedy decoding, one model compared on several input sets): :func:`run_onnx` would
    start a session per call. ``threads``: as for :func:`run_onnx`."""
    ort = require_onnxruntime("jax2onnx.verification.compare.onnx_runner")
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    if threads is not None:
        opts.intra_op_num_threads = threads
    sess = _session(ort, model, opts, None, target)
    names = [gi.name for gi in sess.get_inputs()]
    extra = [np.asarray(v) for v in (params or {}).values()]
    complex_inputs = _complex_inputs(sess)

    def run(*inputs: Any) -> list[np.ndarray]:
        values = list(inputs) + extra
        if len(values) != len(names):
            raise ValueError(f"model has {len(names)} inputs, got {len(values)} values")
        return sess.run(None, _feeds(sess, values, complex_inputs))

    return run


def runner_target(model: Any, target: Any = None) -> Target:
    """The target whose verification runner runs ``model``: ``target`` (a name or a Target) where
    given, else the one a proto records (``jax2onnx:target``, where registered here), else the
    default target."""
    if target is not None:
        return get_target(target)
    if isinstance(model, onnx.ModelProto):
        recorded = next((p.value for p in model.metadata_props if p.key == TARGET_KEY), None)
        found = find_target(recorded)
        if found is not None:
            return found
    return default_target()


def _session(ort: Any, model: Any, opts: Any, base_dir: str | os.PathLike[str] | None, target: Any = None) -> Any:
    runner = runner_target(model, target)
    if isinstance(model, (str, os.PathLike)):
        # From the path, onnxruntime finds external data beside the model and memory-maps it.
        return runner.inference_session(ort, os.fspath(model), opts)
    if not isinstance(model, onnx.ModelProto):
        return runner.inference_session(ort, model, opts)

    if not uses_external_data(model):
        return runner.inference_session(ort, model.SerializeToString(), opts)
    saved = saved_path(model)
    folder = os.fspath(base_dir) if base_dir is not None else os.path.dirname(saved) if saved else None
    if folder is None:
        location = next(
            (e.value for t in model.graph.initializer for e in t.external_data if e.key == "location"), "?"
        )
        raise ValueError(
            f"this ModelProto keeps its weights in an external data file ({location!r}) that is found relative "
            "to the model's folder: pass base_dir=<the folder of the .onnx file>, or the model's path instead of the proto"
        )
    opts.add_session_config_entry("session.model_external_initializers_file_folder_path", folder)
    try:
        return runner.inference_session(ort, model.SerializeToString(), opts)
    except Exception:
        if saved is None or base_dir is not None:
            raise
        # An onnxruntime without that session option: the saved file is the same model.
        return runner.inference_session(ort, saved, opts)


def as_onnx_value(value: Any) -> np.ndarray:
    """The array an exported graph takes for ``value``: complex numbers travel as (real, imag)
    pairs on a trailing axis of 2 (complex64 -> float32), the layout of ONNX's DFT."""
    return complex_io.to_pairs(value)


def _complex_inputs(sess: Any) -> dict[int, str]:
    """The inputs the session's model marks as complex pairs (``{position: dtype name}``)."""
    return complex_io.read(sess.get_modelmeta().custom_metadata_map)[0]


def _feeds(sess: Any, values: Sequence[Any], complex_inputs: dict[int, str]) -> dict[str, np.ndarray]:
    """The session's feeds: complex arrays as (real, imag) pairs, each checked against its input
    where complex numbers are involved, so a wrong one is named with the pair layout (onnxruntime
    itself would say "Numpy_type 14 can't be converted" or "Invalid rank")."""
    feeds = {}
    for i, (gi, v) in enumerate(zip(sess.get_inputs(), values)):
        arr = np.asarray(v)
        takes = complex_inputs.get(i)
        if arr.dtype.kind == "c" or takes is not None:
            _check_complex_feed(gi, arr, takes)
        feeds[gi.name] = as_onnx_value(arr)
    return feeds


#: onnxruntime's input type names of the real dtypes complex pairs are made of
_ORT_REAL_TYPES = {"tensor(float)": np.float32, "tensor(double)": np.float64}


def _check_complex_feed(gi: Any, arr: np.ndarray, takes: str | None) -> None:
    """``arr`` fits graph input ``gi`` (onnxruntime's NodeArg), which holds complex ``takes`` as
    pairs (``None``: a real input): a complex array of the input's dtype and rank, or its pairs."""
    shape = list(gi.shape)
    dims = [d if isinstance(d, int) else str(d) for d in shape]
    real_type = _ORT_REAL_TYPES.get(gi.type)
    if takes is None and arr.dtype.kind == "c" and len(shape) == arr.ndim + 1 \
            and (shape[-1] == 2 or not isinstance(shape[-1], int)):
        # a trailing axis that can hold pairs, in a model without jax2onnx's marks (older, or another
        # exporter's): the pairs of the matching float type are fed as they are
        takes = {np.float32: "complex64", np.float64: "complex128"}.get(real_type)
    if takes is None:
        raise ValueError(
            f"input {gi.name!r} takes {np.dtype(real_type).name if real_type else gi.type}{dims}, a real array; got "
            f"{arr.dtype.name}{list(arr.shape)}. Complex values travel as (real, imag) pairs on a trailing axis of "
            "2, and this input is not one: export the function with a complex input spec "
            "(jax.ShapeDtypeStruct(shape, jnp.complex64)) to give it complex numbers")
    want = complex_io.describe(takes, dims[:-1])
    if arr.dtype.kind == "c":
        if arr.dtype != np.dtype(takes) or arr.ndim != len(shape) - 1:
            raise ValueError(f"input {gi.name!r} takes {want}; got {arr.dtype.name}{list(arr.shape)}")
    elif arr.ndim != len(shape) or arr.dtype != complex_io.part_dtype(takes) or arr.shape[-1:] != (2,):
        raise ValueError(
            f"input {gi.name!r} takes {want}; got {arr.dtype.name}{list(arr.shape)}: pass a {takes} array "
            f"(converted to pairs for you) or its pairs, np.stack([z.real, z.imag], axis=-1)")


def jax_output_array(leaf: Any) -> np.ndarray:
    """An output leaf of the JAX function as the array JAX makes of it: a Python scalar (a returned
    ``3``, ``2.5``, ``True``) takes JAX's default dtype where it is called (int32 / float32, int64 /
    float64 in x64 mode), as ``jnp.asarray`` gives it and the exported model returns it; numpy's
    would be int64 / float64 always."""
    if isinstance(leaf, (bool, int, float, complex)) and not isinstance(leaf, np.generic):
        return np.asarray(leaf, dtype=jax.dtypes.canonicalize_dtype(np.asarray(leaf).dtype))
    return np.asarray(leaf)


def jax_reference(fn: Callable[..., Any], arrays: Sequence[Any], params: Mapping[str, Any] | None = None, *,
                  jit: bool = True, reference: str = HIGHEST) -> Any:
    """``fn(*arrays, **params)`` as JAX computes it, jitted: one XLA compilation instead of one per
    op, which is most of the time a comparison takes. A function that cannot be jitted (Python
    control flow on a runtime flag, a module that updates its own state) runs eagerly instead, and
    so does every function with ``jit=False`` (XLA's fusions may skip the rounding of a 16-bit float
    round trip that JAX's op-by-op semantics, and the exported graph, keep).

    ``reference``: ``"highest"`` runs it at highest matmul precision (float32 matmuls in float32 on
    a TPU or GPU too), ``"accelerator-default"`` as the device computes by default
    (:mod:`jax2onnx.verification.reference`). It runs where its inputs and parameters live."""
    params = dict(params or {})
    with precision_scope(reference):
        if not jit:
            return fn(*arrays, **params)
        # The params are closed over, as concrete values: a function branching on one in Python
        # (``if deterministic:``) still compiles once instead of running op by op.
        try:
            return jax.jit(lambda *xs: fn(*xs, **params))(*arrays)
        except Exception:  # noqa: BLE001 - any trace-time refusal means: not jittable as written
            return fn(*arrays, **params)


def jax_expected(fn: Callable[..., Any], arrays: Sequence[np.ndarray], input_params: Mapping[str, Any] | None = None, *,
                 double: bool, jit: bool = True, reference: str = HIGHEST) -> tuple[list[np.ndarray], ReferenceInfo]:
    """JAX's outputs of ``fn`` on ``arrays`` as :func:`compare` compares them (flattened, each as
    the ONNX value it should equal), and where and at which precision they were computed."""
    with x64_enabled(double):
        outputs = jax_reference(fn, arrays, input_params, jit=jit, reference=reference)
        info = reference_info(outputs, reference)
        return [as_onnx_value(jax_output_array(e)) for e in jax.tree_util.tree_leaves(outputs)], info


def compare(
    fn: Callable[..., Any],
    model: onnx.ModelProto | str | os.PathLike[str],
    inputs: Sequence[Any],
    input_params: Mapping[str, Any] | None = None,
    *,
    rtol: float | None = None,
    atol: float | None = None,
    enable_double_precision: bool | None = None,
    base_dir: str | os.PathLike[str] | None = None,
    jit: bool = True,
    threads: int | None = None,
    reference: str = HIGHEST,
    expected: tuple[list[np.ndarray], ReferenceInfo] | None = None,
    target: Any = None,
    runner: Callable[..., list[np.ndarray]] | None = None,
) -> Comparison:
    """Run ``fn`` in JAX and ``model`` in onnxruntime on the same concrete ``inputs`` and compare.

    ``model`` may be a ModelProto or a path (read by onnxruntime itself, so external data of any
    size is memory-mapped, not copied). A proto with external data needs its folder: ``base_dir``,
    or none for the proto ``to_onnx`` just returned. ``jit``: see :func:`jax_reference`;
    ``threads``, ``target``: see :func:`run_onnx`. Returns a :class:`Comparison` (truthy when all match).
    :func:`jax2onnx.allclose` is this with the published 0.17's signature and ``(bool, str)`` result.
    Floating outputs match within ``rtol``/``atol`` (NaN matches NaN); integer and bool outputs
    match exactly. ``reference``: see :func:`jax_reference`; the result names where JAX ran and at
    which precision, and a mismatch against ``"accelerator-default"`` is computed once more at
    highest precision to tell a precision effect from a lowering (``Comparison.recheck``).
    ``expected``: JAX's side as :func:`jax_expected` computed it for these inputs, reused (the test
    runner compares one function's exports at several opsets with one reference). ``runner``:
    ``model``'s :func:`onnx_runner` (built with these ``input_params``), reused by a caller that
    compares one model on several input sets, instead of a session started for this call.
    """
    reference = check_reference(reference)
    arrays = [np.asarray(x) for x in inputs]
    double = enable_double_precision if enable_double_precision is not None else any(a.dtype == np.float64 for a in arrays)

    def expected_at(kind: str) -> tuple[list[np.ndarray], ReferenceInfo]:
        return jax_expected(fn, arrays, input_params, double=double, jit=jit, reference=kind)

    expected, info = expected if expected is not None else expected_at(reference)
    got = (runner(*arrays) if runner is not None
           else run_onnx(model, arrays, input_params, base_dir=base_dir, threads=threads, target=target))
    def tolerances(kind: str, outputs: Sequence[np.ndarray], platform: str) -> tuple[float, float]:
        """The caller's rtol/atol, else 1e-5 both or what the reference's kind and platform allow."""
        floats = [e for e in outputs if np.dtype(e.dtype).name in ("float32", "complex64")]
        wide = [tolerance(kind, "float32", (1e-5, 1e-5), e, platform) for e in floats] or [(1e-5, 1e-5)]
        return (max(t[0] for t in wide) if rtol is None else rtol, max(t[1] for t in wide) if atol is None else atol)

    result = compare_outputs(expected, got, **dict(zip(("rtol", "atol"), tolerances(reference, expected, info.platform))))
    result.reference = info
    if not result.ok and reference == ACCELERATOR_DEFAULT:
        again, highest = expected_at(HIGHEST)
        exact = compare_outputs(again, got, **dict(zip(("rtol", "atol"), tolerances(HIGHEST, again, highest.platform))))
        result.recheck = PrecisionRecheck(exact.ok, highest, {f"output {i}": d for i, d in enumerate(exact.max_abs_diff)})
    return result


def compare_outputs(expected: Sequence[Any], got: Sequence[Any], *, rtol: float, atol: float) -> Comparison:
    """Compare two runs' outputs in order: floats within ``rtol``/``atol`` (NaN matches NaN),
    integers and bools exactly; shapes and dtypes must agree."""
    expected = [np.asarray(e) for e in expected]
    diffs: list[float] = []
    msgs: list[str] = []
    ok = len(got) == len(expected)
    if not ok:
        msgs.append(f"{len(got)} ONNX outputs vs {len(expected)} JAX outputs")
    for i, (e, g) in enumerate(zip(expected, got)):
        g = np.asarray(g)
        if e.shape != g.shape:
            ok = False
            msgs.append(f"output {i}: shape {g.shape} vs JAX {e.shape}")
            diffs.append(float("inf"))
            continue
        if e.dtype != g.dtype:
            ok = False
            msgs.append(f"output {i}: dtype {g.dtype} vs JAX {e.dtype}")
        if e.size == 0:
            diffs.append(0.0)
            continue
        if e.dtype == bool or g.dtype == bool:
            diff = float(np.max(e != g))
            good = diff == 0
        elif e.dtype.kind in "iu" and g.dtype.kind in "iu":
            # Integers match exactly (no tolerance), compared as integers: 64-bit values past 2**53
            # would round together in float64. The reported difference is as exact as float allows.
            wrong = e.astype(object) != g.astype(object) if e.dtype != g.dtype else e != g
            good = not bool(np.any(wrong))
            # two different integers are at least 1 apart, even where float64 rounds them together
            diff = 0.0 if good else max(1.0, float(np.max(np.abs(e.astype(np.float64) - g.astype(np.float64)))))
        else:
            ef, gf = e.astype(np.float64), g.astype(np.float64)
            same_special = (np.isnan(ef) & np.isnan(gf)) | (ef == gf)
            d = np.where(same_special, 0.0, np.abs(ef - gf))
            diff = float(np.max(d))
            good = bool(np.all(same_special | (np.abs(ef - gf) <= atol + rtol * np.abs(ef))))
        diffs.append(diff)
        if not good:
            ok = False
            msgs.append(f"output {i}: max abs diff {diff:.3g} exceeds rtol={rtol}, atol={atol}")
    return Comparison(ok, diffs, msgs)
