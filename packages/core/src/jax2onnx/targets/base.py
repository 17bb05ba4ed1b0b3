"""What a target is: one object that says what a runtime takes, read by every stage.

A :class:`Target` declares the op domains (and, where a domain is only partly taken, the ops) a
runtime runs, the opsets its parser reads, what it refuses before tracing, the rewrite rules it adds
to the common ones, which onnxruntime kernel table the lowerings' dtype facets read, the forms each
``precision=`` takes on it, and its final check of the finished graph. ``to_onnx(target=)``,
``precision=``, the front-ends (``export_causal_lm``) and the CLI (``convert --target``,
``check --target``) all resolve a name through :func:`get_target` and ask the object; none compares
target names. A new target is one module that calls :func:`register_target` (or a pack's entry point
in the ``jax2onnx.targets`` group naming such a module), plus its tests.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ..errors import InputSpecError, TargetUnsupportedError
from ..passes.manager import all_graphs

#: The standard domain under both of its spellings.
STANDARD_DOMAINS = frozenset({"", "ai.onnx"})
#: onnxruntime's contrib ops.
MS_DOMAIN = "com.microsoft"
#: The precision kinds whose form differs per runtime (the float kinds take the same ops everywhere).
QUANT_FORMS = ("int8", "int4", "qdq")
#: The domain each int8/int4 matmul form writes its ops in, and the opset its standard form needs.
_KERNEL_DOMAINS = {"DynamicQuantizeMatMul": MS_DOMAIN, "MatMulInteger": "", "MatMulNBits": MS_DOMAIN,
                   "DequantizeLinear": ""}
_KERNEL_OPSETS = {("int4", "DequantizeLinear"): 21}  # blocked DequantizeLinear and 4-bit tensors


@dataclasses.dataclass(frozen=True)
class Target:
    """One runtime an export can be tuned for (see the module doc).

    Args:
        name: what users pass (``target="onnxruntime"``).
        summary: one line for ``--help``, the docs and errors.
        aliases: older names that resolve to this target (``"generic"`` for ``"onnx"``).
        domains: op domains its graphs may hold (the standard one always).
        opsets: the (lowest, highest) default-domain opset its parser reads, or None for every
            opset ``to_onnx`` writes; an export above the highest is lowered to it.
        export_mode: the ``export_mode`` it implies (``"web"``: one self-contained file), or None.
        rewrites: the rewrite families it adds to the common ones (run after them), as
            ``family(opset)`` factories, usually the :class:`jax2onnx.passes.rules.RuleFamily` classes.
        precision_forms: for ``int8`` and ``int4`` the form the weights take (``"int8"``,
            weight-only: ``"MatMulNBits"`` (com.microsoft, 8-bit) or ``"DequantizeLinear"``
            (standard); ``"int8 dynamic"``, the int8 matmuls of ``activations="dynamic"``:
            ``"DynamicQuantizeMatMul"`` (com.microsoft) or ``"MatMulInteger"`` (standard);
            ``"int4"``: ``"MatMulNBits"`` (com.microsoft) or ``"DequantizeLinear"`` (standard, opset
            21)); a kind missing here is refused before tracing, naming the targets that take it.
        check_trace: refusals read off the traced program before lowering (``fn(closed_jaxpr)``,
            raising :class:`TargetUnsupportedError` at the user's line).
        check_graph: the final check of the finished graph (``fn(model) -> list of findings``,
            one line each); the domains are checked for every target.
    """

    name: str
    summary: str
    aliases: tuple[str, ...] = ()
    domains: frozenset[str] = STANDARD_DOMAINS
    opsets: tuple[int, int] | Callable[[], tuple[int, int]] | None = None
    export_mode: str | None = None
    rewrites: tuple[Callable[[int], Any], ...] = ()
    precision_forms: Mapping[str, str] = dataclasses.field(default_factory=dict)
    check_trace: Callable[[Any], None] | None = None
    check_graph: Callable[[Any], list[str]] | None = None

    def __str__(self) -> str:
        return self.name

    def allows(self, op: str, domain: str = "") -> bool:
        """Whether graphs for this target may hold ``domain::op`` (the opset decides the rest:
        ``ctx.has_op``)."""
        return domain in self.domains

    def opset_range(self) -> tuple[int, int] | None:
        return self.opsets() if callable(self.opsets) else self.opsets

    def resolve_opset(self, opset: int) -> int:
        """The opset an export asked for at ``opset`` is written at; refuses one below the range."""
        bounds = self.opset_range()
        if bounds is None:
            return opset
        low, high = bounds
        if opset < low:
            raise InputSpecError(f"target={self.name!r} ({self.summary}) reads opsets {low}-{high}, got opset={opset}")
        return min(opset, high)

    def precision_form(self, kind: str) -> str | None:
        """The form ``precision=kind`` takes here; None for the float kinds (the same everywhere)."""
        if kind not in QUANT_FORMS:
            return None
        form = self.precision_forms.get(kind)
        if form is None:
            takers = [t.name for t in available_targets() if kind in t.precision_forms]
            raise TargetUnsupportedError(
                f"precision={kind!r} has no form target={self.name!r} runs ({self.summary}); "
                f"export it with target={' or '.join(map(repr, takers)) or 'None'}, or drop precision=")
        return form

    def fit_precision(self, precision: Any, opset: int) -> Any:
        """``precision`` (a checked :class:`jax2onnx.Precision`) in this target's forms at ``opset``:
        the int8 and int4 kernels it takes where none was named (an int4 export writes int8 matmuls
        too: ``int8=`` patterns, ``lm_head="int8"``); refuses a kind it has no form for, a kernel in a
        domain it does not run, or a standard form the opset predates, before tracing."""
        if self.precision_form(precision.kind) is None:
            return precision
        kinds = ("int8", "int4") if precision.kind == "int4" else ("int8",)
        chosen = {}
        for kind in kinds:
            field = f"{kind}_kernel"
            dynamic = kind == "int8" and precision.activations == "dynamic"
            form = self.precision_form(kind)
            if dynamic:
                form = self.precision_forms.get("int8 dynamic")
                if form is None:
                    raise TargetUnsupportedError(f"activations='dynamic' has no int8 form target={self.name!r} runs "
                                                 f"({self.summary}); drop activations= (weight-only int8)")
            kernel = getattr(precision, field) or form
            domain = _KERNEL_DOMAINS[kernel]
            if not self.allows(kernel, domain):
                raise TargetUnsupportedError(
                    f"{field}={kernel!r} writes {domain} ops, which target={self.name!r} does not run; drop {field}= "
                    f"(this target's form is {form!r}) or export with target='onnxruntime'")
            if opset < _KERNEL_OPSETS.get((kind, kernel), 0):
                raise TargetUnsupportedError(
                    f"precision={precision.kind!r} under target={self.name!r} is {kernel} (blocked 4-bit weights), "
                    f"from opset {_KERNEL_OPSETS[kind, kernel]}; got opset={opset}: raise the opset or export with "
                    "target='onnxruntime' (its MatMulNBits has no opset floor)")
            chosen[field] = kernel
        return dataclasses.replace(precision, **chosen)

    def rewrite_families(self, opset: int, common: Iterable[Any]) -> list[Any]:
        """The rewrite stage's families for a model at ``opset``: ``common`` then this target's."""
        return [*common, *(make(opset) for make in self.rewrites)]

    def findings(self, model: Any) -> list[str]:
        """What in the finished graph this target cannot run, one line each (empty: it can)."""
        local = {(domain, name) for domain, name, _ in model.functions}  # the model's own functions
        opset = model.opset_imports.get("", model.opset_imports.get("ai.onnx"))
        bounds = self.opset_range()
        found = [f"opset: the model is opset {opset}; target={self.name!r} reads opsets {bounds[0]}-{bounds[1]}: "
                 f"export with opset={min(max(opset, bounds[0]), bounds[1])}"
                 ] if bounds is not None and opset is not None and not bounds[0] <= opset <= bounds[1] else []
        found += [f"{node.domain}::{node.op_type} (domain {node.domain!r} is not one target={self.name!r} runs)"
                 for node in _all_nodes(model)
                 if (node.domain, node.op_type) not in local and not self.allows(node.op_type, node.domain)]
        if self.check_graph is not None:
            found += self.check_graph(model)
        return found

    def notes(self, model: Any) -> list[str]:
        """What in the finished graph this target runs but less well than it could, one line each
        (``jax2onnx check`` prints them; they fail nothing)."""
        return []

    def check_model(self, model: Any) -> None:
        """Raise :class:`TargetUnsupportedError` on the first finding (the count of the others)."""
        found = self.findings(model)
        if found:
            more = (f" (and {len(found) - 1} more: jax2onnx check --target {self.name} lists them)"
                    if len(found) > 1 else "")
            raise TargetUnsupportedError(f"target={self.name!r}: {found[0]}{more}")


def _all_nodes(model: Any) -> Iterable[Any]:
    for graph in all_graphs(model):
        yield from graph
    for function in model.functions.values():
        yield from function


_LOCK = threading.RLock()  # _load registers the built-in targets while holding it
_TARGETS: dict[str, Target] = {}
_ALIASES: dict[str, str] = {}


def register_target(target: Target) -> Target:
    """Add ``target`` to the registry (its name and aliases must be new); returns it."""
    with _LOCK:
        for name in (target.name, *target.aliases):
            if name in _TARGETS or name in _ALIASES:
                raise ValueError(f"a target named {name!r} is registered already")
        _TARGETS[target.name] = target
        _ALIASES.update({alias: target.name for alias in target.aliases})
    return target


def available_targets() -> list[Target]:
    """Every registered target, built-in ones first."""
    _load()
    return list(_TARGETS.values())


def target_names() -> tuple[str, ...]:
    """The registered targets' names (not their aliases), for choices and messages."""
    return tuple(t.name for t in available_targets())


def get_target(target: Any) -> Target:
    """``target=`` as users give it (a name, an alias or a :class:`Target`) → the registered target."""
    if isinstance(target, Target):
        return target
    _load()
    if isinstance(target, str):
        name = _ALIASES.get(target, target)
        if name in _TARGETS:
            return _TARGETS[name]
    names = ", ".join(repr(n) for n in _TARGETS)
    raise InputSpecError(f"target must be one of {names} (or a jax2onnx.targets.Target), got {target!r}")


_loaded = False


def _load() -> None:
    """The built-in targets, then those packs declare in the ``jax2onnx.targets`` entry-point group
    (each names a module that registers its target when imported)."""
    global _loaded
    if _loaded:
        return
    import importlib
    from importlib.metadata import entry_points

    with _LOCK:
        if _loaded:
            return
        for module in ("standard", "onnxruntime", "tensorrt", "web", "qdq"):
            importlib.import_module(f"{__package__}.{module}")
        for ep in entry_points(group="jax2onnx.targets"):
            ep.load()
        _loaded = True


__all__ = ["MS_DOMAIN", "STANDARD_DOMAINS", "Target", "available_targets", "get_target", "register_target",
           "target_names"]
