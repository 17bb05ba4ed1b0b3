"""The one engine that turns input specs into concrete trial inputs, for ``jax2onnx.verify`` /
``to_onnx(verify=True)`` and for the testcase runner alike.

A symbolic dim takes each size of :data:`TRIAL_SIZES` in turn (every symbol the same size in one
trial), so a graph that baked a size in fails at the other one. Dim expressions (``"2*B"``,
``"floordiv(B, 2)"``, JAX symbolic dims) are parsed and evaluated by JAX (``compat``), exactly
the grammar ``to_onnx`` accepts; nothing here calls Python's ``eval``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ..compat import dim_from_text, dim_symbols, evaluate_dim

#: Sizes given to each symbolic dim, one trial per entry: two different sizes catch a graph that
#: hard-coded the size seen while tracing. Neither is 1, so broadcasting bugs cannot hide.
TRIAL_SIZES = (2, 5)

#: ``generator(rng, shape, dtype) -> array``: a testcase may bring its own (``input_generator``).
Generator = Callable[[np.random.Generator, tuple[int, ...], np.dtype], Any]


def _as_dim(d: Any) -> Any:
    return dim_from_text(d.strip()) if isinstance(d, str) else d


def dim_value(d: Any, sizes: Mapping[str, int]) -> int:
    """The size of ``d`` (an int, a string such as ``"2*B"``, or a JAX symbolic dim) for ``sizes``."""
    if isinstance(d, (int, np.integer)):
        return int(d)
    try:
        dim = _as_dim(d)
    except Exception as exc:  # noqa: BLE001 - JAX's parser names the problem
        raise ValueError(f"cannot evaluate the dim {d!r}: {exc}") from exc
    missing = sorted(dim_symbols(dim) - set(sizes))
    if missing:
        raise ValueError(f"cannot evaluate the dim {d!r}: no size for {missing}")
    return int(evaluate_dim(dim, {name: int(sizes[name]) for name in dim_symbols(dim)}))


def concrete_shape(shape: Sequence[Any], sizes: Mapping[str, int]) -> tuple[int, ...]:
    return tuple(dim_value(d, sizes) for d in shape)


def spec_shape(spec: Any) -> tuple[Any, ...]:
    if isinstance(spec, (tuple, list)):
        return tuple(spec)
    return tuple(getattr(spec, "shape", ()))


def is_concrete(spec: Any) -> bool:
    """An array (numpy, JAX) or a Python number: a value, not a shape spec."""
    if isinstance(spec, (tuple, list)):
        return False
    return isinstance(spec, (np.ndarray, np.generic, bool, int, float, complex)) or hasattr(spec, "__array__")


def symbols(specs: Sequence[Any]) -> list[str]:
    """The symbol names the specs' dims use, in order of first use (concrete values have none)."""
    names: list[str] = []
    for spec in specs:
        if is_concrete(spec):
            continue
        for d in spec_shape(spec):
            if isinstance(d, (int, np.integer)):
                continue
            try:
                used = dim_symbols(_as_dim(d))
            except Exception as exc:  # noqa: BLE001
                raise ValueError(f"cannot read the dim {d!r}: {exc}") from exc
            for name in sorted(used, key=str(d).find):
                if name not in names:
                    names.append(name)
    return names


def size_assignments(names: Sequence[str], sizes: Sequence[int] = TRIAL_SIZES) -> list[dict[str, int]]:
    """One ``{symbol: size}`` per trial: every symbol at each size in turn; one empty assignment
    when there is no symbol."""
    if not names:
        return [{}]
    return [dict.fromkeys(names, n) for n in sizes]


def random_value(shape: Sequence[int], dtype: Any, rng: np.random.Generator) -> np.ndarray:
    """A random array for a trial: floats ~ N(0, 1), complex with both parts so, ints in [0, 4)
    (valid token ids and indices for any table of 4 or more rows), bools half True."""
    dt = np.dtype(dtype)
    if dt.kind == "b":
        return rng.random(shape) < 0.5
    if dt.kind in "iu":
        return rng.integers(0, 4, size=shape).astype(dt)
    if dt.kind == "c":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dt)
    return rng.standard_normal(shape).astype(dt)


def default_generator(rng: np.random.Generator, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """:func:`random_value` in the ``Generator`` form testcases use."""
    return random_value(shape, dtype, rng)


def trial_arrays(
    specs: Sequence[Any],
    dtypes: Sequence[Any],
    assignments: Sequence[Mapping[str, int]],
    *,
    seed: int = 0,
    generator: Generator = default_generator,
) -> list[list[np.ndarray]]:
    """One list of arrays per assignment: concrete specs pass through, shape specs get
    ``generator`` values of their dtype at the assignment's sizes (one generator stream, in order)."""
    rng = np.random.default_rng(seed)
    trials = []
    for sizes in assignments:
        arrays = []
        for spec, dtype in zip(specs, dtypes):
            if is_concrete(spec):
                arrays.append(np.asarray(spec))
                continue
            dt = np.dtype(dtype)
            arrays.append(np.asarray(generator(rng, concrete_shape(spec_shape(spec), sizes), dt)).astype(dt))
        trials.append(arrays)
    return trials


def spec_dtype(spec: Any, double: bool) -> np.dtype:
    """A spec's dtype as ``jax2onnx.verify`` reads it: shape tuples are the default float."""
    if isinstance(spec, (tuple, list)):
        return np.dtype(np.float64 if double else np.float32)
    return np.dtype(spec.dtype)


def trial_inputs(
    specs: Sequence[Any], *, double: bool = False, sizes: Sequence[int] = TRIAL_SIZES, seed: int = 0
) -> list[list[np.ndarray]]:
    """Concrete inputs for each trial: arrays pass through; shape specs get random values, each
    symbolic dim taking each size of ``sizes`` in turn (one trial when nothing is symbolic)."""
    dtypes = [None if is_concrete(s) else spec_dtype(s, double) for s in specs]
    return trial_arrays(specs, dtypes, size_assignments(symbols(specs), sizes), seed=seed)
