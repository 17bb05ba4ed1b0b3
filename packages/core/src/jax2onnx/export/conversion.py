"""``to_onnx``, the front door: check every argument once, then run the stages through an
:class:`~jax2onnx.export.program.ExportProgram` (the public staged API front-ends use too).

    options = ExportOptions.check(...)                  export/options.py   (every argument)
    export = Export(options, get_registry())            the only registry lookup (program.py)
    traced = trace(export, fn, inputs)   -> Traced      export/trace.py     (ClosedJaxpr, specs)
    model = lower(export, traced)        -> ir.Model    export/lowering.py  (interpreter, builder)
    optimize(export, model)                             export/optimize.py  (one PassManager)
    artifact = write(export, model)      -> Artifact    export/write.py     (proto/file, external data)
    verify(export, traced, artifact)     -> ExportReport export/verify.py   (verify=True)
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import onnx
import onnx_ir as ir

from ..errors import InputSpecError
from ..precision import Precision
from ..targets import DEFAULT_TARGET
from ..verification.greedy import GreedyCheck
from ..verification.options import Verify
from .options import ExportOptions
from .program import ExportProgram


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
    verify: bool | GreedyCheck | Verify = False,
    precision: str | Precision = "float32",
    target: Any = DEFAULT_TARGET,
    progress: bool | None = None,
    max_pool_nan_guard: bool = True,
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
            the weights exceed protobuf's 2 GB limit, and at any size for weights read only as
            they are written (:class:`~jax2onnx.Weights`, arrays on accelerators or sharded), so
            those are written one tensor at a time and never gathered into one proto.
        verify: after exporting (and writing ``output_path``), run :func:`jax2onnx.verify`: the
            function in JAX and the model in onnxruntime on random inputs, two sizes per symbolic
            dim, tolerances by output dtype. A mismatch raises
            :class:`jax2onnx.VerificationError` naming each failing output with its error
            figures (a written file is kept, for inspection). Needs onnxruntime
            (``pip install 'jax2onnx-core[runtime]'``), checked before converting. With
            :class:`~jax2onnx.Weights` inputs the JAX side reads every weight into memory.
            JAX's side runs where the parameters live, at highest matmul precision, so float32 is
            float32 on a TPU or GPU too; ``verify=jax2onnx.Verify(reference="accelerator-default")``
            compares with the accelerator's default numbers instead (bfloat16 passes on a TPU),
            within tolerances that fit them. The report names the device and precision JAX ran at.

        precision: ``"float32"`` (as traced), ``"float16"``, ``"bfloat16"`` (weights stored and
            computed in the 16-bit type, inputs/outputs float32, sensitive work float32), ``"int8"``
            (dynamically quantized weight matmuls), ``"int4"`` (weight-only MatMulNBits), or a
            :class:`jax2onnx.Precision` with options (``keep_io_types``, ``block_size``,
            ``symmetric``, ``exclude``, ...). See the guide's "Precision" page and
            :mod:`jax2onnx.precision`; ``verify=True`` then judges the outputs by the precision's
            cosine floor and reports bytes by dtype. ``verify=jax2onnx.GreedyCheck(...)``: a causal
            LM's report also holds its greedy-token agreement with float32 and fails under 90%.
        target: the runtime the graph is tuned for, a name or a :class:`jax2onnx.targets.Target`
            (:mod:`jax2onnx.targets`): ``"onnx"`` (standard ONNX; ``"generic"`` is its older name),
            ``"onnxruntime"`` (also its com.microsoft contrib ops where not slower),
            ``"tensorrt"`` (within TensorRT 10's ONNX parser: opset <= 20, no float64, no DFT; an
            export it cannot take fails naming the op), ``"web"`` (``export_mode="web"``). The
            rewrites applied are counted in the model's ``jax2onnx:rewrites`` metadata.
        progress: report the stages and the tensors and bytes written on stderr
            (:mod:`jax2onnx.progress`): ``None`` (default) a bar on a terminal once the export has
            run a couple of seconds, nothing otherwise; ``True`` a bar on a terminal, plain lines
            otherwise (a log); ``False`` nothing.
        max_pool_nan_guard: ``True`` (default): a float max pool whose input may hold NaN pools a
            window holding NaN to NaN, as JAX does, through an ``If`` on ``IsNaN(ReduceSum(x))``
            (onnxruntime's MaxPool drops NaN); its cost is one read of the pool's input. ``False``:
            the bare ``MaxPool``, with the runtime's NaN handling. Inputs that cannot hold NaN
            (integers, an integer input cast to float, an embedding's rows) get the bare op either way.

    Returns:
        The ``onnx.ModelProto``, the ``onnx_ir.Model`` or the written path (``return_mode``).
    """
    if inputs is None:
        raise InputSpecError(
            "to_onnx(fn, inputs): inputs is missing (None); pass one spec per positional argument of fn, "
            "e.g. to_onnx(fn, [('B', 30)]), or [] for a function without arguments"
        )
    options = ExportOptions.check(
        inputs=inputs, input_params=input_params, model_name=model_name, opset=opset,
        enable_double_precision=enable_double_precision, record_primitive_calls_file=record_primitive_calls_file,
        return_mode=return_mode, output_path=output_path, inputs_as_nchw=inputs_as_nchw,
        outputs_as_nchw=outputs_as_nchw, input_names=input_names, output_names=output_names,
        export_mode=export_mode, normalization_mode=normalization_mode, optimize=optimize,
        external_data=external_data, verify=verify, precision=precision, target=target, progress=progress,
        max_pool_nan_guard=max_pool_nan_guard,
    )
    return ExportProgram.from_options(fn, inputs, options).result()


__all__ = ["to_onnx"]
