"""External data: a crash never pairs a model with the wrong weights, leftovers are cleaned, and
verification works from the path and from the returned proto."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import time

import jax.numpy as jnp
import numpy as np
import onnx
import onnx_ir as ir
import pytest
from jax2onnx import InputSpecError, allclose, to_onnx
from jax2onnx.export import saving, write
from jax2onnx.verification.compare import run_onnx

DATA = re.compile(r"m\.onnx\.[0-9a-f]{16}\.data")


def _weights(seed):
    return np.random.default_rng(seed).standard_normal((64, 64)).astype(np.float32)


def _fn(w):
    return lambda x: jnp.sin(x @ w)


def test_allclose_from_the_returned_proto_and_from_the_path(mini_registry, tmp_path, monkeypatch):
    f = _fn(_weights(0))
    path = tmp_path / "model" / "m.onnx"
    proto = to_onnx(f, [("B", 64)], output_path=path, external_data=True)
    monkeypatch.chdir(tmp_path)  # onnxruntime must not resolve the weights against the cwd
    x = [np.random.default_rng(1).random((3, 64), dtype=np.float32)]
    assert allclose(f, proto, x)
    assert allclose(f, str(path), x) and allclose(f, path, x)
    # A proto read back by the user carries no folder: the error says what to pass.
    reread = onnx.load(str(path), load_external_data=False)
    with pytest.raises(ValueError, match="base_dir="):
        allclose(f, reread, x)
    assert allclose(f, reread, x, base_dir=path.parent)


def test_cli_verify_of_an_external_data_export(mini_registry, tmp_path, monkeypatch):
    from jax2onnx import cli

    (tmp_path / "ext_model_mod.py").write_text(textwrap.dedent("""
        import jax.numpy as jnp
        import numpy as np
        W = np.random.default_rng(0).standard_normal((64, 64)).astype(np.float32)
        def f(x):
            return jnp.sin(x @ W)
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(write, "EXTERNAL_DATA_AUTO_BYTES", 1000)  # 16 KB of weights count as "large"
    out = tmp_path / "out" / "m.onnx"
    monkeypatch.chdir(tmp_path)
    assert cli.main(["convert", "ext_model_mod:f", "-i", "2,64", "-o", str(out), "--verify"]) == 0
    names = sorted(p.name for p in out.parent.iterdir())
    assert names[0] == "m.onnx" and DATA.fullmatch(names[1]) and len(names) == 2


