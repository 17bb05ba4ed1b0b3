"""Stage ``lower``: a :class:`~jax2onnx.export.trace.Traced` jaxpr → an ``onnx_ir.Model``.

One linear walk of the interpreter over the equations with the export's lowerings (the registry's,
less the normalization ones under ``normalization_mode="force_decomposed"``); each node is
legalized to the export opset as it is emitted (``ir/legalize.py``).
"""

from __future__ import annotations

from typing import Any

import onnx_ir as ir

from .._version import __version__
from ..compat import x64_enabled
from ..errors import UnsupportedPrimitiveError
from ..ir import complex_io, opsets
from ..ir.builder import ModelBuilder, set_aval
from ..lower import legacy_plugins
from ..lower.interpreter import Interpreter
from ..lower.unsupported import all_unsupported
from ..plugin import marks_active
from . import api_compat
from .options import Export
from .trace import Traced


def lower(export: Export, traced: Traced) -> ir.Model:
    options, registry = export.options, export.registry
    closed, parsed, bound = traced.closed, traced.parsed, traced.bound
    if options.target.check_trace is not None:  # what the target cannot run, named at the user's line
        options.target.check_trace(closed)
    # 0.17-style plugins registered through jax2onnx.plugins.plugin_system join (and win over) the packs'
    lowerings = api_compat.select_lowerings(legacy_plugins.lowerings_with_legacy(registry.lowerings()), options)
    installed = [p.name for p in registry.packs if p.error is None]
    interp = Interpreter(lowerings, installed, registry.pack_hint, options=options, library_memo=traced.library_memo)
    mb = ModelBuilder(options.opset)
    # Lowerings may trace again (ctx.lower_function) and read the trace's marked calls.
    with x64_enabled(options.enable_double_precision), marks_active(resume=traced.marks):
        n_plain = traced.n_plain
        graph_inputs = [mb.main.add_input(n, a) for n, a in zip(parsed.names[:n_plain], parsed.args[:n_plain])]
        if bound is not None:
            graph_inputs += [mb.weight(leaf, a) for leaf, a in zip(bound.leaves, parsed.args[n_plain:])]
        graph_inputs += [mb.main.add_input(n, a) for n, a in parsed.params.items()]
        try:
            outs = interp.lower_jaxpr(mb.main, closed, graph_inputs)
        except UnsupportedPrimitiveError as exc:  # name every unsupported primitive, not just the first
            failed = {p.name: p.error for p in registry.packs if p.error}  # "reinstall", not "pip install"
            raise (all_unsupported(closed, lowerings, installed, failed, registry.pack_hint) or exc) from None
        outs, avals = traced.scalars.merge(mb.main, outs, [v.aval for v in closed.jaxpr.outvars])
        model = _assemble(mb, outs, avals, options.model_name)
        # complex inputs/outputs are (real, imag) pairs: say which, for the report and the runners
        complex_io.record(model, [*parsed.args, *parsed.params.values()], avals)
        return model


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
        # Contrib ops a pack emits (com.microsoft.GroupQueryAttention) need their domain imported too.
        opset_imports={"": mb.opset, **{n.domain: 1 for n in scope.nodes if n.domain not in ("", "ai.onnx")},
                       **{fn.domain: 1 for fn in mb.functions.values()}},
        name=model_name,
    )
    return ir.Model(
        graph,
        ir_version=opsets.ir_version(mb.opset),
        producer_name="jax2onnx",
        producer_version=__version__,
        functions=list(mb.functions.values()),
    )
