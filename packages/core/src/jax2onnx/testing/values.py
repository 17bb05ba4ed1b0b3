"""Input values for pack testcases that more than one pack needs."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def channels_last_with_nan(shape: Sequence[int]) -> np.ndarray:
    """float32 channels-last values (N, H, W, C), H and W ≥ 2, holding NaN: the first 2×2 window of
    channel 0 is [nan, -inf, -inf, -inf] (onnxruntime's MaxPool alone gives -inf there, JAX NaN), the
    last element is NaN and one +inf sits elsewhere. Transpose it for channels-first layers."""
    x = np.linspace(-3, 3, int(np.prod(shape)), dtype=np.float32).reshape(shape)
    x[0, :2, :2, 0] = -np.inf
    x[0, 0, 0, 0] = np.nan
    x[-1, -1, -1, -1] = np.nan
    x[-1, 0, -1, 0] = np.inf
    return x
