"""Errors a user can meet. Each message names the culprit and the fix."""

from __future__ import annotations

import dataclasses
import importlib.metadata as metadata
import importlib.util
import os
import re
import threading
import traceback
from collections.abc import Iterable, Mapping, Sequence
from typing import Any


class Jax2OnnxError(Exception):
    """Base class of every error jax2onnx raises on purpose."""


class InputSpecError(Jax2OnnxError, ValueError):
    """An input spec (shape tuple, ShapeDtypeStruct, array) or ``input_params`` is malformed."""


class PrecisionError(InputSpecError):
    """A ``precision=`` option is unknown or does not fit the model (int4 without weight matmuls).
    Defined here so that a target's own precision form (``jax2onnx.targets.<name>``) raises it
    without importing the precision stage; ``jax2onnx.PrecisionError`` is this class."""


class MissingDependencyError(Jax2OnnxError, ImportError):
    """An optional dependency (onnxruntime for verification, rich for tables) is not installed."""


#: What to install for verification. onnxruntime is an extra of core, not a requirement: a GPU
#: environment has onnxruntime-gpu instead, and the two wheels cannot be installed side by side.
RUNTIME_INSTALL_HINT = "pip install 'jax2onnx-core[runtime]' (or onnxruntime-gpu on a CUDA machine)"


def require_onnxruntime(purpose: str = "verification") -> Any:
    """Import and return ``onnxruntime``, or raise :class:`MissingDependencyError` saying what to install."""
    try:
        import onnxruntime
    except ImportError as exc:
        raise MissingDependencyError(
            f"{purpose} runs the exported model in onnxruntime, which is not installed: {RUNTIME_INSTALL_HINT}. "
            "Converting (to_onnx) does not need it."
        ) from exc
    return onnxruntime


@dataclasses.dataclass
class Unsupported:
    """One primitive nobody lowers, where the user's code uses it, and which pack is known to lower it."""

    primitive: str
    locations: list[str]
    pack_hint: str | None


class UnsupportedPrimitiveError(Jax2OnnxError, NotImplementedError):
    """No installed plugin pack lowers one or more primitives the traced function uses.

    ``primitive``/``location``/``pack_hint`` describe the first one; ``unsupported`` lists them all.
    """

    def __init__(
        self,
        primitive: str,
        location: str | None,
        pack_hint: str | None,
        installed: list[str],
        *,
        failed: Mapping[str, str] | None = None,
        more: Sequence[Unsupported] = (),
    ):
        self.primitive = primitive
        self.location = location
        self.pack_hint = pack_hint
        self.installed = list(installed)
        self.failed = dict(failed or {})
        first = next((u for u in more if u.primitive == primitive), None)
        if first is None:
            first = Unsupported(primitive, _user_locations([location] if location else []), pack_hint)
        self.unsupported: list[Unsupported] = [first, *(u for u in more if u.primitive != primitive)]
        super().__init__(self._message())

    @classmethod
    def from_list(
        cls, items: Sequence[Unsupported], installed: list[str], failed: Mapping[str, str] | None = None
    ) -> UnsupportedPrimitiveError:
        first = items[0]
        return cls(
            first.primitive,
            first.locations[0] if first.locations else None,
            first.pack_hint,
            installed,
            failed=failed,
            more=items,
        )

    def _advice(self, pack: str | None) -> str:
        """``pack``: the loaded pack that lowers primitives of the same JAX module, else the published
        pack the catalog names (the plugin registry's ``pack_hint``), else None."""
        if pack and pack in self.failed:
            return (
                f"The pack '{pack}' that lowers it is installed but failed to load ({self.failed[pack]}): "
                f"reinstall it (pip install -U {pack})."
            )
        if pack and pack not in self.installed:
            advice = f"It is lowered by the plugin pack '{pack}', which is not installed (pip install {pack})."
        elif pack:
            # The pack is there and loaded: the primitive is simply not converted (yet).
            advice = (
                f"jax2onnx does not convert it yet ('{pack}' is installed and has no lowering for it). "
                "Write that step with other operations, or add a lowering in a pack of your own "
                "(@jax2onnx.hookimpl def jax2onnx_lowerings(): ..., see jax2onnx.plugin)."
            )
        else:
            advice = (
                "No installed plugin pack lowers it: install the jax2onnx pack for the library it comes from "
                f"(the packs are listed in {_packs_page()}), or write a lowering in a pack of your own "
                "(@jax2onnx.hookimpl def jax2onnx_lowerings(): ..., see jax2onnx.plugin)."
            )
        broken = [name for name in self.failed if name != pack]
        if broken:  # a pack that did not load may be the one that lowers it
            advice += " " + " ".join(
                f"The installed pack '{name}' failed to load ({self.failed[name]}): reinstall it (pip install -U {name})."
                for name in broken
            )
        return advice

    def _message(self) -> str:
        installed = f"Installed packs: {', '.join(self.installed) or 'none'}."
        if len(self.unsupported) == 1:
            u = self.unsupported[0]
            where = f" at {_join_locations(u.locations)}" if u.locations else ""
            return f"No lowering for JAX primitive '{u.primitive}'{where}. {self._advice(u.pack_hint)} {installed}"
        lines = [f"No lowering for {len(self.unsupported)} JAX primitives this function uses:"]
        for u in self.unsupported:
            where = f" at {_join_locations(u.locations)}" if u.locations else ""
            lines.append(f"  - '{u.primitive}'{where}: {self._advice(u.pack_hint)}")
        lines.append(installed)
        return "\n".join(lines)


