"""The rewrite stage's pre-check: export time with and without it on models no rule can touch.

    python bench/rewrite_precheck.py [--repeats 5] [--layers 20]

``RewritePass`` skips its shape inference and its rules when no rule family's start op occurs in the
model (``passes.rewrite.could_fire``). This script exports candidate-free models both ways in one
process, pinned to one core, interleaved (the order alternates each round): "precheck" is the stage
as shipped, "forced" patches ``could_fire`` to answer True (the stage before the pre-check). It prints
the median process CPU time of a whole ``to_onnx`` (proto mode, optimize on) for each, the saving,
and whether both exports are the same bytes (the pre-check must change nothing but the time). CPU
time, not wall time: the machine may be shared (say ``uptime`` beside the figures). Not a test.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:1])

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from flax import nnx  # noqa: E402
from jax2onnx import to_onnx  # noqa: E402
from jax2onnx.passes import rewrite as rewrite_stage  # noqa: E402


class Mlp(nnx.Module):
    """``layers`` Dense + ReLU (Gemm + Relu once lowered)."""

    def __init__(self, layers: int, width: int, *, rngs: nnx.Rngs) -> None:
        self.layers = nnx.List([nnx.Linear(width, width, rngs=rngs) for _ in range(layers)])

    def __call__(self, x):
        for layer in self.layers:
            x = jax.nn.relu(layer(x))
        return x


class Cnn(nnx.Module):
    """``layers`` 3x3 convolutions + ReLU on NHWC images, then a mean over the pixels: the control,
    whose layout Transposes and ReduceMean are start ops (both sides run the rules; their difference
    is the noise of the measurement)."""

    def __init__(self, layers: int, channels: int, *, rngs: nnx.Rngs) -> None:
        self.convs = nnx.List([nnx.Conv(channels, channels, (3, 3), rngs=rngs) for _ in range(layers)])

    def __call__(self, x):
        for conv in self.convs:
            x = jax.nn.relu(conv(x))
        return jnp.mean(x, axis=(1, 2))


def _export(model, spec, forced: bool) -> tuple[float, float, bytes, bool]:
    """(process CPU seconds of one to_onnx, of its rewrite stage, the model's bytes, whether the
    stage's rules ran)."""
    real_check, real_call = rewrite_stage.could_fire, rewrite_stage.RewritePass.call
    ran, stage = [], []

    def check(model_ir, families):
        ran.append(True if forced else real_check(model_ir, families))
        return ran[-1]

    def timed_call(self, model_ir):
        t = time.process_time()
        try:
            return real_call(self, model_ir)
        finally:
            stage.append(time.process_time() - t)

    rewrite_stage.could_fire, rewrite_stage.RewritePass.call = check, timed_call
    try:
        t0 = time.process_time()
        proto = to_onnx(model, [spec], return_mode="proto")
        return time.process_time() - t0, sum(stage), proto.SerializeToString(), any(ran)
    finally:
        rewrite_stage.could_fire, rewrite_stage.RewritePass.call = real_check, real_call


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=5, help="interleaved export pairs per model (after one warm-up each)")
    p.add_argument("--layers", type=int, default=20)
    args = p.parse_args()
    rngs = nnx.Rngs(0)
    cases = {
        f"mlp ({args.layers} x Dense 256 + ReLU)": (Mlp(args.layers, 256, rngs=rngs),
                                                     jax.ShapeDtypeStruct(("B", 256), jnp.float32)),
        f"control: cnn ({args.layers} x Conv 3x3x32 + ReLU, mean)": (Cnn(args.layers, 32, rngs=rngs),
                                                       jax.ShapeDtypeStruct(("B", 32, 32, 32), jnp.float32)),
    }
    print(f"load: {os.getloadavg()}")
    print("| model | rules ran (precheck / forced) | to_onnx CPU ms (precheck / forced) | saved | "
          "rewrite stage CPU ms (precheck / forced) | same bytes |")
    print("|---|---|---|---|---|---|")
    for name, (model, spec) in cases.items():
        _export(model, spec, False), _export(model, spec, True)  # warm-up: tracing caches, plugin loading
        times = {False: [], True: []}
        stage = {False: [], True: []}
        outputs, ran = {}, {}
        for i in range(args.repeats):
            for forced in ((False, True) if i % 2 == 0 else (True, False)):
                t, t_stage, data, rules = _export(model, spec, forced)
                times[forced].append(t)
                stage[forced].append(t_stage)
                outputs[forced], ran[forced] = data, rules
        skip, full = (statistics.median(times[f]) * 1e3 for f in (False, True))
        s_skip, s_full = (statistics.median(stage[f]) * 1e3 for f in (False, True))
        print(f"| {name} | {ran[False]} / {ran[True]} | {skip:.0f} / {full:.0f} | {full - skip:.0f} ms "
              f"({(full - skip) / full:.0%}) | {s_skip:.1f} / {s_full:.1f} | {outputs[False] == outputs[True]} |")
    print(f"load: {os.getloadavg()}")


if __name__ == "__main__":
    main()