def test_reexport_keeps_one_pair_and_a_self_contained_export_drops_the_weights(mini_registry, tmp_path):
    path = tmp_path / "m.onnx"
    x = [np.ones((2, 64), np.float32)]
    to_onnx(_fn(_weights(0)), [("B", 64)], output_path=path, external_data=True)
    first = [p.name for p in tmp_path.iterdir() if DATA.fullmatch(p.name)]
    to_onnx(_fn(_weights(1)), [("B", 64)], output_path=path, external_data=True)
    second = [p.name for p in tmp_path.iterdir() if DATA.fullmatch(p.name)]
    assert len(first) == len(second) == 1 and first != second
    assert allclose(_fn(_weights(1)), path, x)
    to_onnx(_fn(_weights(2)), [("B", 64)], output_path=path, external_data=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx"]
    assert allclose(_fn(_weights(2)), path, x)


def test_external_data_false_over_the_protobuf_limit_names_the_fix(mini_registry, tmp_path, monkeypatch):
    monkeypatch.setattr(write, "PROTOBUF_LIMIT_BYTES", 1000)
    with pytest.raises(InputSpecError, match=r"external_data=False.*external_data=True"):
        to_onnx(_fn(_weights(0)), [("B", 64)], output_path=tmp_path / "m.onnx", external_data=False)
    assert list(tmp_path.iterdir()) == []


def test_stale_temporaries_are_recognised_and_removed(tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(dead.stdout)
    host = saving._host_tag()
    with saving.claim_temp_token() as claimed:
        entries = {
            f"{saving.TEMP_PREFIX}{host}-{dead_pid}-abc": True,  # a process that ended
            f"{saving.TEMP_PREFIX}{claimed}": False,  # this process: a save running in another thread
            # this pid, but no save of this process claims it: an earlier process given the same pid
            # (a container runs each command as the same pid) was killed mid-save
            f"{saving.TEMP_PREFIX}{host}-{os.getpid()}-abc": True,
            f"{saving.TEMP_PREFIX}otherhost-{dead_pid}-abc": False,  # another host, recent: cannot be checked
            f"{saving.TEMP_PREFIX}otherhost-1-old": True,  # another host, a day old
            ".jax2onnx-abcdef.onnx.tmp": True,  # an earlier version's temp file, a day old
            "notes.txt": False,  # not ours
        }
        parent = os.getppid()
        stat = saving._process_stat(parent)
        if stat is not None:  # Linux: a live pid is told apart from a later process given the same pid
            entries[f"{saving.TEMP_PREFIX}{host}-{parent}.{stat[1]}-abc"] = False  # alive, the process that made it
            entries[f"{saving.TEMP_PREFIX}{host}-{parent}.{int(stat[1]) + 1}-abc"] = True  # the pid is another's now
        for name in entries:
            (tmp_path / name).mkdir() if "abc" in name or claimed in name else (tmp_path / name).write_text("x")
        day_ago = time.time() - saving.STALE_SECONDS - 60
        for name in (f"{saving.TEMP_PREFIX}otherhost-1-old", ".jax2onnx-abcdef.onnx.tmp"):
            os.utime(tmp_path / name, (day_ago, day_ago))
        removed = saving.clean_stale_temporaries(tmp_path)
        assert sorted(removed) == sorted(name for name, stale in entries.items() if stale)
        assert sorted(p.name for p in tmp_path.iterdir()) == sorted(name for name, stale in entries.items() if not stale)
    # the save that claimed it has ended: now its entry is stale too
    assert saving.clean_stale_temporaries(tmp_path) == [f"{saving.TEMP_PREFIX}{claimed}"]


@pytest.mark.skipif(not hasattr(os, "waitid") or saving._process_stat(os.getpid()) is None,
                    reason="needs /proc and waitid (Linux) to leave a child exited but not reaped")
def test_the_temp_entry_of_an_exited_but_unreaped_process_is_stale(tmp_path):
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)  # exited, left a zombie: its pid still answers kill(0)
        name = f"{saving.TEMP_PREFIX}{saving._host_tag()}-{child.pid}-abc"
        (tmp_path / name).mkdir()
        assert saving.clean_stale_temporaries(tmp_path) == [name]
    finally:
        child.wait()


_CRASH_HELPER = textwrap.dedent("""
    # Runs without JAX: the saving module alone, loaded from its file. For each step it saves an
    # old pair, then forks a child that saves a new pair and SIGKILLs itself at that step.
    import importlib.util, json, os, signal, sys
    import onnx_ir as ir

    spec = importlib.util.spec_from_file_location("standalone_saving", sys.argv[1])
    saving = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(saving)

    old, new = ir.load(sys.argv[3]), ir.load(sys.argv[4])  # the test's two models, weights inline
    for step in saving.SAVE_STEPS:
        folder = os.path.join(sys.argv[2], step)
        os.makedirs(folder)
        saving.save_with_external_data(old, os.path.join(folder, "m.onnx"))
        pid = os.fork()
        if pid == 0:
            def hook(name, step=step):
                if name == step:
                    os.kill(os.getpid(), signal.SIGKILL)
            saving._STEP_HOOK = hook
            saving.save_with_external_data(new, os.path.join(folder, "m.onnx"))
            os._exit(3)
        _, status = os.waitpid(pid, 0)
        print(json.dumps([step, os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL]), flush=True)
""")


@pytest.mark.skipif(not hasattr(os, "fork"), reason="the crash helper forks (POSIX)")
def test_sigkill_at_every_step_of_an_external_data_save_leaves_a_consistent_pair(tmp_path):
    helper = tmp_path / "crash_helper.py"
    helper.write_text(_CRASH_HELPER)
    work = tmp_path / "work"
    work.mkdir()
    models = [str(tmp_path / f"w{value}.onnx") for value in (1.0, 2.0)]
    for value, path in zip((1.0, 2.0), models, strict=True):
        ir.save(_ir_model(value), path)
    done = subprocess.run([sys.executable, str(helper), saving.__file__, str(work), *models], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    killed = dict(json.loads(line) for line in done.stdout.splitlines())
    assert list(killed) == list(saving.SAVE_STEPS) and all(killed.values()), killed

    x = np.ones((1, 32), np.float32)
    old, new = x @ np.full((32, 32), 1.0, np.float32), x @ np.full((32, 32), 2.0, np.float32)
    committed = saving.SAVE_STEPS.index("model-committed")
    for i, step in enumerate(saving.SAVE_STEPS):
        folder = work / step
        (got,) = run_onnx(str(folder / "m.onnx"), [x])
        want = new if i >= committed else old
        np.testing.assert_array_equal(got, want, err_msg=f"killed at {step!r}: the model reads the wrong weights")
        proto = onnx.load(str(folder / "m.onnx"), load_external_data=False)
        assert allclose(lambda v, w=want: w + 0 * v, proto, [x], base_dir=folder)
        leftovers = [p.name for p in folder.iterdir() if p.name.startswith(saving.TEMP_PREFIX)]
        if step in ("writing", "temp-written", "data-committed"):
            assert leftovers, f"killed at {step!r}: expected the dead save's temp folder"
        # The next save into the folder clears what the killed one left.
        saving.save_with_external_data(_ir_model(3.0), str(folder / "m.onnx"))
        names = sorted(p.name for p in folder.iterdir())
        assert len(names) == 2 and names[0] == "m.onnx" and DATA.fullmatch(names[1]), names
        (got,) = run_onnx(str(folder / "m.onnx"), [x])
        np.testing.assert_array_equal(got, x @ np.full((32, 32), 3.0, np.float32))


def _ir_model(value):
    from onnx import TensorProto, helper, numpy_helper

    w = numpy_helper.from_array(np.full((32, 32), value, np.float32), "W")
    g = helper.make_graph([helper.make_node("MatMul", ["x", "W"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 32])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 32])], [w])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 10
    return ir.from_proto(m)


def test_concurrent_saves_to_one_path_leave_one_consistent_pair(tmp_path):
    import threading

    path = str(tmp_path / "m.onnx")
    values = [1.0, 2.0, 3.0, 4.0]
    errors = []

    def writer(value):
        try:
            for _ in range(5):
                saving.save_with_external_data(_ir_model(value), path)
        except Exception as exc:  # noqa: BLE001 - collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(v,)) for v in values]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    names = sorted(p.name for p in tmp_path.iterdir())
    assert len(names) == 2 and names[0] == "m.onnx" and DATA.fullmatch(names[1]), names
    x = np.ones((1, 32), np.float32)
    (got,) = run_onnx(path, [x])
    assert any(np.array_equal(got, x @ np.full((32, 32), v, np.float32)) for v in values)