def _packs_page() -> str:
    """Where the plugin packs are listed: the documentation URL of the installed core."""
    try:
        urls = metadata.metadata("jax2onnx-core").get_all("Project-URL") or []
    except metadata.PackageNotFoundError:
        urls = []
    docs = next((u.split(",", 1)[1].strip() for u in urls if u.lower().startswith("documentation,")), None)
    return f"{docs}/architecture.md#packages" if docs else "the jax2onnx documentation (Packages)"


def _user_locations(locations: Sequence[str]) -> list[str]:
    """Drop ``file:line (fn)`` locations inside JAX or jax2onnx: with no frame of the user's (the
    function passed to to_onnx is itself a library function), a library line only misleads."""
    return [loc for loc in locations if not is_library_file(loc.rsplit(":", 1)[0])]


def _join_locations(locations: Sequence[str], limit: int = 3) -> str:
    shown = ", ".join(locations[:limit])
    return shown + (f" (+{len(locations) - limit} more)" if len(locations) > limit else "")


class LoweringError(Jax2OnnxError):
    """A lowering failed; wraps the original error with the primitive and the user's line."""


class InvalidModelError(Jax2OnnxError):
    """Internal error: the export built a model that the ONNX checker or strict shape inference
    rejects (or one with unused initializers). Names the node and the lowering that emitted it;
    nothing is written."""


class PluginConflictError(Jax2OnnxError):
    """Two plugin packs claim the same primitive at the same priority."""


class TargetUnsupportedError(Jax2OnnxError):
    """The function computes something the export's ``target=`` runtime cannot run (TensorRT: DFT,
    float64, ...); the message names the op and the target."""


class UserFunctionError(Jax2OnnxError):
    """The user's own function raised while being traced; the original is chained."""


# ---------------------------------------------------------------------------------------------
# Explaining errors raised by the user's function while it is traced

#: Folders of library code: frames there are never "the user's line". JAX's and core's own from the
#: start; each plugin pack's package and the model libraries it serves (Flax, Equinox, Keras, ...)
#: are added when the packs load (:func:`add_library_modules`, called by the plugin registry), so no
#: pack or model library is named here.
_LIBRARY_ROOTS: set[str] = set()
_BASE_LIBRARY_MODULES = ("jax", "jaxlib", __name__.partition(".")[0])
_ROOTS_LOCK = threading.Lock()


