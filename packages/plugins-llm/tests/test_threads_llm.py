"""Two threads exporting different targets at the same time: each graph gets its own target's
attention. The target is an export option the lowering reads (``ctx.options``), not a switch one
export sets around the others."""

from __future__ import annotations

import threading

from jax2onnx_llm import export_causal_lm
from llm_test_helpers import MS, op_counts
from test_spec import LAYERS, tiny_jax_decoder


def test_concurrent_exports_keep_their_targets(tmp_path):
    spec = tiny_jax_decoder()
    targets = ["onnxruntime", "onnx", "onnxruntime", "onnx"]
    start = threading.Barrier(len(targets))
    folders: dict[int, object] = {}
    errors: list[BaseException] = []

    def export(i: int, target: str) -> None:
        try:
            start.wait()  # trace and lower at the same time
            folders[i] = export_causal_lm(spec, tmp_path / f"m{i}", max_length=32, cache="shared", target=target)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=export, args=(i, t)) for i, t in enumerate(targets)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for i, target in enumerate(targets):
        ops = op_counts(folders[i])
        if target == "onnxruntime":
            assert ops.get((MS, "GroupQueryAttention"), 0) == LAYERS and ("", "Attention") not in ops, (i, ops)
        else:
            assert ops.get(("", "Attention"), 0) == LAYERS and not any(d == MS for d, _ in ops), (i, ops)
