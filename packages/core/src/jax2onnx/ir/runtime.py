"""What the target onnxruntime can run: the one answer to "is there a kernel for (op, dtype, opset)?".

onnxruntime's CPU provider implements fewer (op, dtype) pairs than the ONNX spec allows, and the
set changes between releases (``Pad`` on bfloat16 from 1.32, ``BitShift`` only on unsigned types).
Lowerings (through the ``dtypes=`` facet naming an ONNX op, or :meth:`Runtime.dtypes`) and
:class:`jax2onnx.passes.KernelCoveragePass` ask the :class:`Runtime` the export's target serves
(``Target.runtime()``, :mod:`jax2onnx.targets`; every built-in target serves :func:`installed`);
none keeps its own list, and only ``jax2onnx/targets/`` imports this module
(``tests/test_layout_rules.py``), so a target with a table of its own changes what every stage reads.

A :class:`Runtime` reads the kernel table measured for an onnxruntime ``major.minor``
(``ir/ort_kernels/<version>.json``, written by ``python -m jax2onnx.ir.kernel_probe``). For an
installed onnxruntime the package ships no table for, the table is probed once (a few seconds of
one-node sessions) and cached in the user's cache folder (``$JAX2ONNX_CACHE_DIR``, else
``$XDG_CACHE_HOME/jax2onnx``, else ``~/.cache/jax2onnx``), keyed by the full version. Without
onnxruntime installed, exports target the oldest measured version, so they run on every
onnxruntime jax2onnx supports.
"""

from __future__ import annotations

import functools
import glob
import importlib.metadata as metadata
import importlib.util
import json
import os
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..dtypes import carrier  # importing dtypes registers bfloat16 with numpy (ml_dtypes) before names resolve
from . import kernel_probe
from .opsets import op_available

_TABLES = os.path.join(os.path.dirname(__file__), "ort_kernels")

#: every dtype the tables are measured for
ALL_DTYPES = tuple(np.dtype(n) for n in ("float16", "bfloat16", "float32", "float64", "int8", "int16", "int32", "int64",
                                         "uint8", "uint16", "uint32", "uint64", "bool"))


_ONNX_TYPE_NAMES = {"float": "float32", "double": "float64", "float16": "float16", "bfloat16": "bfloat16",
                    **{n: n for n in ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "bool")}}


@functools.cache
def _schema_dtypes(op: str, opset: int, position: int) -> frozenset[np.dtype]:
    """The dtypes (of :data:`ALL_DTYPES`) the ONNX schema of ``op`` at ``opset`` takes at input ``position``."""
    import onnx

    if not op_available(op, opset):
        # not an op of this opset (Gelu before 20), or not with today's meaning (GroupNormalization
        # before 21 scaled per group): nothing runs what a lowering means by it
        return frozenset()
    schema = onnx.defs.get_schema(op, opset, "")
    param = schema.inputs[min(position, len(schema.inputs) - 1)].type_str
    allowed = next((c.allowed_type_strs for c in schema.type_constraints if c.type_param_str == param), [param])
    names = {_ONNX_TYPE_NAMES.get(t[len("tensor("):-1]) for t in allowed if t.startswith("tensor(")}
    return frozenset(d for d in ALL_DTYPES if d.name in names)


def is_contrib(op: str) -> bool:
    """Whether ``op`` names an onnxruntime contrib op, ``"<domain>.<Op>"`` (``com.microsoft.Inverse``)."""
    return "." in op.split(":")[0]


def _has_carrier(dtype: np.dtype, supported: frozenset[np.dtype]) -> bool:
    try:
        carrier(dtype, supported)
    except NotImplementedError:
        return False
    return True


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split(".")[:2])