def _module_root(name: str) -> str | None:
    """The folder of top-level package ``name`` (without importing it), or None if not installed."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    folders = list(spec.submodule_search_locations or ())
    if folders:
        return _norm(folders[0]) + "/"
    return _norm(spec.origin) if spec.origin else None  # a single-file module: that file only


def _norm(path: str) -> str:
    return os.path.normcase(os.path.abspath(path)).replace(os.sep, "/").rstrip("/")


def add_library_modules(names: Iterable[str]) -> None:
    """Count the top-level packages ``names`` as library code (the registry adds the packs' own and
    the model libraries they declare); names that are not installed are ignored."""
    with _ROOTS_LOCK:
        if not _LIBRARY_ROOTS:
            _LIBRARY_ROOTS.update(r for r in map(_module_root, _BASE_LIBRARY_MODULES) if r)
        _LIBRARY_ROOTS.update(r for r in map(_module_root, names) if r)


def is_library_file(path: str) -> bool:
    """True for files of JAX, jax2onnx, the loaded packs and the libraries they serve, and Python's
    own plumbing (``contextlib``, ``functools``, frozen modules)."""
    if path.startswith("<frozen"):
        return True
    p = path.replace(os.sep, "/")
    if p.endswith(("/contextlib.py", "/functools.py")):
        return True
    if not _LIBRARY_ROOTS:
        add_library_modules(())
    full = _norm(path)
    return any(full.startswith(root) for root in tuple(_LIBRARY_ROOTS))


def user_frame(exc: BaseException) -> traceback.FrameSummary | None:
    """The innermost frame of ``exc``'s traceback that is the user's code, or None."""
    frames = traceback.extract_tb(exc.__traceback__) if exc.__traceback__ is not None else []
    for frame in reversed(frames):
        if not is_library_file(frame.filename):
            return frame
    return None


_TRACER_HINTS = (
    (
        "TracerBoolConversionError",
        "Python `if`/`while`/`and`/`or`/`not`/`assert` tested a value computed from the inputs. During export "
        "values are symbolic, so Python cannot branch on them: use jnp.where(cond, a, b) or "
        "jax.lax.cond(pred, true_fn, false_fn, ...) for branches and jax.lax.while_loop/fori_loop for loops "
        "(they become ONNX If/Loop). Tests on static shapes are fine; on a symbolic dim only a test that holds for "
        "every size (x.shape[0] >= 1) can be decided.",
    ),
    (
        "TracerIntegerConversionError",
        "int() or an index (range(n), list[i], x.shape[i]) got a value computed from the inputs; during export it "
        "is symbolic. Index arrays with jnp.take/jax.lax.dynamic_slice, loop with jax.lax.fori_loop, or make the "
        "value a Python int (a constant or a shape).",
    ),
    (
        "TracerArrayConversionError",
        "numpy (np.*) was applied to a value computed from the inputs; numpy only sees constants. Use jax.numpy "
        "(jnp.*) inside the exported function.",
    ),
    (
        "NonConcreteBooleanIndexError",
        "a boolean mask (x[x > 0]) gives an array whose size depends on the data, which an ONNX graph cannot "
        "type. Keep the shape: jnp.where(mask, x, 0), or jnp.sum(x, where=mask).",
    ),
    (
        "ConcretizationTypeError",
        "float()/int()/bool()/.item()/.tolist() needs a concrete number, but during export values are symbolic. "
        "Keep it an array (x.sum() instead of float(x.sum())); change dtypes with x.astype(jnp.float32).",
    ),
)


def _tracer_hint(exc: BaseException) -> str | None:
    names = {cls.__name__ for cls in type(exc).__mro__}
    for name, hint in _TRACER_HINTS:
        if name in names:
            return hint
    return None


def _describe_inputs(names: Sequence[str], avals: Sequence[Any]) -> str:
    import numpy as np

    parts = []
    for n, a in zip(names, avals):
        dims = ", ".join(str(d) for d in a.shape) + ("," if len(a.shape) == 1 else "")
        dtype = a.dtype.name if hasattr(a.dtype, "name") else np.dtype(a.dtype).name  # key<fry> has no np.dtype
        parts.append(f"{n}: ({dims}) {dtype}")
    return ", ".join(parts)


def _clean_jax_message(text: str, names: Sequence[str], frame: traceback.FrameSummary | None) -> str:
    """JAX's note names the wrapper jax2onnx traces (``flat_fn at .../conversion.py``) and its
    ``flat[i]`` arguments; say the user's function, line and parameter names instead."""

    def trace_site(m: re.Match[str]) -> str:
        if not is_library_file(m.group("path")):
            return m.group(0)
        if frame is None:
            return "The error occurred while tracing the exported function."
        return f"The error occurred while tracing {frame.name} at {frame.filename}:{frame.lineno}."

    text = re.sub(r"The error occurred while tracing the function (?P<fn>\S+) at (?P<path>\S+?):\d+ for \w+\.", trace_site, text)

    def arg(m: re.Match[str]) -> str:
        i = int(m.group(1))
        return f"the input '{names[i]}'" if i < len(names) else m.group(0)

    return re.sub(r"the argument flat\[(\d+)\]", arg, text)


def explain_trace_error(
    exc: BaseException, names: Sequence[str], avals: Sequence[Any], has_symbols: bool = False
) -> UserFunctionError:
    """A :class:`UserFunctionError` for an exception the user's function raised under tracing: the
    user's line (not ours), JAX's note rewritten to name it, and the hint that fits the mistake."""
    frame = user_frame(exc)
    text = _clean_jax_message(str(exc), names, frame)
    low = text.lower()
    hint = _tracer_hint(exc)
    if hint is None and has_symbols and "inconclusive" in low and "comparison" in low:
        hint = (
            "Python compared a symbolic dim (e.g. `if x.shape[0] > 1:`) and the answer depends on the size: "
            "branch with jax.lax.cond or jnp.where, write a test that holds for every size (x.shape[0] >= 1), "
            "or export that dim with a static size."
        )
    elif hint is None and has_symbols and (
        "inconclusive" in type(exc).__name__.lower() or "inconclusive" in low or "incompatible shapes" in low or "symbolic" in low
    ):
        hint = (
            "The symbolic dims may need to be equal where the code combines them: give them the same name "
            "(e.g. 'B' in both specs), or use a static size."
        )
    elif hint is None and isinstance(exc, (TypeError, ValueError, IndexError)) and any(
        w in low for w in ("shape", "rank", "dimension", "axis")
    ):
        hint = "Check that each input spec has the rank and sizes the function expects."
    where = ""
    if frame is not None:
        where = f", at {frame.filename}:{frame.lineno} in {frame.name}" + (f":\n    {frame.line.strip()}" if frame.line else "")
    msg = (
        f"the function raised while being traced with inputs ({_describe_inputs(names, avals)}){where}\n"
        f"{type(exc).__name__}: {text.strip()}"
    )
    if hint:
        msg += f"\nHint: {hint}"
    return UserFunctionError(msg)
