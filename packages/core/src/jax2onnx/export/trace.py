"""Stage ``trace``: the user's function and input specs → one ``ClosedJaxpr`` (:class:`Traced`).

Weights specs are bound as trailing arguments, a pack may adapt the callable (an NNX module with
state), the packs' patches are active for this thread only, and marked calls (fusion regions)
are recorded in a mark registry that :func:`jax2onnx.export.lowering.lower` reads back.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import jax
import numpy as np

from ..compat import export_trace_context, make_jaxpr, x64_enabled
from ..errors import Jax2OnnxError, UserFunctionError, explain_trace_error
from ..lower import legacy_plugins
from ..lower.library import LibraryMemo
from ..lower.scoped import scoped_overrides
from ..plugin import marks_active
from . import api_compat, weights
from .options import Export
from .scalar_outputs import ScalarOutputs, is_int_scalar
from .specs import ParsedInputs, parse_inputs


@dataclasses.dataclass(frozen=True)
class Traced:
    """What the trace produced, and what later stages need from the call."""

    closed: Any  #: the ClosedJaxpr, inputs: plain inputs, weight leaves, input_params
    out_tree: Any  #: the ``jax.ShapeDtypeStruct`` leaves JAX traced (the function's array outputs)
    parsed: ParsedInputs  #: the input specs as traced (names, symbols, params)
    bound: weights.BoundWeights | None  #: ``Weights`` inputs, read at write time
    marks: Any  #: the mark registry of this trace's marked calls (``plugin.marks_active(resume=)``)
    fn: Callable[..., Any]  #: the user's function, as given (the verify stage's reference)
    inputs: tuple[Any, ...]  #: the user's input specs, as given
    #: the Python ints / symbolic dims among the function's outputs, int32 (int64 in x64) scalar outputs at assembly
    scalars: ScalarOutputs = dataclasses.field(default_factory=ScalarOutputs)
    #: what lowering decided about the trace's library calls: the one mutable part, a cache that
    #: every export of this trace (other opsets, targets) reads instead of deciding again
    library_memo: LibraryMemo = dataclasses.field(default_factory=LibraryMemo, compare=False, repr=False)

    @property
    def n_plain(self) -> int:
        """How many graph inputs are plain inputs (the rest of ``parsed.args`` are weight leaves)."""
        return self.bound.n_plain if self.bound is not None else len(self.parsed.args)


def trace(export: Export, fn: Callable[..., Any], inputs: Sequence[Any]) -> Traced:
    options = export.options
    registry = export.registry
    user_fn, user_inputs = fn, tuple(inputs)
    bound = weights.bind(fn, inputs)  # Weights specs: parameters read from a source at write time
    if bound is not None:
        fn, inputs = bound.fn, bound.inputs
    with x64_enabled(options.enable_double_precision):
        parsed = parse_inputs(fn, inputs, options.input_params, options.enable_double_precision)
        api_compat.check_input_layouts(options, parsed.args)
        # Instance overrides go in before the pack adapters run: an NNX adapter splits the model, and
        # its graph definition must record the overriding subclass for the copies built in the trace.
        with marks_active(adapt=registry.adapt) as marks, scoped_overrides(
            registry.module_patches(), roots=(user_fn, fn, user_inputs)
        ):
            with legacy_plugins.legacy_patched():  # 0.17 plugins' patch_info: for the trace's duration only
                closed, out_tree, scalars = _make_jaxpr(registry.adapt(fn) or fn, parsed)
    api_compat.check_output_layouts(options, [v.aval for v in closed.jaxpr.outvars])
    if options.record_primitive_calls_file is not None:
        api_compat.record_primitive_calls(closed, options.record_primitive_calls_file)
    return Traced(closed, out_tree, parsed, bound, marks, user_fn, user_inputs, scalars)


def _make_jaxpr(fn: Callable[..., Any], parsed: ParsedInputs) -> tuple[Any, Any, ScalarOutputs]:
    """The function's ClosedJaxpr over its array outputs, and the integer scalars (Python ints,
    symbolic dims) it returns beside them, which become int32 outputs, int64 in x64 (``scalar_outputs.py``)."""
    n_args = len(parsed.args)
    param_names = list(parsed.params)
    scalars = ScalarOutputs()

    def flat_fn(*flat: Any) -> Any:
        kwargs = dict(zip(param_names, flat[n_args:]))
        out = fn(*flat[:n_args], **kwargs)
        _check_outputs(out)
        return scalars.take(out)

    specs = list(parsed.args) + list(parsed.params.values())
    with export_trace_context():
        try:
            closed, out_shape = make_jaxpr(flat_fn, specs)
        except Jax2OnnxError:
            raise
        except Exception as exc:
            raise _explain_trace_error(exc, parsed) from exc
    leaves = jax.tree_util.tree_leaves(out_shape)
    for leaf in leaves:
        if not isinstance(leaf, jax.ShapeDtypeStruct):
            raise UserFunctionError(f"the function returned a {type(leaf).__name__} ({leaf!r}); it must return arrays (or a pytree of arrays)")
    if not closed.jaxpr.outvars and not scalars.scalars:
        raise UserFunctionError("the function returned no arrays; it must return at least one array")
    return closed, out_shape, scalars


def _check_outputs(out: Any) -> None:
    """Name the first returned leaf that is not an array or a number (``None`` is an empty subtree
    and passes), before JAX's own error would blame jax2onnx's wrapper function."""
    for path, leaf in jax.tree_util.tree_flatten_with_path(out)[0]:
        if isinstance(leaf, (jax.Array, np.ndarray, np.generic, bool, int, float, complex)) or is_int_scalar(leaf):
            continue
        where = f"output {jax.tree_util.keystr(path)}" if path else "the output"
        raise UserFunctionError(
            f"{where} of the function is a {type(leaf).__name__} ({repr(leaf)[:80]}); an exported function must "
            "return arrays (or a pytree of arrays): convert it with jnp.asarray(...) or leave it out of the return value"
        )


def _explain_trace_error(exc: Exception, parsed: ParsedInputs) -> Exception:
    names = [*parsed.names, *parsed.params]
    avals = [*parsed.args, *parsed.params.values()]
    return explain_trace_error(exc, names, avals, has_symbols=bool(parsed.symbols))
