"""Stage ``optimize``: the lowered ``onnx_ir.Model`` → the model to write, by ONE ``PassManager``.

The order, and where new passes plug in:

1. the NCHW adapters (``inputs_as_nchw``/``outputs_as_nchw``): first, so the graph passes cancel
   their Transposes against a channels-first op's own;
2. the graph passes (:func:`jax2onnx.passes.default_passes`) when ``optimize=True``;
3. ``REWRITE SLOT``: passes that change what the graph computes in a chosen way (``precision=``)
   go here, after the generic clean-up and before the names are final;
   ``precision=`` (:class:`PrecisionPass`) runs shape inference first: it plans from every value's dtype;
   the ``target=`` rules are the rewrite stage inside the graph passes (:mod:`jax2onnx.passes.rewrite`),
   so the passes after it (rolls, onnxruntime's missing kernels, dead code) see the rewritten graph;
   then a front-end's own rewrites (``ExportOptions.rewrite_passes``, each built here from the
   options: the LLM front-end's residual-add + RMS norm fusion), after precision so they see the
   final dtypes, and before the names and the validation so their output is named and checked;
   then the max pools' NaN guards become one check of the model's inputs where a bound allows
   (:mod:`jax2onnx.passes.nan_guard_hoist`: the pools run bare, a guarded copy of the graph under
   one ``If`` at the outputs), on the final ops;
4. the requested I/O names (``input_names``/``output_names``), after every pass that may replace
   an output value;
5. finishing: shapes of intermediates (a courtesy, never a reason to fail), and the oldest IR
   version the opset and the dtypes allow (``ir/opsets.py``: an opset/dtype mismatch is an error);
6. ``VALIDATION SLOT``: passes that only check the finished model go last: the
   :class:`~jax2onnx.verification.validate.ValidationPass` (checker full check, strict shape
   inference, no unused initializers; an internal ``InvalidModelError`` before anything is written),
   then the ``TargetCheckPass`` (the target's op set).

Legalization to the export opset is per node, at emission (``ir/legalize.py``); the one
graph-level rule (the IR version) is the ``IrVersionPass`` here.
"""

from __future__ import annotations

import onnx
import onnx_ir as ir

from ..errors import InputSpecError, Jax2OnnxError
from ..ir import opsets
from ..ir.shapes import infer_and_merge
from ..passes import NanGuardHoistPass, default_passes
from ..precision import Precision, apply_precision
from ..targets import Target
from ..verification.validate import ValidationPass
from . import api_compat
from .options import Export, ExportOptions, PassFactory


def optimize(export: Export, model: ir.Model) -> ir.Model:
    """Run the export's passes on ``model`` in place; returns it."""
    try:
        pass_manager(export)(model)
    except ir.passes.PassError as exc:
        # onnx_ir wraps what a pass raises (once per nested manager); our own errors reach the
        # user as they were raised, naming the problem and the fix.
        cause: BaseException | None = exc
        while isinstance(cause, ir.passes.PassError):
            cause = cause.__cause__
        if isinstance(cause, Jax2OnnxError):
            raise cause from None
        raise
    return model


def pass_manager(export: Export) -> ir.passes.PassManager:
    options = export.options
    passes: list[ir.passes.PassBase] = [api_compat.NchwAdapterPass(options)]
    if options.optimize:
        passes.append(default_passes(options.target))  # its rewrite stage holds the target's rules
    # REWRITE SLOT (target=, precision=, a front-end's rewrite_passes)
    if options.precision.kind != "float32":
        # the plan reads every value's dtype, and an If's outputs are typed only by inference
        passes += [IntermediateShapesPass(), PrecisionPass(options.precision, options.target)]
    passes += [_built(factory, options) for factory in options.rewrite_passes]
    if options.optimize:
        passes.append(NanGuardHoistPass())  # on the final ops and dtypes, before the names
    passes.append(api_compat.IoNamesPass(options))
    final_shapes = IntermediateShapesPass(keep_proto=True)
    passes += [final_shapes, IrVersionPass(options.opset)]
    # VALIDATION SLOT (the checker reads the proto the shapes were inferred on: the model as it is)
    passes.append(ValidationPass(final_shapes.take_proto))
    passes.append(TargetCheckPass(options.target))
    return ir.passes.PassManager(passes)


