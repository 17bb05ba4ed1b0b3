"""ModulePatch overrides reach only the instances an export walks to, only in the exporting
context, and are gone when the export ends; the patched class is never changed."""

from __future__ import annotations

import functools
import sys
import threading

import pytest
from jax2onnx.lower.scoped import reachable, scoped_overrides
from jax2onnx.plugin import ModulePatch


class Layer:
    def __init__(self, tag):
        self.tag = tag

    def __call__(self, x):
        return ("own", self.tag, x)


class Model:
    def __init__(self):
        self.layers = [Layer("a"), Layer("b")]

    def __call__(self, x):
        return [layer(x) for layer in self.layers]


class OwnCall(Layer):
    def __call__(self, x):  # a user subclass with its own __call__: left alone
        return ("subclass", x)


def _tagged(tag):
    return lambda original: (lambda self, x: (tag, original(self, x)))


def _class_state():
    return {cls: dict(vars(cls)) for cls in (Layer, Model, OwnCall)}


def test_instances_reached_from_a_closure_are_overridden_inside_the_block_only():
    model = Model()
    before = _class_state()

    def exported(x):
        return model(x)

    with scoped_overrides([ModulePatch(Layer, "__call__", _tagged("p"))], roots=[exported]):
        assert model(1) == [("p", ("own", "a", 1)), ("p", ("own", "b", 1))]
        assert isinstance(model.layers[0], Layer) and _class_state() == before
    assert type(model.layers[0]) is Layer and model(2) == [("own", "a", 2), ("own", "b", 2)]
    assert _class_state() == before


def test_partials_bound_methods_and_defaults_are_walked():
    a, b, c = Layer("a"), Layer("b"), Layer("c")

    def uses_default(x, layer=c):
        return layer(x)

    roots = [functools.partial(lambda m, x: m(x), a), b.__call__, uses_default]
    found = {id(o) for o in reachable(roots)}
    assert {id(a), id(b), id(c)} <= found


def test_a_subclass_with_its_own_method_and_an_unreached_instance_keep_their_code():
    mine, stray = OwnCall("s"), Layer("stray")
    with scoped_overrides([ModulePatch(Layer, "__call__", _tagged("p"))], roots=[mine]):
        assert mine(1) == ("subclass", 1) and type(mine) is OwnCall
        assert stray(1) == ("own", "stray", 1)


def test_another_thread_runs_the_instance_s_own_code_during_the_block():
    layer = Layer("t")
    seen = []
    inside, done = threading.Event(), threading.Event()

    def other():
        inside.wait()
        seen.append(layer(5))
        done.set()

    t = threading.Thread(target=other)
    t.start()
    with scoped_overrides([ModulePatch(Layer, "__call__", _tagged("p"))], roots=[layer]):
        inside.set()
        done.wait(10)
        assert layer(5) == ("p", ("own", "t", 5))
    t.join()
    assert seen == [("own", "t", 5)]


def test_two_threads_holding_one_instance_each_get_their_own_and_the_last_restores():
    layer = Layer("shared")
    barrier = threading.Barrier(2)
    results = {}

    def export(tag):
        with scoped_overrides([ModulePatch(Layer, "__call__", _tagged(tag))], roots=[layer]):
            barrier.wait()
            results[tag] = layer(0)
            barrier.wait()

    threads = [threading.Thread(target=export, args=(tag,)) for tag in ("x", "y")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == {"x": ("x", ("own", "shared", 0)), "y": ("y", ("own", "shared", 0))}
    assert type(layer) is Layer


@pytest.mark.parametrize("exc", [RuntimeError("export failed"), KeyboardInterrupt()])
def test_an_error_or_ctrl_c_inside_the_block_gives_the_class_back(exc):
    layer = Layer("e")
    with pytest.raises(type(exc)):
        with scoped_overrides([ModulePatch(Layer, "__call__", _tagged("p"))], roots=[layer]):
            assert type(layer) is not Layer
            raise exc
    assert type(layer) is Layer and layer(1) == ("own", "e", 1)


def test_a_dotted_path_whose_module_is_not_imported_is_skipped_without_importing_it():
    name = "jax2onnx_scoped_test_absent_library"
    with scoped_overrides([ModulePatch(f"{name}.Layer", "__call__", _tagged("p"))], roots=[Layer("z")]):
        pass
    assert name not in sys.modules


def test_a_dotted_path_of_an_imported_module_resolves():
    layer = Layer("d")
    with scoped_overrides([ModulePatch(f"{__name__}.Layer", "__call__", _tagged("p"))], roots=[layer]):
        assert layer(3) == ("p", ("own", "d", 3))
    assert type(layer) is Layer


# A tiny library in Linen's style: modules are built during the call, and method calls pass
# through a per-thread interceptor stack (``flax.linen.intercept_methods``).
_STACK = threading.local()


def _intercepted(fn):
    @functools.wraps(fn)
    def method(self, *args):
        call = functools.partial(fn, self)
        for interceptor in getattr(_STACK, "items", []):
            call = functools.partial(interceptor, call, self, fn.__name__, fn)
        return call(*args)

    return method


class Built:
    @_intercepted
    def __call__(self, x):
        return ("built", x)


class BuiltSub(Built):
    @_intercepted
    def __call__(self, x):
        return ("sub", super().__call__(x))


def _make_interceptor():
    import contextlib

    @contextlib.contextmanager
    def scope(lookup):
        def interceptor(next_call, module, name, function, *args):
            replacement = lookup(module, name, function)
            return next_call(*args) if replacement is None else replacement(*args)

        _STACK.items = [*getattr(_STACK, "items", []), interceptor]
        try:
            yield
        finally:
            _STACK.items = _STACK.items[:-1]

    return scope


def test_interceptors_reach_modules_built_during_the_call_and_the_original_runs_once():
    one, two = _make_interceptor(), _make_interceptor()  # two packs, one library: both in the stack
    before = dict(vars(Built))
    patches = [ModulePatch(Built, "__call__", _tagged("p"), interceptor=one),
               ModulePatch(BuiltSub, "__call__", _tagged("q"), interceptor=two)]
    with scoped_overrides(patches, roots=[]):
        assert Built()(1) == ("p", ("built", 1))
        # the subclass's own method is patched by the second pack; its super() call by the first
        assert BuiltSub()(2) == ("q", ("sub", ("p", ("built", 2))))
        assert dict(vars(Built)) == before
    assert getattr(_STACK, "items", []) == [] and Built()(3) == ("built", 3)
