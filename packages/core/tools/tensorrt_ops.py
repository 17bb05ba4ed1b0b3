"""Regenerate ``jax2onnx/targets/tensorrt/tensorrt_ops.json`` from onnx-tensorrt's operator table.

    python packages/core/tools/tensorrt_ops.py path/to/onnx-tensorrt/docs/operators.md COMMIT

Keeps, per operator, whether TensorRT's ONNX parser supports it and the element types it lists,
and the opset range the page states. The restrictions that matter to jax2onnx's graphs are checked
by :mod:`jax2onnx.targets.tensorrt.lint` (written there, not copied from the page).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "src" / "jax2onnx" / "targets" / "tensorrt" / "tensorrt_ops.json"


def main(path: str, commit: str) -> None:
    text = Path(path).read_text()
    lo, hi = (int(v) for v in re.search(r"range of opset (\d+) to opset (\d+)", text).groups())
    version = re.search(r"TensorRT (\d+\.\d+) supports", text).group(1)
    supported, unsupported = {}, []
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 2 or not re.fullmatch(r"[A-Z][A-Za-z0-9]*", cells[0]) or cells[1] not in ("Y", "N"):
            continue
        if cells[1] == "N":
            unsupported.append(cells[0])
        else:
            types = [t.strip() for t in cells[2].split(",")] if len(cells) > 2 and cells[2] else []
            supported[cells[0]] = [t for t in types if t]
    data = {
        "source": f"onnx/onnx-tensorrt docs/operators.md at {commit}",
        "tensorrt": version,
        "opset_min": lo,
        "opset_max": hi,
        "supported": dict(sorted(supported.items())),
        "unsupported": sorted(unsupported),
    }
    # one operator per line, so a regeneration diffs by operator
    head = {k: v for k, v in data.items() if k != "supported"}
    lines = [f" {json.dumps(k)}: {json.dumps(v)}," for k, v in head.items()]
    ops = [f"  {json.dumps(op)}: {json.dumps(types)}" for op, types in data["supported"].items()]
    OUT.write_text("{\n" + "\n".join(lines) + '\n "supported": {\n' + ",\n".join(ops) + "\n }\n}\n")
    print(f"{OUT}: {len(supported)} supported, {len(unsupported)} unsupported, opsets {lo}-{hi}")


if __name__ == "__main__":
    main(*sys.argv[1:3])
