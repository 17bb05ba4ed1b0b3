"""Every lax primitive JAX defines is lowered by an installed pack or declined with a reason
(jax2onnx_lax.inventory.DECLINED), so a JAX upgrade cannot add a primitive unnoticed."""

from jax2onnx import compat
from jax2onnx.lower.registry import get_registry
from jax2onnx_lax.inventory import DECLINED

#: Primitives the interpreter inlines itself (their body is a jaxpr).
_INLINED = (compat.JIT_PRIMITIVES | compat.INLINE_CALL_PRIMITIVES | compat.CUSTOM_JVP_PRIMITIVES
            | compat.CUSTOM_VJP_PRIMITIVES)


def _lowered() -> set[str]:
    return set(get_registry().lowerings()) | set(_INLINED)


def test_every_lax_primitive_is_lowered_or_declined():
    inventory = compat.lax_primitive_names()
    lowered = _lowered()
    unknown = sorted(f"{name} ({module})" for name, module in inventory.items()
                     if name not in lowered and name not in DECLINED)
    assert not unknown, (
        "lax primitives that no pack lowers and jax2onnx_lax.inventory.DECLINED does not list "
        f"(new in this JAX?): {', '.join(unknown)}. Lower them, or decline them there with the reason.")


def test_declined_primitives_are_not_lowered():
    stale = sorted(name for name in DECLINED if name in _lowered())
    assert not stale, f"declined in jax2onnx_lax.inventory but lowered by a pack now: {stale}; remove them"


def test_inventory_sees_the_linalg_and_special_primitives():
    # the walk over JAX's lax modules must reach the submodules, not only jax.lax itself
    inventory = compat.lax_primitive_names()
    for name in ("lu", "eigh", "igamma", "while", "psum", "approx_top_k"):
        assert name in inventory, name
