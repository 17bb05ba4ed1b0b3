"""Where, and at which matmul precision, the JAX side of a comparison runs.

A TPU computes a float32 matrix product at its default precision in one bfloat16 pass (operands
rounded to 8 mantissa bits, float32 accumulation); GPUs with TensorFloat-32 do the like. Compared
with an exported graph that multiplies in float32 (onnxruntime on the CPU), such a reference is
off by about 1e-2 relative, and a correct export fails float32's tolerances (issue #34: 49 of 50
elements of an MLP). So by default the reference runs at ``"highest"`` precision: JAX's
``default_matmul_precision`` config around the reference call only, where parameters live (a
model on the TPU runs on the TPU), which makes float32 matmuls float32 on every backend (the CPU
computes them in float32 at any setting). Moving the computation to the CPU instead would copy
every parameter to the host and compile the model once more for another backend; the config
context costs neither. It is thread-local in JAX and restored on error (a ``with`` block), and it
is part of the jit cache key, so the user's own compiled functions are not affected.

It does not reach a matmul whose code pins ``precision=`` itself (``jnp.dot(..., precision=DEFAULT)``):
there the function asked for reduced precision and the reference honours it.

Matmul precision is not the whole story on a TPU: its float32 elementwise functions are
approximations. Measured on a TPU v5e (JAX 0.10.2, ``.tpu/probe.py`` in the closing note of issue
#34) against float64: matmuls at highest precision 1e-7 relative, but ``tanh`` 8.1e-5 (1360 ulps),
``log`` 3.6e-4, ``log1p`` 2.6e-4, ``exp``/``logistic``/``gelu`` up to 6e-6. A correct export of
``tanh(x @ w) @ w.T`` is then 8e-5 away from the TPU's own highest-precision numbers, outside
float32's default (1e-4, 1e-5). So a reference that ran on a TPU judges float32 outputs with
:data:`TPU_FLOAT32_TOLERANCES` (the report names the platform, hence the tolerances); a user's own
``rtol``/``atol`` always win. Every other platform (CPU, GPU: float32 functions within a few ulps)
keeps float32's tolerances.

``reference="accelerator-default"`` compares with the accelerator's own default numbers (what
the user's jitted model returns there), judged by :data:`ACCELERATOR_TOLERANCES`; on a mismatch,
the reference is computed once more at highest precision, and when that one matches, the report
says the difference is a precision effect, not a lowering (:class:`PrecisionRecheck`).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from typing import Any

from ..errors import InputSpecError

#: The reference of every comparison unless asked otherwise: float32 matmuls in float32.
HIGHEST = "highest"
#: The accelerator's default matmul precision (bfloat16 passes on a TPU), with looser tolerances.
ACCELERATOR_DEFAULT = "accelerator-default"
REFERENCES = (HIGHEST, ACCELERATOR_DEFAULT)

#: (rtol, atol as a fraction of the output's root mean square) for float32 outputs against
#: ``"accelerator-default"``. One bfloat16 pass per matmul operand rounds each to 2**-9 relative;
#: an MLP's outputs moved by up to 0.8% of their RMS and a 4-layer transformer's by 2%
#: (simulated on the CPU with the operands rounded as a TPU rounds them; issue #34 measured the
#: MLP's 13% largest relative error on a TPU v5e, at an element near zero). The absolute part
#: scales with the output so that an element near zero is not held to a relative bound it cannot
#: meet, and a model with large outputs is not held to an absolute one.
ACCELERATOR_TOLERANCES = {"float32": (2e-2, 5e-2), "complex64": (2e-2, 5e-2)}

#: (rtol, atol as a fraction of the output's root mean square) for float32 outputs against a
#: ``"highest"`` reference that ran on a TPU, whose float32 transcendental functions are accurate
#: to about 4e-4 relative (``log``), not to float32's few ulps (see the module docstring).
TPU_FLOAT32_TOLERANCES = {"float32": (1e-3, 1e-4), "complex64": (1e-3, 1e-4)}


def check_reference(reference: Any, where: str = "reference") -> str:
    """``reference`` as one of :data:`REFERENCES`, else an :class:`InputSpecError` (a ``ValueError``)
    naming the choices."""
    if not isinstance(reference, str) or reference.strip().lower() not in REFERENCES:
        raise InputSpecError(f"{where}={reference!r} is not a reference: use {REFERENCES[0]!r} (the default: float32 "
                         f"matmuls in float32 on every device) or {REFERENCES[1]!r} (the accelerator's own default "
                         "matmul precision, judged with looser tolerances)")
    return reference.strip().lower()


@contextlib.contextmanager
def precision_scope(reference: str) -> Iterator[None]:
    """The JAX config the reference runs under: ``highest`` matmul precision, or as it is.

    JAX's config context is thread-local and restored when the block exits, raising or not."""
    import jax

    if reference == HIGHEST:
        with jax.default_matmul_precision("highest"):
            yield
    else:
        yield


