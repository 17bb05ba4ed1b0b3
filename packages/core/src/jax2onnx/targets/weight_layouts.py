"""The weight layouts the precision forms write (:mod:`.precision_forms`), one tensor each:
symmetric int8 codes with a scale per column or per axis entry, symmetric int8 blocks in 8-bit
MatMulNBits' layout, and int4 blocks in MatMulNBits' and in blocked ``DequantizeLinear``'s layout.

The int8 scales are a few lines of numpy: onnxruntime's public helper quantizes per tensor, and its
per-channel path lives inside its whole-model quantizer, which would hold the model in memory. The
int4 block quantizer is onnxruntime's (``onnxruntime.quantization``'s
``DefaultWeightOnlyQuantizer.qbits_block_quant``, called on one tensor: an optional dependency of
``precision="int4"`` only).
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from ..errors import RUNTIME_INSTALL_HINT, PrecisionError


def int8_per_column(w: np.ndarray, axis: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric int8 codes and float32 scales, one scale per slice along ``axis`` reduced away
    (``axis=0`` of ``[K, N]``: a scale per column)."""
    w = np.asarray(w, dtype=np.float32)
    amax = np.max(np.abs(w), axis=axis, keepdims=True)
    scale = np.where(amax > 0, amax / 127.0, 1.0).astype(np.float32)
    codes = np.clip(np.rint(w / scale), -127, 127).astype(np.int8)
    return codes, np.squeeze(scale, axis=axis)


def int8_blocks(w: np.ndarray, block_size: int) -> tuple[np.ndarray, np.ndarray]:
    """8-bit MatMulNBits' ``B`` (uint8 ``[N, blocks, block_size]``: symmetric codes -127..127 stored
    as ``code + 128``, its implied zero point) and ``scales`` (``[N, blocks]``, ``max |w| / 127`` per
    block) of ``w`` ``[K, N]``, blocks of ``block_size`` along K (the last padded with zeros)."""
    w = np.asarray(w, dtype=np.float32)
    K, N = w.shape
    blocks = -(-K // block_size)
    padded = np.zeros((blocks * block_size, N), dtype=np.float32)
    padded[:K] = w
    codes, scales = int8_per_column(padded.T.reshape(N, blocks, block_size), axis=2)
    return (codes.astype(np.int16) + 128).astype(np.uint8), scales


@functools.cache
def _block_quantizer(block_size: int, symmetric: bool) -> Any:
    import logging

    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        from onnxruntime.quantization.matmul_nbits_quantizer import (
            DefaultWeightOnlyQuantConfig,
            DefaultWeightOnlyQuantizer,
        )
    except ImportError as exc:
        raise PrecisionError(f"precision='int4' quantizes with onnxruntime's block quantizer, which is not installed: "
                             f"{RUNTIME_INSTALL_HINT}") from exc
    finally:  # that module calls logging.basicConfig(level=INFO) on import: the user's logging is theirs
        root.handlers[:] = handlers
        root.setLevel(level)
    return DefaultWeightOnlyQuantizer(DefaultWeightOnlyQuantConfig(block_size=block_size, is_symmetric=symmetric, bits=4))


def int4_blocks(w: np.ndarray, block_size: int, symmetric: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """MatMulNBits' ``B`` (uint8 ``[N, blocks, block_size/2]``), ``scales`` (``[N, blocks]``) and
    ``zero_points`` (uint8 ``[N, ceil(blocks/2)]``) of ``w`` ``[K, N]``."""
    return _block_quantizer(block_size, symmetric).qbits_block_quant(np.ascontiguousarray(w, dtype=np.float32))


def int4_dq_blocks(w: np.ndarray, block_size: int, symmetric: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The same blocks as :func:`int4_blocks` (the same codes, scales and zero points) in blocked
    ``DequantizeLinear``'s layout: uint4 codes ``[K, N]``, scales ``[blocks, N]`` and uint4 zero points
    ``[blocks, N]`` (8 for symmetric blocks: MatMulNBits' implied zero point)."""
    import ml_dtypes  # a dependency of onnx_ir (its 4-bit tensors)

    K, N = w.shape
    packed, scales, zero_points = int4_blocks(w, block_size, symmetric)
    blocks = scales.shape[1]
    nibbles = np.stack([packed & 0x0F, packed >> 4], axis=-1).reshape(N, blocks * block_size)[:, :K]
    if symmetric:
        zp = np.full((N, blocks), 8, dtype=np.uint8)
    else:
        zp = np.stack([zero_points & 0x0F, zero_points >> 4], axis=-1).reshape(N, -1)[:, :blocks]
    return (np.ascontiguousarray(nibbles.T).astype(ml_dtypes.uint4), np.ascontiguousarray(scales.reshape(N, blocks).T),
            np.ascontiguousarray(zp.T).astype(ml_dtypes.uint4))


def int4_packed(codes: np.ndarray, scales: np.ndarray, zero_points: np.ndarray, block_size: int,
                symmetric: bool) -> tuple[np.ndarray, ...]:
    """Chosen int4 blocks of a ``[K, N]`` weight (codes 0..15 ``[K, N]``, scales and zero points
    ``[blocks, N]``; a calibrated method's) in MatMulNBits' layout (as :func:`int4_blocks`; no zero
    points when symmetric)."""
    K, N = codes.shape
    blocks = scales.shape[0]
    codes = np.asarray(codes, dtype=np.uint8)
    zero_points = np.asarray(zero_points, dtype=np.uint8)
    scales = np.ascontiguousarray(scales, dtype=np.float32)
    padded = np.zeros((blocks * block_size, N), dtype=np.uint8)
    padded[:K] = codes
    pairs = padded.T.reshape(N, blocks, block_size // 2, 2)
    packed = (pairs[..., 0] | (pairs[..., 1] << 4)).astype(np.uint8)
    parts: tuple[np.ndarray, ...] = (np.ascontiguousarray(packed), np.ascontiguousarray(scales.T))
    if not symmetric:
        zp = np.full((N, blocks + blocks % 2), 8, dtype=np.uint8)  # the unread pad nibble: 8, as onnxruntime writes it
        zp[:, :blocks] = zero_points.T
        parts += (np.ascontiguousarray(zp[:, 0::2] | (zp[:, 1::2] << 4)),)
    return parts


def int4_dq_packed(codes: np.ndarray, scales: np.ndarray, zero_points: np.ndarray) -> tuple[np.ndarray, ...]:
    """The same chosen blocks (as :func:`int4_packed` takes them) in blocked ``DequantizeLinear``'s
    layout (as :func:`int4_dq_blocks`)."""
    import ml_dtypes

    return (np.ascontiguousarray(np.asarray(codes, dtype=np.uint8)).astype(ml_dtypes.uint4),
            np.ascontiguousarray(scales, dtype=np.float32),
            np.ascontiguousarray(np.asarray(zero_points, dtype=np.uint8)).astype(ml_dtypes.uint4))


def int8_per_axis(w: np.ndarray, axis: int) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric int8 codes and one float32 scale per entry of ``axis``."""
    w = np.asarray(w, dtype=np.float32)
    moved = np.moveaxis(w, axis, 0).reshape(w.shape[axis], -1)
    codes, scales = int8_per_column(moved.T)  # [rest, entries]: a scale per entry
    codes = np.moveaxis(codes.T.reshape(np.moveaxis(w, axis, 0).shape), 0, axis)
    return np.ascontiguousarray(codes), scales


__all__ = ["int4_blocks", "int4_dq_blocks", "int4_dq_packed", "int4_packed", "int8_blocks", "int8_per_axis", "int8_per_column"]
