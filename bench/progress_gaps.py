"""How a long single-file export's progress looks on a terminal: when the bar first appears, the
longest time the terminal gets nothing while the export runs, and whether tensors and bytes are shown.

    python bench/progress_gaps.py [--layers 40] [--width 2048] [--src packages/core/src]

The export runs in a child process whose stderr is a pseudo-terminal (so ``progress=None``, the
default, draws its ``rich`` bar after 2 s); this process timestamps every chunk the child writes.
The model: ``layers`` dense layers of ``width x width`` float32 weights (40 x 2048: 671 MB), written
as one self-contained file. ``--src``: the core sources to import (another checkout's
``packages/core/src`` to measure it before a change); the packs come from the environment.
"""

from __future__ import annotations

import argparse
import os
import pty
import select
import subprocess
import sys
import tempfile
import time

CHILD = """
import sys, time, numpy as np, jax.numpy as jnp
from jax2onnx import to_onnx
layers, width, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
rng = np.random.default_rng(0)
ws = [rng.standard_normal((width, width), dtype=np.float32) / np.sqrt(width) for _ in range(layers)]
def fn(x):
    for w in ws:
        x = jnp.sin(x @ w)
    return x
print("EXPORT_START", file=sys.stderr, flush=True)
start = time.perf_counter()
to_onnx(fn, [("B", width)], output_path=out, external_data=False, return_mode="file")
print(f"EXPORT_SECONDS {time.perf_counter() - start:.1f}", flush=True)
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--layers", type=int, default=40)
    parser.add_argument("--width", type=int, default=2048)
    parser.add_argument("--src", default=None, help="core's sources to put first on PYTHONPATH")
    args = parser.parse_args()
    env = dict(os.environ, COLUMNS="120", TERM="xterm-256color")
    if args.src:
        env["PYTHONPATH"] = os.path.abspath(args.src) + os.pathsep + env.get("PYTHONPATH", "")
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "m.onnx")
        master, slave = pty.openpty()
        start = time.perf_counter()
        child = subprocess.Popen([sys.executable, "-c", CHILD, str(args.layers), str(args.width), out],
                                 stderr=slave, stdout=subprocess.PIPE, env=env, text=True)
        os.close(slave)
        chunks: list[tuple[float, bytes]] = []
        while True:
            ready, _, _ = select.select([master], [], [], 0.05)
            if ready:
                try:
                    data = os.read(master, 65536)
                except OSError:  # the child closed its end
                    break
                if not data:
                    break
                chunks.append((time.perf_counter() - start, data))
            elif child.poll() is not None:
                break
        stdout = child.communicate()[0]
        wall = time.perf_counter() - start
        size = os.path.getsize(out) if os.path.exists(out) else 0
    begun = next((t for t, d in chunks if b"EXPORT_START" in d), 0.0)  # after the imports
    chunks = [(t - begun, d) for t, d in chunks if t > begun and d.strip()]
    times = [t for t, _ in chunks]
    gaps = [b - a for a, b in zip(times, times[1:])]
    worst = max(range(len(gaps)), key=gaps.__getitem__) if gaps else None
    text = b"".join(d for _, d in chunks).decode(errors="replace")
    print(f"model file {size / 2**20:.0f} MiB; child wall {wall:.1f} s; {stdout.strip()}")
    print(f"times from the export's start; first output at {times[0]:.1f} s" if times else "no output at all")
    if worst is not None:
        print(f"longest silence after it: {gaps[worst]:.1f} s (from {times[worst]:.1f} s to {times[worst + 1]:.1f} s); "
              f"last output at {times[-1]:.1f} s")
    print(f"tensors shown: {'tensors' in text}; bytes shown: {'MiB of' in text}")
    stages = [s for s in ("trace", "lower", "optimize", "write") if s in text]
    print(f"stages shown: {', '.join(stages) or 'none'}")


if __name__ == "__main__":
    main()
