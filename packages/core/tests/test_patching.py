"""Patches are per export, per thread: other threads and later code never see them, and a patched
attribute, once its dispatcher is installed, stays the same object."""

from __future__ import annotations

import inspect
import pickle
import signal
import sys
import threading
import types

import pytest
from jax2onnx.lower.patching import applied_patches, install_dispatchers
from jax2onnx.plugin import Patch


def _make_module():
    mod = types.ModuleType("patch_target")

    def op(x):
        """The original."""
        return ("original", x)

    op.custom_attr = 42
    mod.op = op

    class Base:
        def run(self, x):
            return ("base", x)

    class Thing(Base):
        def __call__(self, x):
            return ("call", x)

        @staticmethod
        def helper(x):
            return ("static", x)

    mod.Base, mod.Thing = Base, Thing
    return mod


def _tagged(tag):
    return lambda original: (lambda *a, **k: (tag, original(*a, **k)))


def _behaves_as_original(mod):
    assert mod.op(1) == ("original", 1) and mod.op.custom_attr == 42 and mod.op.__doc__ == "The original."
    assert mod.Thing()(2) == ("call", 2) and mod.Thing().run(3) == ("base", 3) and mod.Thing.helper(4) == ("static", 4)


def test_patch_applies_only_inside_the_block_and_the_dispatcher_stays_the_same_object():
    mod = _make_module()
    op = mod.op
    patches = [Patch(mod, "op", _tagged("p")), Patch(mod.Thing, "__call__", _tagged("p")),
               Patch(mod.Thing, "helper", _tagged("p")), Patch(mod.Thing, "run", _tagged("p"))]
    with applied_patches(patches):
        assert mod.op(1) == ("p", ("original", 1))
        t = mod.Thing()
        assert t(2) == ("p", ("call", 2))
        assert t.run(3) == ("p", ("base", 3))
        inside = (mod.op, vars(mod.Thing)["__call__"], vars(mod.Thing)["helper"], vars(mod.Thing)["run"])
    assert mod.op is not op and mod.op.__wrapped__ is op  # a dispatcher, installed once
    _behaves_as_original(mod)
    with applied_patches(patches):  # a second export finds the same objects in place
        assert (mod.op, vars(mod.Thing)["__call__"], vars(mod.Thing)["helper"], vars(mod.Thing)["run"]) == inside
        assert mod.Thing()(2) == ("p", ("call", 2))
    assert (mod.op, vars(mod.Thing)["__call__"], vars(mod.Thing)["helper"], vars(mod.Thing)["run"]) == inside
    _behaves_as_original(mod)


def test_install_dispatchers_settles_identity_before_any_export():
    mod = _make_module()
    op = mod.op
    install_dispatchers([Patch(mod, "op", _tagged("p")), Patch(mod, "absent", _tagged("p")),
                         Patch(mod.Thing, "run", lambda original: original)])  # this one declines
    dispatcher = mod.op
    assert dispatcher is not op and dispatcher(1) == ("original", 1)
    assert "run" not in vars(mod.Thing)  # a declining patch leaves its attribute alone
    install_dispatchers([Patch(mod, "op", _tagged("q"))])  # idempotent
    with applied_patches([Patch(mod, "op", _tagged("p"))]):
        assert mod.op is dispatcher and mod.op(1) == ("p", ("original", 1))
    assert mod.op is dispatcher


def test_the_original_behaviour_after_an_error_in_the_block():
    mod = _make_module()
    with pytest.raises(RuntimeError, match="boom"), applied_patches([Patch(mod, "op", _tagged("p"))]):
        inside = mod.op
        raise RuntimeError("boom")
    assert mod.op is inside
    _behaves_as_original(mod)


def test_a_failing_replacement_factory_leaves_the_original_behaviour():
    mod = _make_module()
    call = vars(mod.Thing)["__call__"]

    def broken(original):
        raise ValueError("factory failed")

    with pytest.raises(ValueError, match="factory failed"):
        with applied_patches([Patch(mod, "op", _tagged("p")), Patch(mod.Thing, "__call__", broken)]):
            pass
    assert vars(mod.Thing)["__call__"] is call  # never installed: its factory failed first
    _behaves_as_original(mod)


