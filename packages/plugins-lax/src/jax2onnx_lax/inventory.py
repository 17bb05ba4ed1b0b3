"""The lax primitives no pack lowers, each with the reason (the other half of the coverage inventory).

``tests/test_lax_inventory.py`` holds JAX's whole lax primitive inventory against the installed
packs' lowerings plus this table: a JAX upgrade that adds a primitive fails that test until the
primitive is lowered or declined here, and an entry here that some pack now lowers fails it too.
(A pack may also decline by registering a lowering that raises with the reason, as :mod:`.random`
does for ``rng_bit_generator``/``rng_uniform``; those count as lowered here.)
"""

from __future__ import annotations

_COLLECTIVE = ("a collective over named mesh axes: an ONNX graph runs on one device (a shard_map over a "
               "one-device mesh is inlined, its sharding annotations dropped)")
_TOKEN = "an ordering token for side effects (callbacks, infeed); ONNX graphs have no effect tokens"

DECLINED: dict[str, str] = {
    **{name: _COLLECTIVE for name in (
        "all_gather", "all_gather_done", "all_gather_invariant", "all_gather_reduced", "all_gather_reduced_start",
        "all_gather_start", "all_to_all", "all_to_all_done", "all_to_all_start", "axis_index", "pbroadcast",
        "pbroadcast_done", "pbroadcast_start", "pmax", "pmin", "ppermute", "ppermute_done", "ppermute_start",
        "precv", "preduced", "psend", "psum", "psum_done", "psum_invariant", "psum_invariant_start", "psum_start",
        "ragged_all_to_all", "reduce_scatter", "reduce_scatter_done", "reduce_scatter_start", "unreduced_psum",
        "unreduced_psum_start", "unreduced_reduce_scatter", "unreduced_reduce_scatter_start",
        "vary_unreduced_cast_p", "pgather",
    )},
    "after_all": _TOKEN,
    "create_token": _TOKEN,
    "from_edtype": "extended dtypes other than PRNG keys (whose data travels as uint32) have no ONNX type",
    "to_edtype": "extended dtypes other than PRNG keys (whose data travels as uint32) have no ONNX type",
    "geqp3": "QR with column pivoting (qr(pivoting=True)); not implemented, qr without pivoting converts",
    "scaled_dot": "block-scaled low-precision dot (fp8/mx formats); not implemented",
    "select_and_gather_add": "the JVP of a max-pool window reduction (forward-mode through reduce_window_max); "
                             "not implemented, reverse-mode (select_and_scatter_add) converts",
    # Only in older JAX releases (the declared floor, 0.6.2, still defines them):
    "infeed": "host-to-device transfer queue (TPU infeed); a side effect with no meaning in an ONNX graph",
    "outfeed": "device-to-host transfer queue (TPU outfeed); a side effect with no meaning in an ONNX graph",
    "eigh_jacobi": ("the TPU/GPU Jacobi kernel of eigh; JAX never emits it for a CPU trace (jnp.linalg.eigh "
                    "traces to eigh, which converts)"),
    "for": ("the internal for_loop primitive of JAX < 0.7 (state discharge); user code reaches it only through "
            "jax._src APIs, fori_loop/scan/while_loop convert"),
    "select_and_scatter": "a window scatter with a custom select/scatter computation; not implemented",
}