class Runtime:
    """The kernels of one onnxruntime version, from its measured table (see the module docstring).

    ``table`` is the probe's document: ``missing`` (op or ``op:reduction`` -> dtype names with no
    kernel at the probe's ``opset``), ``by_opset`` (the entries that differ at older opsets, whose
    older op versions have older kernels) and ``typed_inputs`` (the inputs of an op typed by its
    shared type parameter, where the op has others)."""

    def __init__(self, table: Mapping[str, Any], source: str = "") -> None:
        self.version: str = str(table["onnxruntime"])
        self.source = source
        self._table = table
        self._typed = {op: tuple(pos) for op, pos in table.get("typed_inputs", {}).items()}

    def __repr__(self) -> str:
        return f"Runtime(onnxruntime {self.version}{', ' + self.source if self.source else ''})"

    @functools.cache  # noqa: B019 - a Runtime lives as long as the process (one per version)
    def missing(self, opset: int | None = None) -> dict[str, frozenset[np.dtype]]:
        """(op or ``op:reduction``) -> the dtypes with no kernel at ``opset`` (``None``: the table's
        own opset, which newer opsets share)."""
        table = dict(self._table["missing"])
        probed = sorted(int(o) for o in self._table.get("by_opset", {}))
        if opset is not None and opset < self._table["opset"] and probed:
            nearest = max([o for o in probed if o <= opset], default=probed[0])
            table.update(self._table["by_opset"][str(nearest)])
        return {op: frozenset(np.dtype(name) for name in names) for op, names in table.items() if names}

    def inexact(self, op: str) -> frozenset[np.dtype]:
        """The dtypes ``op``'s kernel loads for but computes wrongly on values at the dtype's edges
        (onnxruntime 1.31: int64 ReduceMin/ReduceMax, TopK's order of NaN)."""
        return frozenset(np.dtype(n) for n in self._table.get("inexact", {}).get(op, ()))

    def supports(self, op: str, dtype: Any, opset: int | None = None) -> bool:
        """Whether ``op`` (``ScatterND:max`` for a scatter's reduction) has a kernel for ``dtype``
        that computes what the spec says."""
        dtype = np.dtype(dtype)
        if is_contrib(op):
            return dtype in self.dtypes(op)
        return dtype not in self.missing(opset).get(op, frozenset()) and dtype not in self.inexact(op)

    def dtypes(self, op: str, opset: int | None = None, exact: bool = False) -> frozenset[np.dtype]:
        """The dtypes to run ``op`` on (the ``dtypes=`` facet of a lowering naming ``op``): its ONNX
        schema at ``opset`` takes them and onnxruntime has an exact kernel. A dtype whose kernel is
        inexact stays when no exact dtype holds it (nothing would run it better), unless ``exact``:
        a lowering that can take another form (a fusion's decomposition) asks for exact kernels.
        An onnxruntime contrib op (``"com.microsoft.Inverse"``) has no ONNX schema: the dtypes its
        kernel was measured to run and get right (the table's ``contrib``; none where unmeasured)."""
        if is_contrib(op):
            return frozenset(np.dtype(name) for name in self._table.get("contrib", {}).get(op, ()))
        missing = self.missing(opset).get(op, frozenset())
        first = (self.typed_inputs(op) or (1 if op.split(":")[0] == "Where" else 0,))[0]
        allowed = _schema_dtypes(op.split(":")[0], opset or self._table["opset"], first)
        inexact = self.inexact(op)
        exact_kernels = frozenset(d for d in allowed if d not in missing and d not in inexact)
        if exact:
            return exact_kernels
        return exact_kernels | {d for d in inexact & allowed if d not in missing and not _has_carrier(d, exact_kernels)}

    def typed_inputs(self, op: str) -> tuple[int, ...] | None:
        """The input positions typed by ``op``'s shared type parameter, where it has other inputs."""
        return self._typed.get(op)


def shipped_versions() -> list[str]:
    """The onnxruntime ``major.minor`` versions the package has measured tables for, oldest first."""
    names = (os.path.basename(p)[: -len(".json")] for p in glob.glob(os.path.join(_TABLES, "*.json")))
    return sorted(names, key=_version_key)


def _load(path: str) -> dict[str, Any]:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


@functools.cache
def for_version(version: str) -> Runtime:
    """The runtime of onnxruntime ``version`` (``"1.31"`` or ``"1.31.1"``) from its shipped table."""
    major_minor = ".".join(version.split(".")[:2])
    path = os.path.join(_TABLES, f"{major_minor}.json")
    if not os.path.exists(path):
        raise LookupError(f"no kernel table for onnxruntime {major_minor} (measured: {', '.join(shipped_versions())})")
    return Runtime(_load(path), source=f"measured table {major_minor}")


def cache_dir() -> str:
    """Where probed tables are kept (see the module docstring)."""
    explicit = os.environ.get("JAX2ONNX_CACHE_DIR")
    if explicit:
        return explicit
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "jax2onnx")


#: Distributions that install the ``onnxruntime`` module (one at a time: the wheels clash).
ONNXRUNTIME_DISTRIBUTIONS = ("onnxruntime", "onnxruntime-gpu", "onnxruntime-directml", "onnxruntime-openvino",
                             "onnxruntime-qnn", "onnxruntime-rocm", "onnxruntime-training")


def _installed_version() -> str | None:
    """The installed onnxruntime's version, read from its package metadata: importing onnxruntime
    costs start-up time and makes it write files of its own (``~/.cache/Microsoft/...``,
    ``$TMPDIR/.ses``), which a plain export must not cause. Only a module installed by none of
    :data:`ONNXRUNTIME_DISTRIBUTIONS` (a source build) is imported to ask it."""
    for dist in ONNXRUNTIME_DISTRIBUTIONS:
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    if importlib.util.find_spec("onnxruntime") is None:
        return None
    import onnxruntime

    return str(onnxruntime.__version__)


def _probed(version: str) -> Runtime:
    """The table of an installed onnxruntime no table was shipped for: probed once, then cached."""
    path = os.path.join(cache_dir(), "ort_kernels", f"{version}.json")
    if os.path.exists(path):
        try:
            table = _load(path)
            if table.get("onnxruntime") == version:
                return Runtime(table, source=f"probed, cached in {path}")
        except (OSError, ValueError):
            pass  # a damaged cache entry: probe again and replace it
    table = kernel_probe.measure_table()
    try:
        kernel_probe.write_table(table, path)
    except OSError:
        pass  # a read-only home: the table still serves this process
    return Runtime(table, source=f"probed into {path}")


@functools.cache
def installed() -> Runtime:
    """The runtime exports target: the installed onnxruntime's (measured, else probed and cached),
    or without onnxruntime the oldest measured one."""
    version = _installed_version()
    if version is None:
        return for_version(shipped_versions()[0])
    major_minor = ".".join(version.split(".")[:2])
    if major_minor in shipped_versions():
        return for_version(major_minor)
    return _probed(version)