def test_other_threads_see_the_original_while_an_export_runs():
    mod = _make_module()
    inside, release = threading.Event(), threading.Event()
    seen = {}

    def exporter():
        with applied_patches([Patch(mod, "op", _tagged("p")), Patch(mod.Thing, "__call__", _tagged("p"))]):
            inside.set()
            release.wait(10)
            seen["exporter"] = (mod.op(1), mod.Thing()(2)[0])

    t = threading.Thread(target=exporter)
    t.start()
    assert inside.wait(10)
    # The attribute holds a dispatcher now, but it behaves exactly like the original here.
    during = mod.op
    seen["other"] = (mod.op(1), mod.Thing()(2)[0], mod.op.custom_attr, mod.op.__doc__)
    assert inspect.signature(mod.op) == inspect.signature(lambda x: None)
    release.set()
    t.join(10)
    assert seen["other"] == (("original", 1), "call", 42, "The original.")
    assert seen["exporter"] == (("p", ("original", 1)), "p")
    assert mod.op is during  # the export's end changes nothing another thread can see


def test_two_threads_with_different_patches_of_one_attribute_each_get_their_own():
    mod = _make_module()
    barrier = threading.Barrier(2)
    results: dict[str, list] = {"a": [], "b": []}

    def worker(tag):
        for _ in range(20):
            with applied_patches([Patch(mod, "op", _tagged(tag))]):
                barrier.wait(10)  # both inside at once
                results[tag].append(mod.op(0)[0])
                barrier.wait(10)  # neither leaves before the other has called

    threads = [threading.Thread(target=worker, args=(t,)) for t in "ab"]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert results == {"a": ["a"] * 20, "b": ["b"] * 20}
    _behaves_as_original(mod)


def test_a_dispatcher_pickles_as_its_original():
    name = "jax2onnx_test_pickle_target"
    mod = types.ModuleType(name)

    def f(x):
        return ("original", x)

    f.__module__, f.__qualname__ = name, "f"
    mod.f = f
    sys.modules[name] = mod
    try:
        install_dispatchers([Patch(mod, "f", _tagged("p"))])
        assert mod.f is not f
        data = pickle.dumps(mod.f)
        assert b"patching" not in data  # a reference to the module's name, unpicklable without jax2onnx otherwise
        assert pickle.loads(data)(1) == ("original", 1)
    finally:
        del sys.modules[name]


@pytest.fixture
def ctrl_c_raises():
    """Python's own SIGINT handler for the test: a process started in the background by a shell
    without job control inherits SIGINT ignored (so would the test runner), and Ctrl-C must raise."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


@pytest.mark.skipif(threading.current_thread() is not threading.main_thread(), reason="signals go to the main thread")
@pytest.mark.usefixtures("ctrl_c_raises")
def test_ctrl_c_while_installing_is_delivered_after_and_the_block_never_runs():
    mod = _make_module()
    handler = signal.getsignal(signal.SIGINT)

    def interrupting(original):
        signal.raise_signal(signal.SIGINT)  # Ctrl-C lands in the middle of installing
        return _tagged("p")(original)

    with pytest.raises(KeyboardInterrupt):
        with applied_patches([Patch(mod, "op", _tagged("p")), Patch(mod.Thing, "__call__", interrupting)]):
            pytest.fail("the block must not run once Ctrl-C was pressed")
    _behaves_as_original(mod)
    assert signal.getsignal(signal.SIGINT) is handler


@pytest.mark.skipif(threading.current_thread() is not threading.main_thread(), reason="signals go to the main thread")
@pytest.mark.usefixtures("ctrl_c_raises")
def test_ctrl_c_inside_the_block_leaves_the_original_behaviour():
    mod = _make_module()
    with pytest.raises(KeyboardInterrupt), applied_patches([Patch(mod, "op", _tagged("p"))]):
        signal.raise_signal(signal.SIGINT)
        for _ in range(1000):  # the handler runs at the next bytecode boundary
            pass
    _behaves_as_original(mod)


def test_a_user_monkeypatch_during_an_export_is_left_in_place():
    mod = _make_module()

    def mine(x):
        return ("mine", x)

    with applied_patches([Patch(mod, "op", _tagged("p"))]):
        mod.op = mine
    assert mod.op is mine