def matmul_precision(reference: str) -> str:
    """The matmul precision a reference of this kind runs at, as the report names it."""
    if reference == HIGHEST:
        return "highest"
    import jax

    return str(jax.config.jax_default_matmul_precision or "default")


@dataclasses.dataclass(frozen=True)
class ReferenceInfo:
    """Where the JAX reference ran: the device's platform and kind, how many devices its outputs
    live on, and the float32 matmul precision it ran at."""

    platform: str
    device_kind: str
    devices: int
    matmul_precision: str

    def __str__(self) -> str:
        count = f" x{self.devices}" if self.devices > 1 else ""
        kind = "" if self.device_kind.lower() == self.platform.lower() else f" {self.device_kind}"
        note = " (float32 matmuls are float32 on the CPU at any setting)" if self.platform == "cpu" else ""
        return f"JAX on {self.platform}{kind}{count}, matmul precision {self.matmul_precision}{note}"

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def reference_info(outputs: Any, reference: str) -> ReferenceInfo:
    """The :class:`ReferenceInfo` of a reference call that returned ``outputs``: the devices its
    JAX arrays live on (where the computation ran), else JAX's default device."""
    import jax

    devices: set[Any] = set()
    for leaf in jax.tree_util.tree_leaves(outputs):
        sharding = getattr(leaf, "sharding", None)
        if sharding is not None:
            devices |= set(sharding.device_set)
    if not devices:
        default = jax.config.jax_default_device
        devices = {default if default is not None and not isinstance(default, str) else jax.devices()[0]}
    first = min(devices, key=lambda d: d.id)
    return ReferenceInfo(first.platform, str(getattr(first, "device_kind", first.platform)), len(devices),
                         matmul_precision(reference))


def tolerance(reference: str, dtype_name: str, default: tuple[float, float], expected: Any,
              platform: str | None = None) -> tuple[float, float]:
    """(rtol, atol) for an output of ``dtype_name`` against this reference kind: the default
    tolerances; for ``"accelerator-default"`` float32 :data:`ACCELERATOR_TOLERANCES`, for a
    ``"highest"`` reference computed on a TPU (``platform``) :data:`TPU_FLOAT32_TOLERANCES`, each
    with the absolute part scaled by the reference output's root mean square."""
    if reference == ACCELERATOR_DEFAULT and dtype_name in ACCELERATOR_TOLERANCES:
        table = ACCELERATOR_TOLERANCES
    elif reference == HIGHEST and platform == "tpu" and dtype_name in TPU_FLOAT32_TOLERANCES:
        table = TPU_FLOAT32_TOLERANCES
    else:
        return default
    import numpy as np

    rtol, atol_fraction = table[dtype_name]
    values = np.abs(np.asarray(expected)).astype(np.float64)
    finite = values[np.isfinite(values)]
    rms = float(np.sqrt(np.mean(finite * finite))) if finite.size else 0.0
    return max(rtol, default[0]), max(default[1], atol_fraction * rms)


@dataclasses.dataclass(frozen=True)
class PrecisionRecheck:
    """A comparison that failed against the accelerator's default numbers, run once more against
    a reference at highest precision: ``ok`` means the difference was the matmul precision."""

    ok: bool
    reference: ReferenceInfo
    #: per output, its largest absolute error against the highest-precision reference
    max_abs_error: dict[str, float]

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "reference": self.reference.to_dict(), "max_abs_error": dict(self.max_abs_error)}

    def explanation(self) -> str:
        """What a failed comparison's message says about it."""
        if self.ok:
            return (f"This is a precision effect, not a lowering: the outputs match {self.reference}; at the "
                    "accelerator's default precision float32 matmuls run as bfloat16 passes. Compare at highest "
                    "precision (the default reference), or loosen rtol/atol.")
        return f"The outputs differ from {self.reference} too, so this is not only precision."


__all__ = ["ACCELERATOR_DEFAULT", "ACCELERATOR_TOLERANCES", "HIGHEST", "REFERENCES", "PrecisionRecheck",
           "ReferenceInfo", "check_reference", "matmul_precision", "precision_scope", "reference_info", "tolerance"]
