"""The pack as its users get it: installed, found through its entry point, loaded without a warning."""

import warnings

from jax2onnx.registry import PackLoadWarning, PluginRegistry


def test_the_pack_loads_cleanly_and_lowers_its_names():
    registry = PluginRegistry()  # the installed packs, found through their entry points
    with warnings.catch_warnings():
        warnings.simplefilter("error", PackLoadWarning)  # a misspelled hook or an API mismatch fails here
        packs = {p.name: p for p in registry.describe()}
    pack = packs["jax2onnx-mypack"]
    assert pack.error is None, pack.error
    assert pack.lowered == ["call:mypack.mish", "mypack_softclip"]
