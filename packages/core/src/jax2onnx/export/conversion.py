"""``to_onnx``: trace → lower → passes → ModelProto (and an atomic file write)."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import numpy as np
import onnx
import onnx_ir as ir

from .. import compat
from .._version import __version__
from ..errors import (
    InputSpecError,
    Jax2OnnxError,
    UnsupportedPrimitiveError,
    UserFunctionError,
    explain_trace_error,
    require_onnxruntime,
)
from ..ir import opsets
from ..ir.builder import ModelBuilder, set_aval
from ..lower.interpreter import Interpreter
from ..lower.patching import applied_patches
from ..lower.registry import get_registry
from ..lower.unsupported import all_unsupported
from ..plugin import Patch, marks_active
from . import api_compat, weights
from .saving import save_atomically, save_with_external_data
from .specs import check_output_path, parse_inputs


def to_onnx(
    fn: Callable[..., Any],
    inputs: Sequence[Any],
    input_params: Mapping[str, Any] | None = None,
    model_name: str = "jax_model",
    opset: int = 23,
    *,
    enable_double_precision: bool = False,
    record_primitive_calls_file: str | os.PathLike[str] | None = None,
    return_mode: str = "proto",
    output_path: str | os.PathLike[str] | None = None,
    inputs_as_nchw: Sequence[int] | None = None,
    outputs_as_nchw: Sequence[int] | None = None,
    input_names: Sequence[str] | None = None,
    output_names: Sequence[str] | None = None,
    export_mode: str = "standard",
    normalization_mode: str = "auto",
    optimize: bool = True,
    external_data: bool | None = None,
    verify: bool = False,
) -> onnx.ModelProto | ir.Model | str:
    """Convert a JAX callable to ONNX.

    The signature up to ``normalization_mode`` is the published jax2onnx 0.17's (same positional
    order, same keywords, same meaning; see :mod:`jax2onnx.export.api_compat`), so code written for it,
    such as Keras 3's ``model.export(..., format="onnx")``, calls this unchanged.

    Args:
        fn: any JAX callable: a function, a Flax NNX module, a ``jax.jit``-wrapped function.
        inputs: one spec per positional argument: a shape tuple (``("B", 30)``; strings are
            symbolic dims, the same string is the same dim everywhere), a ``jax.ShapeDtypeStruct``
            (its shape may hold strings), or a concrete array (its shape and dtype are used).
        input_params: keyword arguments that become named runtime inputs of the graph, typed
            after the given defaults (``{"deterministic": True}`` → a bool input).
        model_name: the ONNX graph name.
        opset: the default-domain opset, from 13 to the newest the installed ``onnx`` knows (23 by
            default). Each op is emitted in its form at this opset; a fused op that does not exist
            yet (LayerNormalization before 17, Gelu before 20, Attention and RMSNormalization
            before 23) is decomposed; an op with no form there (DFT before 17) is an
            ``OpUnavailableError`` naming the opset that has it (docs/opsets.md).
        enable_double_precision: trace with float64 (x64 on only for the export, then restored).
        record_primitive_calls_file: write every primitive of the trace (params, shapes, source
            line) to this file as a JSON list.
        return_mode: ``"proto"`` returns the ``onnx.ModelProto``, ``"ir"`` the ``onnx_ir.Model``,
            ``"file"`` writes ``output_path`` and returns that path.
        output_path: also write the model here, atomically: a failed export leaves no file.
        inputs_as_nchw: indices of rank-4 inputs the graph takes as (N, C, H, W) while the
            function (and its spec) works in (N, H, W, C).
        outputs_as_nchw: indices of rank-4 outputs the graph returns as (N, C, H, W).
        input_names: the graph input names, one per entry of ``inputs`` (default: the
            function's parameter names).
        output_names: the graph output names, one per output array (default: ``output``,
            ``output_0``, ...).
        export_mode: ``"standard"`` or ``"web"`` (one self-contained file: never external data).
        normalization_mode: ``"auto"``/``"prefer_native"``: normalization layers become the
            native ONNX op where it is exact; ``"force_decomposed"``: their arithmetic instead.
        optimize: run the graph passes (dead code, constant folding, ...).
        external_data: store weights in ``<output_path>.<hash>.data`` beside the model (streamed,
            never held twice; the model and its weights are replaced as a pair, so a crash leaves
            the old pair or the new one, see :mod:`jax2onnx.export.saving`). ``None``: automatically when
            the weights exceed protobuf's 2 GB limit.
        verify: after exporting (and writing ``output_path``), run :func:`jax2onnx.verify`: the
            function in JAX and the model in onnxruntime on random inputs, two sizes per symbolic
            dim, tolerances by output dtype. A mismatch raises
            :class:`jax2onnx.VerificationError` naming each failing output with its error
            figures (a written file is kept, for inspection). Needs onnxruntime
            (``pip install 'jax2onnx-core[runtime]'``), checked before converting. With
            :class:`~jax2onnx.Weights` inputs the JAX side reads every weight into memory.

    Returns:
        The ``onnx.ModelProto``, the ``onnx_ir.Model`` or the written path (``return_mode``).
    """
    opset = api_compat.check_opset(opset)
    options = api_compat.check_options(
        n_inputs=len(inputs) if isinstance(inputs, Sequence) and not isinstance(inputs, (str, bytes)) else None,
        input_params=input_params, return_mode=return_mode, output_path=output_path, input_names=input_names,
        output_names=output_names, inputs_as_nchw=inputs_as_nchw, outputs_as_nchw=outputs_as_nchw,
        record_primitive_calls_file=record_primitive_calls_file, export_mode=export_mode,
        normalization_mode=normalization_mode,
    )
    if options.output_path is not None:
        check_output_path(options.output_path)  # before minutes of tracing, not after them
    if not isinstance(verify, bool):
        raise api_compat.OptionTypeError(f"verify must be True or False, got {type(verify).__name__} {verify!r}")
    if verify:
        require_onnxruntime("to_onnx(..., verify=True)")  # before converting, not after it
    user_fn, user_inputs = fn, list(inputs)
    if options.export_mode == "web":
        if external_data:
            raise InputSpecError("export_mode='web' writes one self-contained file; drop external_data=True")
        external_data = False
    registry = get_registry()
    bound = weights.bind(fn, inputs)  # Weights specs: parameters read from a source at write time
    if bound is not None:
        fn, inputs = bound.fn, bound.inputs
    with compat.x64_enabled(enable_double_precision):
        parsed = parse_inputs(fn, inputs, input_params, enable_double_precision)
        parsed.args = api_compat.nchw_specs(parsed.args, options)
        with marks_active(adapt=registry.adapt):
            traced = api_compat.with_layouts(registry.adapt(fn) or fn, options)
            closed, out_tree = _trace(traced, parsed, registry.patches())
            if options.record_primitive_calls_file is not None:
                api_compat.record_primitive_calls(closed, options.record_primitive_calls_file)
            lowerings = api_compat.select_lowerings(registry.lowerings(), options)
            installed = [p.name for p in registry.packs if p.error is None]
            interp = Interpreter(lowerings, installed)
            mb = ModelBuilder(opset)
            n_plain = bound.n_plain if bound is not None else len(parsed.args)
            graph_inputs = [mb.main.add_input(n, a) for n, a in zip(parsed.names[:n_plain], parsed.args[:n_plain])]
            if bound is not None:
                graph_inputs += [mb.weight(leaf, a) for leaf, a in zip(bound.leaves, parsed.args[n_plain:])]
            graph_inputs += [mb.main.add_input(n, a) for n, a in parsed.params.items()]
            try:
                outs = interp.lower_jaxpr(mb.main, closed, graph_inputs)
            except UnsupportedPrimitiveError as exc:  # name every unsupported primitive, not just the first
                failed = {p.name: p.error for p in registry.packs if p.error}  # "reinstall", not "pip install"
                raise (all_unsupported(closed, lowerings, installed, failed) or exc) from None
            model = _assemble(mb, outs, [v.aval for v in closed.jaxpr.outvars], model_name)
    if optimize:
        from ..passes import default_passes

        default_passes()(model)
    api_compat.apply_io_names(model, options)
    _infer_intermediate_shapes(model)
    # The oldest IR version the opset and the dtypes allow: the runtimes that can run it can load it.
    model.ir_version = opsets.check_dtypes(opsets.element_types(model), opset)
    output_path = options.output_path
    weight_bytes = sum(v.const_value.nbytes for v in model.graph.initializers.values() if v.const_value is not None)
    too_big = weight_bytes > EXTERNAL_DATA_AUTO_BYTES
    requested_external = external_data
    if external_data is None:
        external_data = too_big
    if not external_data and too_big and options.export_mode == "web" and output_path is not None:
        raise InputSpecError(
            f"export_mode='web' needs one self-contained file, but the weights take {weight_bytes / 2**30:.2f} GiB, "
            "over protobuf's 2 GB limit; use export_mode='standard' (weights beside the model in <path>.<hash>.data)"
        )
    if not external_data and weight_bytes >= PROTOBUF_LIMIT_BYTES:
        raise InputSpecError(
            f"external_data=False, but the weights take {weight_bytes / 2**30:.2f} GiB: one self-contained ONNX file "
            "(a single protobuf message) holds at most 2 GB. Pass external_data=True (or leave it None) with "
            "output_path=... so the weights are written beside the model"
        )
    result: onnx.ModelProto | ir.Model | str
    proto: onnx.ModelProto | None = None
    if options.return_mode == "ir":
        if output_path is not None:
            if external_data:
                save_with_external_data(model, output_path)
            else:
                save_atomically(ir.to_proto(model), output_path)
        result = model
    elif external_data:
        if output_path is None:
            why = ("external_data=True writes the weights into a file beside the model" if requested_external else
                   f"the model's weights take {weight_bytes / 2**30:.2f} GiB, over protobuf's 2 GB limit for one message")
            raise InputSpecError(f"{why}: pass output_path=... so they can be written as external data beside the model")
        proto = save_with_external_data(model, output_path)
        result = output_path if options.return_mode == "file" else proto
    else:
        proto = ir.to_proto(model)
        if output_path is not None:
            save_atomically(proto, output_path)
        result = output_path if options.return_mode == "file" else proto
    if verify:
        # The written file when there is one (onnxruntime memory-maps its external data), else the proto.
        target: Any = output_path if output_path is not None else proto if proto is not None else ir.to_proto(model)
        _verify_export(user_fn, user_inputs, input_params, target, options, bound, enable_double_precision)
    return result


def _verify_export(
    fn: Callable[..., Any],
    inputs: Sequence[Any],
    input_params: Mapping[str, Any] | None,
    target: onnx.ModelProto | str,
    options: api_compat.ExportOptions,
    bound: weights.BoundWeights | None,
    double: bool,
) -> None:
    """``verify=True``: compare the export with ``fn`` as the graph sees it (NCHW layouts, weights
    as initializers) and raise :class:`VerificationError` naming each failing output."""
    from ..verification.report import VerificationError
    from ..verification.report import verify as run_verify

    reference = fn
    specs = list(inputs)
    if bound is not None:  # the graph takes only the plain inputs; the JAX side needs the weights' values
        loaded = [np.asarray(leaf.source.load(leaf.name)).astype(leaf.spec.dtype) for leaf in bound.leaves]
        with_weights = bound.fn

        def reference(*args: Any, **kwargs: Any) -> Any:
            return with_weights(*args, *loaded, **kwargs)

        specs = list(bound.inputs[: bound.n_plain])
    reference = api_compat.with_layouts(reference, options)
    specs = [_as_nchw(s) if i in options.inputs_as_nchw else s for i, s in enumerate(specs)]
    report = run_verify(reference, target, specs, input_params, enable_double_precision=double)
    if not report:
        where = f" (the model was written to {target} and is kept for inspection)" if isinstance(target, str) else ""
        raise VerificationError(
            f"to_onnx(..., verify=True): the exported model does not match the JAX function{where}:\n"
            f"{report.failures()}\ninputs tried: {report.inputs_tried()}. A lowering computes something "
            "else than JAX here; jax2onnx.verify(fn, model, inputs).print() shows the full report.",
            report,
        )


def _as_nchw(spec: Any) -> Any:
    """An NHWC input spec (shape tuple, ShapeDtypeStruct or array) as the NCHW graph input takes it."""
    from .api_compat import NHWC_TO_NCHW

    if isinstance(spec, (tuple, list)):
        return tuple(spec[p] for p in NHWC_TO_NCHW)
    if isinstance(spec, jax.ShapeDtypeStruct):
        return jax.ShapeDtypeStruct(tuple(spec.shape[p] for p in NHWC_TO_NCHW), spec.dtype)
    return np.transpose(np.asarray(spec), NHWC_TO_NCHW)


def _trace(fn: Callable[..., Any], parsed: Any, patches: Sequence[Patch]) -> tuple[Any, Any]:
    n_args = len(parsed.args)
    param_names = list(parsed.params)

    def flat_fn(*flat: Any) -> Any:
        kwargs = dict(zip(param_names, flat[n_args:]))
        out = fn(*flat[:n_args], **kwargs)
        _check_outputs(out)
        return out

    specs = list(parsed.args) + list(parsed.params.values())
    with applied_patches(patches):
        try:
            closed, out_shape = compat.make_jaxpr(flat_fn, specs)
        except Jax2OnnxError:
            raise
        except Exception as exc:
            raise _explain_trace_error(exc, parsed) from exc
    leaves = jax.tree_util.tree_leaves(out_shape)
    for leaf in leaves:
        if not isinstance(leaf, jax.ShapeDtypeStruct):
            raise UserFunctionError(f"the function returned a {type(leaf).__name__} ({leaf!r}); it must return arrays (or a pytree of arrays)")
    if not closed.jaxpr.outvars:
        raise UserFunctionError("the function returned no arrays; it must return at least one array")
    return closed, out_shape


def _check_outputs(out: Any) -> None:
    """Name the first returned leaf that is not an array or a number (``None`` is an empty subtree
    and passes), before JAX's own error would blame jax2onnx's wrapper function."""
    for path, leaf in jax.tree_util.tree_flatten_with_path(out)[0]:
        if isinstance(leaf, (jax.Array, np.ndarray, np.generic, bool, int, float, complex)):
            continue
        where = f"output {jax.tree_util.keystr(path)}" if path else "the output"
        raise UserFunctionError(
            f"{where} of the function is a {type(leaf).__name__} ({repr(leaf)[:80]}); an exported function must "
            "return arrays (or a pytree of arrays): convert it with jnp.asarray(...) or leave it out of the return value"
        )


def _explain_trace_error(exc: Exception, parsed: Any) -> Exception:
    names = [*parsed.names, *parsed.params]
    avals = [*parsed.args, *parsed.params.values()]
    return explain_trace_error(exc, names, avals, has_symbols=bool(parsed.symbols))


def _assemble(mb: ModelBuilder, outs: list[ir.Value], avals: list[Any], model_name: str) -> ir.Model:
    scope = mb.main
    final = []
    used: set[int] = set()
    input_ids = {id(v) for v in scope.inputs}
    for i, (v, aval) in enumerate(zip(outs, avals)):
        if id(v) in used or id(v) in input_ids or v.producer() is None:
            v = scope.op.Identity(v)
        used.add(id(v))
        v.name = mb.names.fresh(f"output_{i}") if len(outs) > 1 else mb.names.fresh("output")
        set_aval(v, aval)
        final.append(v)
    graph = ir.Graph(
        scope.inputs,
        final,
        nodes=scope.nodes,
        initializers=list(mb.initializers.values()),
        opset_imports={"": mb.opset, **{fn.domain: 1 for fn in mb.functions.values()}},
        name=model_name,
    )
    return ir.Model(
        graph,
        ir_version=opsets.ir_version(mb.opset),
        producer_name="jax2onnx",
        producer_version=__version__,
        functions=list(mb.functions.values()),
    )


def _infer_intermediate_shapes(model: ir.Model) -> None:
    """Fill shapes of intermediates (Netron shows them on every edge), for every save path.

    onnx_ir's pass serializes the graph with large weights detached, so inference never copies them
    (it used to cost two full copies of the model and most of the conversion time on large models).
    No data propagation: onnx's propagates values through every op and held ~1.4 GB extra for one
    float32 erf_inv over a static 10**5 vector (a 10**6 random.normal export was killed), while
    the shapes it adds on our graphs are the ones the builder already knows.
    """
    from onnx_ir.passes.common import ShapeInferencePass

    try:
        ShapeInferencePass(check_type=False, strict_mode=False, data_prop=False)(model)
    except Exception:  # noqa: BLE001 - shapes are a courtesy, never a reason to fail an export
        pass


#: Above this many bytes of weights, a model goes to external data automatically (protobuf caps one
#: message at 2 GB, and the graph itself needs room too).
EXTERNAL_DATA_AUTO_BYTES = 1_800_000_000
#: Protobuf's hard limit for one serialized message (one self-contained ONNX file).
PROTOBUF_LIMIT_BYTES = 2**31


__all__ = ["to_onnx", "save_atomically", "applied_patches", "InputSpecError"]
