"""Exports from many threads at once: each gets the graph it gets alone, and nobody else notices.

Mixed jobs (an NNX MLP with fused Linear/LayerNorm/gelu, a jnp softmax-of-einsum function, each in
float32 and float64) run from 8 threads while a watcher thread keeps using JAX and the same model
eagerly. Checked: every concurrent export is byte-identical to the solo export of its job; the
watcher never sees x64 switched on, float64 defaults, a patched behaviour, or an overridden class
attribute change identity (module classes are never changed: their overrides are scoped to the
exported instances; library functions are never replaced, see test_export_touches_nothing.py).

``JAX2ONNX_STRESS_ROUNDS`` (default 2) sets the exports per thread; ``nox -s stress`` runs 20.
"""

from __future__ import annotations

import os
import threading
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest

nnx = pytest.importorskip("flax.nnx")
pytest.importorskip("jax2onnx_nnx")

from jax2onnx import to_onnx  # noqa: E402
from jax2onnx.lower.registry import get_registry  # noqa: E402

THREADS = 8
ROUNDS = int(os.environ.get("JAX2ONNX_STRESS_ROUNDS", "2"))
_MISSING = object()


class MLP(nnx.Module):
    def __init__(self, rngs):
        self.l1 = nnx.Linear(8, 16, rngs=rngs)
        self.ln = nnx.LayerNorm(16, rngs=rngs)
        self.l2 = nnx.Linear(16, 4, rngs=rngs)

    def __call__(self, x):
        return self.l2(nnx.gelu(self.ln(self.l1(x))))


def softmax_attention(x):
    return jax.nn.softmax(jnp.einsum("bi,ci->bc", x, x), axis=-1)


def _jobs(model):
    return {
        "mlp_f32": (model, [("B", 8)], False),
        "mlp_f64": (model, [("B", 8)], True),
        "softmax_f32": (softmax_attention, [(3, 8)], False),
        "softmax_f64": (softmax_attention, [(3, 8)], True),
    }


def _export(job):
    fn, specs, double = job
    return to_onnx(fn, specs, enable_double_precision=double).SerializeToString(deterministic=True)


def _patch_targets():
    """(class, attribute) of every instance-scoped ModulePatch whose library is importable here (the
    classes are never changed at all; library functions have no patches since issue #33)."""
    registry = get_registry()
    patches = registry.module_patches()
    return [(t, p.attribute) for p in patches if (t := p.resolve()) is not None]


def _identities(targets):
    """What each patch target holds in its own __dict__ right now (identity snapshot)."""
    return {(id(t), a): vars(t).get(a, _MISSING) for t, a in targets}


def test_concurrent_exports_match_solo_exports_and_library_attributes_keep_their_identity():
    model = MLP(nnx.Rngs(0))
    jobs = _jobs(model)
    x32 = np.linspace(-1, 1, 16, dtype=np.float32).reshape(2, 8)
    eager_model, eager_soft = np.asarray(model(x32)), np.asarray(softmax_attention(x32))
    solo = {name: _export(job) for name, job in jobs.items()}
    # The jobs really differ (fused ops in float32, float64 inputs in the f64 variants).
    assert len(set(solo.values())) == len(solo)
    targets = _patch_targets()
    before = _identities(targets)

    failures: list[str] = []
    watcher_checks = [0, 0]  # checks done, identity samples that differed from before the exports
    done = threading.Event()

    def watcher():
        while not done.is_set():
            flipped = _identities(targets) != before
            try:
                assert jax.config.read("jax_enable_x64") is False, "x64 switched on in another thread"
                assert jnp.zeros(1).dtype == jnp.float32, "float64 defaults leaked into another thread"
                np.testing.assert_array_equal(np.asarray(model(x32)), eager_model)
                np.testing.assert_array_equal(np.asarray(softmax_attention(x32)), eager_soft)
            except AssertionError as exc:
                failures.append(f"watcher: {exc}")
                return
            watcher_checks[0] += 1
            watcher_checks[1] += flipped
            time.sleep(0.001)

    def exporter(index):
        names = list(jobs)
        for r in range(ROUNDS):
            for k in range(len(names)):
                name = names[(index + r + k) % len(names)]  # threads run different jobs side by side
                got = _export(jobs[name])
                if got != solo[name]:
                    failures.append(f"thread {index} round {r}: {name} differs from its solo export")

    watch = threading.Thread(target=watcher)
    watch.start()
    workers = [threading.Thread(target=exporter, args=(i,)) for i in range(THREADS)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(300)
    done.set()
    watch.join(60)

    assert not failures, failures[:5]
    assert watcher_checks[0] > 0
    assert watcher_checks[1] == 0, f"{watcher_checks[1]} samples saw a library attribute change identity"
    after = _identities(targets)
    changed = [key for key in before if after.get(key) is not before[key]]
    assert not changed, f"{len(changed)} patched attributes changed identity"
    assert jax.config.read("jax_enable_x64") is False
    assert type(model.l1) is nnx.Linear and type(model) is MLP  # the instances have their own class back
