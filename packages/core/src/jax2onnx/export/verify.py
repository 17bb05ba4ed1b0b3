"""Stage ``verify`` (``to_onnx(..., verify=True)``): the written :class:`Artifact` against the
user's function as the graph sees it (NCHW layouts, weights as initializers) → an
:class:`~jax2onnx.ExportReport`, by the same engine as :func:`jax2onnx.verify`."""

from __future__ import annotations

from typing import Any

import jax
import numpy as np

from ..compat import is_literal, sub_jaxprs
from ..verification.options import as_verify
from ..verification.report import ExportReport, VerificationError
from ..verification.report import verify as run_verify
from . import api_compat
from .options import Export
from .trace import Traced
from .write import Artifact


def verify(export: Export, traced: Traced, artifact: Artifact) -> ExportReport:
    options = export.options
    reference: Any = traced.fn
    specs = list(traced.inputs)
    bound = traced.bound
    if bound is not None:  # the graph takes only the plain inputs; the JAX side needs the weights' values
        loaded = [np.asarray(leaf.source.load(leaf.name)).astype(leaf.spec.dtype) for leaf in bound.leaves]
        with_weights = bound.fn

        def reference(*args: Any, **kwargs: Any) -> Any:
            return with_weights(*args, *loaded, **kwargs)

        specs = list(bound.inputs[: bound.n_plain])
    reference = api_compat.with_layouts(reference, options)
    specs = [_as_nchw(s) if i in options.inputs_as_nchw else s for i, s in enumerate(specs)]
    how = as_verify(options.verify)
    assert how is not None  # the stage runs only with verify= set
    return run_verify(reference, artifact.runnable(), specs, options.input_params,
                      enable_double_precision=options.enable_double_precision, greedy=how.greedy,
                      reference=how.reference)


def raise_if_failed(report: ExportReport, artifact: Artifact, traced: Traced | None = None) -> None:
    """:class:`VerificationError` naming each failing output (a written file is kept, for inspection),
    and why: a trace that draws random numbers cannot match a new JAX call, whatever the lowerings do;
    a mismatch that vanishes at highest matmul precision is the accelerator's precision, not a lowering."""
    if report:
        return
    where = f" (the model was written to {artifact.path} and is kept for inspection)" if artifact.path is not None else ""
    randomness = random_primitives(traced.closed, traced.n_plain) if traced is not None else []
    if randomness:
        why = (f"The function draws random numbers ({', '.join(randomness)}): training-mode randomness such as "
               "Dropout or an rng stream, so each call of it draws other numbers than the export traced. Export "
               "inference behaviour to compare it: model.eval() for Flax NNX, deterministic=True, or make the "
               "key an input of the function.")
    elif report.recheck is not None and report.recheck.ok:
        why = report.recheck.explanation()
    else:
        why = "A lowering computes something else than JAX here."
        if report.recheck is not None:
            why = f"{report.recheck.explanation()} {why}"
        pinned = pinned_matmul_precisions(traced.closed) if traced is not None else []
        if pinned and report.reference is not None and report.reference.platform != "cpu":
            why = (f"The function pins a matmul precision itself ({', '.join(pinned)}), which the highest-precision "
                   f"reference keeps: on {report.reference.platform} that can be bfloat16 passes, a precision effect "
                   "rather than a lowering. Drop precision= there (or use 'highest') to compare in float32, or "
                   "verify=jax2onnx.Verify(reference='accelerator-default'). Else: " + why)
    if report.reference is not None:
        why = f"Reference: {report.reference}. {why}"
    raise VerificationError(
        f"to_onnx(..., verify=True): the exported model does not match the JAX function{where}:\n"
        f"{report.failures()}\ninputs tried: {report.inputs_tried()}. {why} "
        "jax2onnx.verify(fn, model, inputs).print() shows the full report.",
        report,
    )


#: Primitives that draw random numbers (JAX's key-based PRNG and the stateful XLA ones).
_RANDOM_PRIMITIVES = frozenset({"random_bits", "random_seed", "random_fold_in", "random_split", "threefry2x32",
                                "rng_bit_generator", "rng_uniform"})


def random_primitives(closed: Any, n_inputs: int | None = None) -> list[str]:
    """The random-number primitives ``closed`` (and its nested bodies) uses with a key of its own,
    sorted: those none of the function's inputs reaches. A key passed in as an input draws the same
    numbers in JAX and in the graph (the key's bits are platform independent), so it is not a reason
    for a mismatch; an rng stream or a key made inside the function draws new ones on each call.
    ``n_inputs``: how many leading invars are the user's inputs (the rest are weight leaves, e.g. a
    module's rng state, which the graph holds as a constant); all of them when None."""

    found: set[str] = set()

    def walk(jaxpr: Any, reached: set[Any]) -> None:
        for eqn in (jaxpr.jaxpr if hasattr(jaxpr, "jaxpr") else jaxpr).eqns:
            operands = [not is_literal(v) and v in reached for v in eqn.invars]
            if any(operands):
                reached.update(eqn.outvars)
            elif eqn.primitive.name in _RANDOM_PRIMITIVES:
                found.add(eqn.primitive.name)
            for sub in sub_jaxprs(eqn):
                invars = (sub.jaxpr if hasattr(sub, "jaxpr") else sub).invars
                if len(invars) == len(operands):  # a call: its parameters are the operands, in order
                    walk(sub, {v for v, fed in zip(invars, operands) if fed})
                else:  # a loop/branch body with its own operand layout: all reached, or none
                    walk(sub, set(invars) if any(operands) else set())

    body = closed.jaxpr if hasattr(closed, "jaxpr") else closed
    walk(closed, set(body.invars[:n_inputs] if n_inputs is not None else body.invars))
    return sorted(found)


#: Primitives whose ``precision`` parameter sets the matmul precision, and the settings that are float32.
_MATMUL_PRIMITIVES = frozenset({"dot_general", "conv_general_dilated"})
_FLOAT32_PRECISIONS = frozenset({"HIGHEST", "F32_F32_F32", "F64_F64_F64"})


def pinned_matmul_precisions(closed: Any) -> list[str]:
    """``"<primitive> <precision>"`` for each matmul of ``closed`` (and nested bodies) whose code
    asks for less than float32 (``precision=Precision.DEFAULT``, a bfloat16 algorithm): the
    reference's ``default_matmul_precision("highest")`` reaches only matmuls that leave it unset."""
    found: set[str] = set()

    def walk(jaxpr: Any) -> None:
        for eqn in (jaxpr.jaxpr if hasattr(jaxpr, "jaxpr") else jaxpr).eqns:
            precision = eqn.params.get("precision") if eqn.primitive.name in _MATMUL_PRIMITIVES else None
            if precision is not None:
                names = [getattr(p, "name", str(p)) for p in (precision if isinstance(precision, tuple) else (precision,))]
                if any(name not in _FLOAT32_PRECISIONS for name in names):
                    found.add(f"{eqn.primitive.name} {'/'.join(dict.fromkeys(names))}")
            for sub in sub_jaxprs(eqn):
                walk(sub)

    walk(closed)
    return sorted(found)


def _as_nchw(spec: Any) -> Any:
    """An NHWC input spec (shape tuple, ShapeDtypeStruct or array) as the NCHW graph input takes it."""
    perm = api_compat.NHWC_TO_NCHW
    if isinstance(spec, (tuple, list)):
        return tuple(spec[p] for p in perm)
    if isinstance(spec, jax.ShapeDtypeStruct):
        return jax.ShapeDtypeStruct(tuple(spec.shape[p] for p in perm), spec.dtype)
    return np.transpose(np.asarray(spec), perm)