def _built(factory: PassFactory, options: ExportOptions) -> ir.passes.PassBase:
    built = factory(options)
    if not isinstance(built, ir.passes.PassBase):
        raise InputSpecError(
            f"rewrite_passes: {factory!r} returned {type(built).__name__}, not an onnx_ir pass; "
            "a factory takes the ExportOptions and returns a new onnx_ir.passes.PassBase (e.g. an InPlacePass)"
        )
    return built


class PrecisionPass(ir.passes.InPlacePass):
    """``precision=float16/bfloat16/int8/int4``: :func:`jax2onnx.precision.apply_precision`."""

    def __init__(self, precision: Precision, target: Target) -> None:
        super().__init__()
        self.precision = precision
        self.target = target  # its kernel table: the float16/bfloat16 plan reads it

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        apply_precision(model, self.precision, self.target)
        return ir.passes.PassResult(model, True)


class TargetCheckPass(ir.passes.InPlacePass):
    """The finished graph within the target's domains and checks (``target="tensorrt"``: TensorRT's
    parser); raises :class:`~jax2onnx.errors.TargetUnsupportedError` naming the op."""

    def __init__(self, target: Target) -> None:
        super().__init__()
        self.target = target

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        self.target.check_model(model)
        return ir.passes.PassResult(model, False)


class IntermediateShapesPass(ir.passes.InPlacePass):
    """Fill shapes of intermediates (Netron shows them on every edge), for every save path.

    Inference runs on a copy without the weights and writes back onto the model's own values
    (:mod:`jax2onnx.ir.shapes`): it never copies them (a full copy used to be most of the conversion
    time on large models).
    No data propagation: onnx's propagates values through every op and held ~1.4 GB extra for one
    float32 erf_inv over a static 10**5 vector (a 10**6 random.normal export was killed), while
    the shapes it adds on our graphs are the ones the builder already knows.

    ``keep_proto``: keep the inferred weightless proto for :meth:`take_proto` (the validation after
    it checks that proto instead of serializing the model again: one serialization of the whole
    graph less per export, a tenth of a large graph's passes).
    """

    def __init__(self, keep_proto: bool = False) -> None:
        super().__init__()
        self.keep_proto = keep_proto
        self._kept: tuple[ir.Model, onnx.ModelProto] | None = None

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        self._kept = None
        try:
            modified, inferred = infer_and_merge(model)
        except Exception:  # noqa: BLE001 - shapes are a courtesy, never a reason to fail an export
            return ir.passes.PassResult(model, False)
        if self.keep_proto:
            self._kept = (model, inferred)
        return ir.passes.PassResult(model, modified)

    def take_proto(self, model: ir.Model) -> onnx.ModelProto | None:
        """The weightless proto of ``model`` as this pass left it, once; only the IR version may have
        changed since (``IrVersionPass`` runs between them), and is taken from the model. None when
        inference failed or ran on another model."""
        kept, self._kept = self._kept, None
        if kept is None or kept[0] is not model:
            return None
        kept[1].ir_version = model.ir_version
        return kept[1]


class IrVersionPass(ir.passes.InPlacePass):
    """The oldest IR version the opset and the dtypes allow: the runtimes that can run it can load it."""

    def __init__(self, opset: int) -> None:
        super().__init__()
        self.opset = opset

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        before = model.ir_version
        model.ir_version = opsets.check_dtypes(opsets.element_types(model), self.opset)
        return ir.passes.PassResult(model, model.ir_version != before)
