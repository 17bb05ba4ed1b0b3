"""A lowering sees its own export's options (``ctx.options``): the fused form can depend on the
export's target, and two exports of different targets running at once each get theirs."""

from __future__ import annotations

import threading

import jax.numpy as jnp
import numpy as np
import onnx
from jax2onnx import allclose, to_onnx
from jax2onnx.plugin import Lowerings, marked_call
from mini_pack import lowerings as mini_lowerings
from mini_pack import pack_of, registry_in_use


def _region(x):
    return marked_call("test.relu_by_target", lambda y: jnp.maximum(y, 0.0), x)


def _lowerings() -> Lowerings:
    lowerings = Lowerings()

    @lowerings.register_call("test.relu_by_target")
    def lower(ctx, x):
        # onnxruntime gets the one-op form; any other target declines (the body: Max)
        return ctx.op.Relu(x) if ctx.target.name == "onnxruntime" else None

    return lowerings


def test_lowering_reads_the_target_of_its_export():
    with registry_in_use(("jax2onnx-optionstest", pack_of(mini_lowerings, _lowerings()))):
        models = {t: to_onnx(_region, [(3, 4)], target=t) for t in ("onnxruntime", "onnx")}
        results: dict[int, onnx.ModelProto] = {}
        targets = ["onnxruntime", "onnx"] * 3
        start = threading.Barrier(len(targets))

        def export(i: int, target: str) -> None:
            start.wait()
            results[i] = to_onnx(_region, [(3, 4)], target=target)

        threads = [threading.Thread(target=export, args=(i, t)) for i, t in enumerate(targets)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert [n.op_type for n in models["onnxruntime"].graph.node] == ["Relu"]
    assert [n.op_type for n in models["onnx"].graph.node] == ["Max"]
    for i, target in enumerate(targets):
        assert [n.op_type for n in results[i].graph.node] == [n.op_type for n in models[target].graph.node], (i, target)
    x = np.linspace(-2, 2, 12).astype(np.float32).reshape(3, 4)
    for model in models.values():
        onnx.checker.check_model(model, full_check=True)
        assert allclose(_region, model, [x])
