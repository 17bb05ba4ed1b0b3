"""The testcase format packs declare beside their lowerings.

    Component(
        name="lax.sin", onnx=["Sin"], since="v0.4.4",
        testcases=[Testcase("sin", lambda x: jax.lax.sin(x), [(3,)], expected_ops=["Sin"])],
    )

Core's pytest plugin expands each :class:`Testcase` into variants: static and (when a spec holds
a string dim) symbolic, each in float32 and float64.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..targets.base import DEFAULT_TARGET


@dataclasses.dataclass
class Testcase:
    """One conversion to check.

    Attributes:
        name: unique name (the seed's names are kept where the seed had the case).
        callable: the function or module to convert; or use ``factory``.
        input_shapes: input specs as for ``to_onnx`` (strings are symbolic dims).
        factory: zero-argument callable building the function/module (for models, so nothing is
            built at collection time; it is called inside the variant's precision context).
        input_values: concrete inputs; used instead of random ones (static variants only).
        input_params: runtime params: ``name -> value`` both for the graph input's dtype and the run.
        input_generator: ``(rng, shape, dtype) -> array`` for inputs that need a domain (e.g. log).
        expected_ops: ONNX op types that must appear (main graph, subgraphs or functions).
        expected_ops_f64: what the float64 variant must contain instead, where it differs. The rule:
            onnxruntime has no double kernel for several fused ops (Conv, Gelu, AveragePool, ...),
            so float64 exports take an exact decomposition; name here what that graph must hold
            (``()`` for "no particular op"). ``None``: the same as ``expected_ops``.
        forbidden_ops: op types that must not appear (e.g. ReduceMean under LayerNormalization).
        max_nodes: upper bound on the number of nodes in the main graph.
        rtol, atol: tolerances for float32; float64 uses ``rtol_f64``/``atol_f64``.
        run_f64: whether the float64 variant applies.
        run_static: whether the static variant applies (symbolic specs get sizes from ``static_sizes``).
        static_sizes: symbol -> size for the static variant (default 3).
        check: extra ``(model, variant) -> None`` assertions on the exported ModelProto; ``variant``
            (a :class:`jax2onnx.testing.Variant`) tells which precision and dims it checks.
        reference_jit: compute JAX's side with ``jax.jit`` (fast: one compilation). ``False`` for
            cases where XLA's fusions round differently from op-by-op JAX (16-bit float round trips
            compared exactly).
        skip_reason: when set, every variant is reported as skipped with this reason (a case kept
            as documentation of a known gap; never counted as passing).
        min_opset: the oldest opset that can express this testcase at all (an op form with no
            equivalent before it, e.g. a reduction whose axes are only known at run time before
            18). Variants at an older opset (``--jax2onnx-opset``) check that the export fails with
            an error naming the opset. ``None``: every supported opset.
        target: ``to_onnx``'s ``target`` for the export (``"onnxruntime"``: a lowering that emits
            a contrib op there, checked in the same onnxruntime run).
        since: version that introduced the case.
    """

    __test__ = False  # a data class, not a pytest test class

    name: str
    callable: Callable[..., Any] | None = None
    input_shapes: Sequence[Any] = ()
    factory: Callable[[], Callable[..., Any]] | None = None
    input_values: Sequence[Any] | None = None
    input_params: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    input_generator: Callable[..., Any] | None = None
    expected_ops: Sequence[str] = ()
    expected_ops_f64: Sequence[str] | None = None
    forbidden_ops: Sequence[str] = ()
    max_nodes: int | None = None
    rtol: float = 1e-4
    atol: float = 1e-5
    rtol_f64: float = 1e-9
    atol_f64: float = 1e-9
    run_f64: bool = True
    run_static: bool = True
    static_sizes: Mapping[str, int] = dataclasses.field(default_factory=dict)
    check: Callable[[Any, Any], None] | None = None
    skip_reason: str | None = None
    reference_jit: bool = True
    min_opset: int | None = None
    target: str = DEFAULT_TARGET
    since: str = ""
    description: str = ""

    def build(self) -> Callable[..., Any]:
        if self.factory is not None:
            return self.factory()
        if self.callable is None:
            raise ValueError(f"testcase {self.name!r} has neither callable nor factory")
        return self.callable


@dataclasses.dataclass
class Component:
    """A documented unit (a primitive, a jnp function, an NNX module, an example) and its testcases."""

    name: str
    onnx: Sequence[str] = ()
    testcases: list[Testcase] = dataclasses.field(default_factory=list)
    since: str = ""
    description: str = ""
    kind: str = "component"  # "component" or "example": which coverage table it belongs to
