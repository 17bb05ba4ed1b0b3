"""One export, stage by stage: the public API that ``to_onnx``, front-ends (``export_causal_lm``) and
power users run the stages through.

    program = ExportProgram(fn, inputs, target="onnxruntime", rewrite_passes=[my_pass])
    program.trace()        # the ClosedJaxpr and the parsed specs    (program.traced)
    program.lower()        # the onnx_ir.Model as lowered             (program.model)
    program.optimize()     # the passes, with the documented slots    (the same model, rewritten)
    program.write()        # proto and/or file, external data         (program.artifact)
    program.verify()       # onnxruntime vs JAX                       (an ExportReport)

Each step runs the ones before it that have not run yet, so ``ExportProgram(...).write()`` is a
whole export; ``export_program(fn, inputs, ...)`` is that, returned as the program (its
``model_proto``, ``save(path)``, ``verify()`` and ``summary()`` at hand). The options are
``to_onnx``'s keywords, checked once before anything runs, plus the two a front-end sets:
``rewrite_passes`` (factories ``options -> onnx_ir pass``, run in the **rewrite slot**: after the
target's rewrite rules and ``precision=``, before the I/O names, validation and the target's final
check) and ``external_data_file`` (the weights file's fixed name beside ``output_path``).

Each stage reports itself to the export's progress reporter (:mod:`jax2onnx.progress`): the one a
front-end opened around its whole export, else the one ``write()`` opens from ``progress=``.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Sequence
from typing import Any

import onnx
import onnx_ir as ir

from ..lower.registry import get_registry
from ..progress import current as current_progress
from ..progress import reporting
from ..verification.report import ExportReport, ModelSummary, summarize
from .lowering import lower
from .optimize import optimize
from .options import Export, ExportOptions, PassFactory, pass_factories
from .specs import check_output_path
from .trace import Traced, trace
from .verify import raise_if_failed
from .verify import verify as verify_export
from .write import Artifact, write


class ExportProgram:
    """The stages of one export over ``fn`` and ``inputs`` (see the module doc), each run at most once.

    Args:
        fn: the JAX callable (a function, an NNX/Linen/Equinox/Keras model, ...).
        inputs: one spec per positional argument, as for ``to_onnx``.
        **options: ``to_onnx``'s keywords (``opset``, ``target``, ``precision``, ``output_path``,
            ``external_data``, ...), plus ``rewrite_passes`` and ``external_data_file``. Checked here;
            a bad one raises before tracing.
        checked: instead of ``**options``, options a caller checked already (``ExportOptions.check``).
    """

    def __init__(self, fn: Callable[..., Any], inputs: Sequence[Any], *, checked: ExportOptions | None = None,
                 **options: Any) -> None:
        if checked is not None and options:
            raise TypeError(f"ExportProgram: give checked= or to_onnx's keywords, not both (got {sorted(options)})")
        self.fn, self.inputs = fn, inputs
        self._given = dict(options) if checked is None else None  # the keywords as given, for with_options
        self.options = checked if checked is not None else ExportOptions.check(inputs=inputs, **options)
        self._export = Export(self.options, get_registry())
        self.traced: Traced | None = None
        self.model: ir.Model | None = None
        self.artifact: Artifact | None = None
        self._optimized = False

    @classmethod
    def from_options(cls, fn: Callable[..., Any], inputs: Sequence[Any], options: ExportOptions) -> ExportProgram:
        """A program with options a caller checked already (``ExportOptions.check``)."""
        return cls(fn, inputs, checked=options)

    def add_rewrite_pass(self, factory: PassFactory) -> ExportProgram:
        """One more pass for the rewrite slot (before :meth:`optimize` runs)."""
        if self._optimized:
            raise RuntimeError("add_rewrite_pass: this program's passes have run already; add it before optimize()")
        added = self.options.rewrite_passes + pass_factories([factory])
        self.options = dataclasses.replace(self.options, rewrite_passes=added)
        self._export = Export(self.options, self._export.registry)
        return self

    #: the options tracing reads (with the function and the inputs); a change to any other one
    #: leaves the trace as it was
    TRACE_OPTIONS = frozenset({"input_params", "enable_double_precision", "record_primitive_calls_file"})

    def with_options(self, **changes: Any) -> ExportProgram:
        """The same function and inputs under this program's keywords with ``changes`` (checked as
        ever), sharing this program's trace where ``changes`` touch no option tracing reads
        (:attr:`TRACE_OPTIONS`): an export at several opsets or targets traces once (the trace
        is read, never changed, by the stages after it).

            first = ExportProgram(fn, specs, opset=23)
            older = first.with_options(opset=17).model_proto
        """
        if self._given is None:
            raise TypeError("with_options: this program was built from checked options (from_options); "
                            "build it from to_onnx's keywords to derive others from it")
        program = ExportProgram(self.fn, self.inputs, **{**self._given, **changes})
        if not self.TRACE_OPTIONS & set(changes):
            self.trace()
            program.traced = self.traced
        return program

    def trace(self) -> ExportProgram:
        if self.traced is None:
            current_progress().stage("trace")
            self.traced = trace(self._export, self.fn, self.inputs)
        return self

    def lower(self) -> ExportProgram:
        if self.model is None:
            self.trace()
            current_progress().stage("lower")
            self.model = lower(self._export, self.traced)
        return self

    def optimize(self) -> ExportProgram:
        if not self._optimized:
            self.lower()
            current_progress().stage("optimize")
            optimize(self._export, self.model)
            self._optimized = True
        return self

    def write(self) -> ExportProgram:
        """The optimized model as a proto, and as a file where ``output_path`` was given; with
        ``verify=`` in the options, verified too (raising :class:`~jax2onnx.VerificationError`)."""
        if self.artifact is None:
            # the options' progress= reports the stages still to run (an outer reporter, a
            # front-end's around its whole export, stays the one that reports)
            with reporting(self.options.progress):
                self.optimize()
                current_progress().stage("write")
                self.artifact = write(self._export, self.model)
                if self.options.verify:
                    current_progress().stage("verify")
                    raise_if_failed(verify_export(self._export, self.traced, self.artifact), self.artifact, self.traced)
        return self

    def verify(self) -> ExportReport:
        """onnxruntime vs JAX on the written model (writing it first), as the options' ``verify=``
        would; returns the report without raising (``bool(report)`` is the verdict)."""
        self.write()
        asked = self._export if self.options.verify else Export(dataclasses.replace(self.options, verify=True),
                                                                  self._export.registry)
        return verify_export(asked, self.traced, self.artifact)

    def summary(self) -> ModelSummary:
        """The written model's summary without running it (inputs, outputs, ops, parameters, the
        target and its rewrites, the precision): the first section of the report."""
        self.write()
        return summarize(self.artifact.runnable())

    def result(self) -> onnx.ModelProto | ir.Model | str:
        """What ``to_onnx`` returns for the options' ``return_mode``."""
        self.write()
        return self.artifact.result(self.options.return_mode)

    @property
    def model_proto(self) -> onnx.ModelProto:
        self.write()
        return self.artifact.result("proto")

    def save(self, path: str | os.PathLike[str]) -> str:
        """Write the model to ``path`` (atomically; external data beside it where the options ask for
        it or the weights need it); returns the path. A program whose options named ``output_path``
        wrote it already."""
        self.write()
        if self.artifact.path is not None and os.path.abspath(os.fspath(path)) == self.artifact.path:
            return self.artifact.path
        check_output_path(os.fspath(path))
        options = dataclasses.replace(self.options, output_path=os.fspath(path))
        return write(Export(options, self._export.registry), self.model).path


def export_program(fn: Callable[..., Any], inputs: Sequence[Any], **options: Any) -> ExportProgram:
    """Every stage of an export of ``fn`` (as ``to_onnx`` with the same keywords), returned as its
    :class:`ExportProgram`."""
    return ExportProgram(fn, inputs, **options).write()


__all__ = ["ExportProgram", "export_program"]
