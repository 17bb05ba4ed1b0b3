"""What a target is: one object that owns everything runtime-specific, read by every stage.

A :class:`Target` is a whole backend. It declares

- what its runtime runs: the op domains, and single ops of a domain it does not run whole
  (``ops``: onnxruntime-web's contrib kernels), both asked through ``allows(op, domain)``; the
  opsets its parser reads (``resolve_opset``), and its kernel table (``runtime()``: a :class:`jax2onnx.ir.runtime.Runtime`,
  the (op, dtype, opset) kernels the lowerings' ``dtypes=`` facets, ``ctx.kernel_dtypes``, the
  kernel-coverage pass and ``precision=``'s float16/bfloat16 plan read);
- its precision forms (``precision_forms``): small strategy objects
  (:mod:`jax2onnx.targets.precision_forms`), one class per form (int8 weight-only, int8 dynamic,
  int4, float16, bfloat16; a QDQ form is one more class); ``fit_precision`` picks and checks them;
- its rewrite families: the ``rewrites`` it runs after the common ones in the rewrite stage, and
  the families packs register for it through :func:`jax2onnx.rewrite.register_rewrite` (by what the
  target runs, never by its name), which a front-end asks for by name
  (``requested_rewrites``) and runs in the optimize stage's rewrite slot;
- refusals before tracing (``check_trace``) and its final check of the finished graph
  (``findings``/``check_model``);
- its verification runner: the onnxruntime execution providers a session of its models runs on
  (``providers``; ``inference_session``);
- capabilities a front-end asks about that no op answers (``can("genai")``: onnxruntime-genai runs
  its folders).

``to_onnx(target=)``, ``precision=``, the front-ends (``export_causal_lm``) and the CLI
(``convert --target``, ``check --target``) resolve a name through :func:`get_target` and ask the
object; no module outside ``jax2onnx/targets/`` names a target or an execution provider
(``tests/test_target_names.py``). A new target is one folder ``jax2onnx/targets/<name>/`` whose
``__init__`` calls :func:`register_target` (or, in a pack, a module named by an entry point in the
``jax2onnx.targets`` group), plus its tests: see ``docs/architecture.md``, "Adding a target".
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import pkgutil
import threading
from collections.abc import Callable, Iterable
from importlib.metadata import entry_points
from typing import Any

from ..errors import InputSpecError, TargetUnsupportedError
from ..ir.runtime import installed
from ..passes.manager import all_graphs
from .precision_forms import MS_DOMAIN, PrecisionForm, known_forms

#: The standard domain under both of its spellings.
STANDARD_DOMAINS = frozenset({"", "ai.onnx"})
#: The name ``to_onnx`` exports for when ``target=`` is not given.
DEFAULT_TARGET = "onnx"
#: onnxruntime's CPU execution provider: what verification runs every built-in target's models on.
CPU_PROVIDER = "CPUExecutionProvider"
#: The precision kinds whose form is the same on every target.
_NO_FORM = ("float32",)


@dataclasses.dataclass(frozen=True)
class PackRewrite:
    """A rewrite family a pack registered (:func:`register_rewrite`): ``factory(options)`` builds the
    pass; a target holds it when it runs ``op`` in ``domain``."""

    name: str
    factory: Callable[[Any], Any]
    op: str
    domain: str


_PACK_REWRITES: dict[str, PackRewrite] = {}


def register_rewrite(name: str, factory: Callable[[Any], Any], *, op: str, domain: str = "") -> None:
    """Register the rewrite family ``name`` for every target (built-in or registered later) that
    runs ``domain::op`` (the op the family writes); a front-end runs it on an export by asking the
    export's target (``target.requested_rewrites([name])``), which hands back the pass factories of
    the families it holds. ``factory(options)`` returns an onnx_ir pass. Registering a name twice
    keeps the first (a module imported twice registers once)."""
    with _LOCK:
        _PACK_REWRITES.setdefault(name, PackRewrite(name, factory, op, domain))


@dataclasses.dataclass(frozen=True)
class Target:
    """One runtime an export can be tuned for (see the module doc).

    Args:
        name: what users pass (``target="onnx"``).
        summary: one line for ``--help``, the docs and errors.
        aliases: older names that resolve to this target (``"generic"`` for ``"onnx"``).
        domains: op domains its graphs may hold, every op of them (the standard one always).
        ops: single ``(domain, op)`` pairs its graphs may hold from a domain not in ``domains``
            (a runtime that has a few of a domain's ops: onnxruntime-web's wasm build runs
            com.microsoft's MatMulNBits, not the whole domain); ``allows`` reads both.
        opsets: the (lowest, highest) default-domain opset its parser reads, or None for every
            opset ``to_onnx`` writes; an export above the highest is lowered to it.
        export_mode: the ``export_mode`` it implies (``"web"``: one self-contained file), or None.
        rewrites: the rewrite families it adds to the common ones (run after them), as
            ``family(opset)`` factories, usually the :class:`jax2onnx.passes.rules.RuleFamily` classes.
        precision_forms: the :class:`~jax2onnx.targets.precision_forms.PrecisionForm` objects it runs,
            in order of preference: the first of a kind (weight-only for int8) is the kind's default;
            for ``activations="dynamic"`` the first dynamic int8 form; a kernel named in
            ``Precision`` must be one of them. A kind with no form here is refused before tracing,
            naming the targets that take it (float32 needs none).
        check_trace: refusals read off the traced program before lowering (``fn(closed_jaxpr)``,
            raising :class:`TargetUnsupportedError` at the user's line).
        check_graph: the final check of the finished graph (``fn(model) -> list of findings``,
            one line each); every node's op is checked against ``allows`` for every target.
        kernel_table: ``() -> Runtime``, its (op, dtype, opset) kernels (default: the installed
            onnxruntime's CPU kernels, measured or probed: :mod:`jax2onnx.ir.runtime`).
        providers: the onnxruntime execution providers verification runs its models on, in order.
        capabilities: what front-ends ask of it that no op answers (``"genai"``: onnxruntime-genai
            runs a folder of its models).
    """

    name: str
    summary: str
    aliases: tuple[str, ...] = ()
    domains: frozenset[str] = STANDARD_DOMAINS
    ops: frozenset[tuple[str, str]] = frozenset()
    opsets: tuple[int, int] | Callable[[], tuple[int, int]] | None = None
    export_mode: str | None = None
    rewrites: tuple[Callable[[int], Any], ...] = ()
    precision_forms: tuple[PrecisionForm, ...] = ()
    check_trace: Callable[[Any], None] | None = None
    check_graph: Callable[[Any], list[str]] | None = None
    kernel_table: Callable[[], Any] = installed
    providers: tuple[str, ...] = (CPU_PROVIDER,)
    capabilities: frozenset[str] = frozenset()

    def __str__(self) -> str:
        return self.name

    # -- what the runtime runs ------------------------------------------------------------------

    def allows(self, op: str, domain: str = "") -> bool:
        """Whether graphs for this target may hold ``domain::op``: its domain is one the target runs
        whole, or the pair is one of its ``ops`` (the opset decides the rest: ``ctx.has_op``)."""
        return domain in self.domains or (domain, op) in self.ops

    def refusal(self, op: str, domain: str = "") -> str:
        """Why ``domain::op`` is not allowed, in words (for an op ``allows`` refuses)."""
        some = sorted(name for d, name in self.ops if d == domain)
        if some:
            return (f"{domain}::{op} (target={self.name!r} runs only {', '.join(some)} of domain {domain!r}, "
                    "not the whole domain)")
        return f"{domain}::{op} (domain {domain!r} is not one target={self.name!r} runs)"

    def can(self, capability: str) -> bool:
        """Whether the target declares ``capability`` (see ``capabilities``)."""
        return capability in self.capabilities

    def runtime(self) -> Any:
        """Its kernel table (a :class:`jax2onnx.ir.runtime.Runtime`)."""
        return self.kernel_table()

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

    # -- precision --------------------------------------------------------------------------------

    def forms_of(self, kind: str, activations: Any = ...) -> list[PrecisionForm]:
        """Its forms of ``kind`` (those quantizing activations as ``activations`` says, where given)."""
        return [f for f in self.precision_forms
                if f.kind == kind and (activations is ... or f.activations == activations)]

    def precision_form(self, kind: str) -> PrecisionForm | None:
        """The default form ``precision=kind`` takes here (None for float32); refuses a kind it has
        no form for, naming the targets that have one."""
        if kind in _NO_FORM:
            return None
        forms = self.forms_of(kind, None if kind == "int8" else ...)
        if not forms:
            takers = [t.name for t in available_targets() if t.forms_of(kind)]
            raise TargetUnsupportedError(
                f"precision={kind!r} has no form target={self.name!r} runs ({self.summary}); "
                f"export it with target={' or '.join(map(repr, takers)) or 'None'}, or drop precision=")
        return forms[0]

    def fit_precision(self, precision: Any, opset: int) -> Any:
        """``precision`` (a checked :class:`jax2onnx.Precision`) in this target's forms at ``opset``:
        the int8 and int4 kernels it takes where none was named (an int4 export writes int8 matmuls
        too: ``int8=`` patterns, ``lm_head="int8"``); refuses a kind it has no form for, a kernel
        it does not run, or a form the opset predates, before tracing."""
        if self.precision_form(precision.kind) is None or precision.kind not in ("int8", "int4"):
            return precision
        kinds = ("int8", "int4") if precision.kind == "int4" else ("int8",)
        chosen = {}
        for kind in kinds:
            field = f"{kind}_kernel"
            activations = precision.activations if kind == "int8" else ...
            forms = self.forms_of(kind, activations)
            if not forms:
                raise TargetUnsupportedError(f"activations={activations!r} has no {kind} form target={self.name!r} "
                                             f"runs ({self.summary}); drop activations= (weight-only {kind})")
            named = getattr(precision, field)
            form = forms[0] if named is None else next((f for f in self.forms_of(kind) if f.kernel == named), None)
            if form is None:
                domain = next((f.domain for f in known_forms(kind) if f.kernel == named), "")
                takers = [t.name for t in available_targets() if any(f.kernel == named for f in t.forms_of(kind))]
                what = (f"writes {domain} ops, which target={self.name!r} does not run" if not self.allows(named, domain)
                        else f"names an {kind} form target={self.name!r} does not list (it runs {domain}::{named} "
                             f"in other forms only)")
                raise TargetUnsupportedError(
                    f"{field}={named!r} {what}; drop {field}= (this target's form is {forms[0].kernel!r}) or export "
                    f"with target={' or '.join(map(repr, takers)) or 'None'}")
            if opset < form.min_opset:
                others = [t.name for t in available_targets() if any(f.min_opset <= opset for f in t.forms_of(kind))]
                raise TargetUnsupportedError(
                    f"precision={precision.kind!r} under target={self.name!r} is {form.kernel} ({form.about}), "
                    f"from opset {form.min_opset}; got opset={opset}: raise the opset or export with target="
                    f"{' or '.join(map(repr, others)) or 'None'}")
            chosen[field] = form.kernel
            if kind == "int4" and form.embedding_op is not None and not self.allows(*form.embedding_op[::-1]):
                domain, op = form.embedding_op
                if precision.embeddings == "int4":
                    raise TargetUnsupportedError(
                        f"embeddings='int4' gathers 4-bit rows with {domain}::{op}, which target={self.name!r} does "
                        "not run; use embeddings='int8' (or 'auto': int8 tables on this target)")
                if precision.embeddings == "auto":
                    chosen["embeddings"] = "int8"
        return dataclasses.replace(precision, **chosen)

    # -- rewrites ---------------------------------------------------------------------------------

    def rewrite_families(self, opset: int, common: Iterable[Any]) -> list[Any]:
        """The rewrite stage's families for a model at ``opset``: ``common`` then this target's."""
        return [*common, *(make(opset) for make in self.rewrites)]

    def pack_rewrites(self) -> list[PackRewrite]:
        """The families packs registered that this target holds (it runs the op they write)."""
        with _LOCK:
            registered = list(_PACK_REWRITES.values())
        return [r for r in registered if self.allows(r.op, r.domain)]

    def requested_rewrites(self, names: Iterable[str]) -> tuple[Callable[[Any], Any], ...]:
        """The pass factories (``ExportOptions.rewrite_passes``) of the registered families named in
        ``names`` this target holds, in the order asked; a name it does not hold is skipped (the
        export runs without that fusion)."""
        held = {r.name: r.factory for r in self.pack_rewrites()}
        return tuple(held[name] for name in names if name in held)

    # -- checks and verification ------------------------------------------------------------------

    def findings(self, model: Any) -> list[str]:
        """What in the finished graph this target cannot run, one line each (empty: it can)."""
        local = {(domain, name) for domain, name, _ in model.functions}  # the model's own functions
        opset = model.opset_imports.get("", model.opset_imports.get("ai.onnx"))
        bounds = self.opset_range()
        found = [f"opset: the model is opset {opset}; target={self.name!r} reads opsets {bounds[0]}-{bounds[1]}: "
                 f"export with opset={min(max(opset, bounds[0]), bounds[1])}"
                 ] if bounds is not None and opset is not None and not bounds[0] <= opset <= bounds[1] else []
        found += [self.refusal(node.op_type, node.domain) for node in _all_nodes(model)
                 if (node.domain, node.op_type) not in local and not self.allows(node.op_type, node.domain)]
        if self.check_graph is not None:
            found += self.check_graph(model)
        return found

    def notes(self, model: Any) -> list[str]:
        """What in the finished graph this target runs less well than it could, one line each
        (``jax2onnx check`` prints them; they fail nothing)."""
        return []

    def check_model(self, model: Any) -> None:
        """Raise :class:`TargetUnsupportedError` on the first finding (the count of the others)."""
        found = self.findings(model)
        if found:
            more = (f" (and {len(found) - 1} more: jax2onnx check --target {self.name} lists them)"
                    if len(found) > 1 else "")
            raise TargetUnsupportedError(f"target={self.name!r}: {found[0]}{more}")

    @property
    def one_file(self) -> bool:
        """Whether its export mode writes one self-contained file (never external data)."""
        return self.export_mode == "web"

    def inference_session(self, ort: Any, model: Any, options: Any = None) -> Any:
        """An ``onnxruntime.InferenceSession`` of ``model`` (bytes or a path) on this target's
        providers: the verification runner."""
        return ort.InferenceSession(model, options, providers=list(self.providers))


def _all_nodes(model: Any) -> Iterable[Any]:
    for graph in all_graphs(model):
        yield from graph
    for function in model.functions.values():
        yield from function


_LOCK = threading.RLock()  # _load registers the built-in targets while holding it
_TARGETS: dict[str, Target] = {}
_ALIASES: dict[str, str] = {}


def register_target(target: Target) -> Target:
    """Add ``target`` to the registry (its name and aliases must be new, its ``ops`` (domain, op)
    pairs, its precision forms of ops it runs); returns it."""
    bad = [pair for pair in target.ops if not (isinstance(pair, tuple) and len(pair) == 2
                                                and all(isinstance(x, str) and x for x in pair))]
    if not isinstance(target.ops, frozenset) or bad:
        raise ValueError(f"target {target.name!r}: ops takes a frozenset of (domain, op) pairs of names, such as "
                         f"frozenset({{('com.microsoft', 'MatMulNBits')}}); got {sorted(map(repr, bad or [target.ops]))}")
    for form in target.precision_forms:
        if form.kernel is not None and not target.allows(form.kernel, form.domain):
            raise ValueError(f"target {target.name!r} lists {form!r}, which writes {form.domain}::{form.kernel}, an op "
                             f"it does not run: add ({form.domain!r}, {form.kernel!r}) to its ops (or {form.domain!r} "
                             "to its domains), or drop the form")
    with _LOCK:
        for name in (target.name, *target.aliases):
            if name in _TARGETS or name in _ALIASES:
                raise ValueError(f"a target named {name!r} is registered already")
        _TARGETS[target.name] = target
        _ALIASES.update({alias: target.name for alias in target.aliases})
    return target


def available_targets() -> list[Target]:
    """Every registered target, built-in ones first (in :data:`BUILT_IN`'s order, whichever folder
    was imported first), then the others as registered."""
    _load()
    with _LOCK:
        registered = list(_TARGETS.values())
    return sorted(registered, key=lambda t: BUILT_IN.index(t.name) if t.name in BUILT_IN else len(BUILT_IN))


def target_names() -> tuple[str, ...]:
    """The registered targets' names (not their aliases), for choices and messages."""
    return tuple(t.name for t in available_targets())


def default_target() -> Target:
    """The target ``to_onnx`` exports for when none is given."""
    return get_target(DEFAULT_TARGET)


def find_target(name: Any) -> Target | None:
    """The registered target named ``name`` (or aliased so), or None: for a model's own record of
    its target, which may name one a pack registers that is not installed here."""
    try:
        return get_target(name) if isinstance(name, str) else None
    except InputSpecError:
        return None


def get_target(target: Any) -> Target:
    """``target=`` as users give it (a name, an alias or a :class:`Target`) → the registered target."""
    if isinstance(target, Target):
        return target
    _load()
    if isinstance(target, str):
        name = _ALIASES.get(target, target)
        if name in _TARGETS:
            return _TARGETS[name]
    names = ", ".join(repr(n) for n in target_names())
    raise InputSpecError(f"target must be one of {names} (or a jax2onnx.targets.Target), got {target!r}")


_loaded = False
#: the first built-in targets' folders (``jax2onnx/targets/<folder>/``), in the order they are
#: listed; any other folder here is a built-in target too, listed after them by name
BUILT_IN = ("onnx", "onnxruntime", "tensorrt", "web")


def _load() -> None:
    """The built-in targets (every folder of this package: its ``__init__`` registers the target;
    :data:`BUILT_IN` first), then those packs declare in the ``jax2onnx.targets`` entry-point group
    (each names a module that registers its target when imported)."""
    global _loaded
    if _loaded:
        return
    with _LOCK:
        if _loaded:
            return
        folders = [m.name for m in pkgutil.iter_modules([os.path.dirname(__file__)]) if m.ispkg]
        for folder in sorted(folders, key=lambda f: (f not in BUILT_IN, BUILT_IN.index(f) if f in BUILT_IN else 0, f)):
            importlib.import_module(f"{__package__}.{folder}")
        for ep in entry_points(group="jax2onnx.targets"):
            ep.load()
        _loaded = True


__all__ = ["BUILT_IN", "CPU_PROVIDER", "DEFAULT_TARGET", "MS_DOMAIN", "STANDARD_DOMAINS", "PackRewrite", "Target",
           "available_targets", "default_target", "find_target", "get_target", "register_rewrite", "register_target", "target_names"]
