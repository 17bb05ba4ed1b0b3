"""``to_onnx(..., verify=Verify(...))``: how an export is checked against JAX.

``verify=True`` is ``Verify()``; ``verify=GreedyCheck(...)`` is ``Verify(greedy=GreedyCheck(...))``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from .greedy import GreedyCheck
from .reference import HIGHEST, check_reference


@dataclasses.dataclass(frozen=True)
class Verify:
    """What ``to_onnx(..., verify=Verify(...))`` compares.

    ``reference``: ``"highest"`` (default: JAX's float32 matmuls at highest precision, wherever the
    parameters live) or ``"accelerator-default"`` (the accelerator's own default precision, bfloat16
    passes on a TPU, judged with tolerances that fit it; see :mod:`jax2onnx.verification.reference`).
    ``greedy``: a causal LM's greedy-token check too (:class:`~jax2onnx.GreedyCheck`).
    """

    reference: str = HIGHEST
    greedy: GreedyCheck | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "reference", check_reference(self.reference, "Verify(reference)"))
        if self.greedy is not None and not isinstance(self.greedy, GreedyCheck):
            raise TypeError(f"Verify(greedy=...) takes a jax2onnx.GreedyCheck or None, got {type(self.greedy).__name__}")


def as_verify(option: bool | GreedyCheck | Verify) -> Verify | None:
    """``to_onnx``'s ``verify=`` as a :class:`Verify` (None: no verification)."""
    if isinstance(option, Verify):
        return option
    if isinstance(option, GreedyCheck):
        return Verify(greedy=option)
    return Verify() if option else None


def is_verify_option(option: Any) -> bool:
    return isinstance(option, (bool, GreedyCheck, Verify))


__all__ = ["Verify", "as_verify", "is_verify_option"]
