"""The fusion kit: what a pack needs to turn a library's layer into one ONNX op.

A library pack (NNX, Linen, Equinox, Keras, ...) patches a layer's ``__call__`` to run it as a
:func:`jax2onnx.plugin.marked_call` region whose body is the library's own code, with the layer's
weights passed in as operands, and registers a ``call:<mark>`` lowering that emits the fused op or
returns ``None`` to decline (core then lowers the body). Everything here is independent of the
library: the pack supplies how to take its layer apart into named arrays and put it back together;
the kit does the rest.

- Region side: :func:`call_region` (the marked region with weights as named operands),
  :func:`path_name` (a pytree path as an operand name), :func:`static_bool`, and
  :func:`call_in_vmaps` (a layer called inside ``jax.vmap`` gets its region over the whole batch).
- Lowering side: :class:`Operands` (operands by name), :func:`one_output_like` (the forward call,
  not ``grad``'s forward part), :func:`region_body`/:func:`find_eqns` (read the library's own
  equations), weight helpers (:func:`const_array`, :func:`reshape_const`, :func:`concat_weights`,
  :func:`norm_weight`).
- Emission shared by several libraries: dense layers (:func:`lower_dense`,
  :func:`lower_dense_general`, :func:`lower_einsum_bias`), channels-last ↔ ONNX's channels-first layout
  (:func:`to_nchw`, :func:`to_nhwc`, :func:`channels_first`), convolutions read from the body's ``conv_general_dilated``
  (:func:`lower_conv_channels_last`, :func:`lower_conv_transpose_channels_last`), ``lax.reduce_window``
  pooling (:func:`pool_lowerings`, :func:`lower_max_pool_channels_last`,
  :func:`lower_avg_pool_channels_last`), the normalizations (:func:`lower_layer_norm`,
  :func:`lower_rms_norm`, :func:`lower_batch_norm`, :func:`lower_group_norm`,
  :func:`lower_instance_norm`) and attention (:func:`lower_dot_product_attention`,
  :func:`flax_attention_lowering`, :func:`lower_multi_head_attention`, :func:`attention_inputs`,
  :func:`additive_mask`).

The normalization and channels-last lowerings read a region by convention: the input operand is
``"x"``, weights are ``"scale"``, ``"bias"``, ``"mean"``, ``"var"``, ``"kernel"``, and the static
params are named as each function says. A pack whose names differ uses the smaller helpers.

The kit is one module per concern (:mod:`.region`, :mod:`.operands`, :mod:`.dense`, :mod:`.conv`,
:mod:`.pooling`, :mod:`.norms`, :mod:`.attention`, :mod:`.nan_free`: which values can hold no NaN);
import from ``jax2onnx.fusion`` itself.
"""

from ..plugin import is_array
from .attention import (
    additive_mask,
    attention_inputs,
    flax_attention_lowering,
    lower_dot_product_attention,
    lower_multi_head_attention,
)
from .conv import (
    body_conv,
    channels_first,
    conv_attrs,
    conv_padding_mode,
    conv_pads,
    ints_per_axis,
    lower_conv_channels_last,
    lower_conv_transpose_channels_last,
    to_nchw,
    to_nhwc,
)
from .dense import (
    lower_dense,
    lower_dense_general,
    lower_einsum_bias,
    lower_embedding_attend,
    lower_embedding_lookup,
)
from .interceptors import linen_calls
from .norms import (
    lower_batch_norm,
    lower_group_norm,
    lower_instance_norm,
    lower_layer_norm,
    lower_rms_norm,
    norm_axes,
    norm_weight,
    stash_type,
)
from .operands import (
    Operands,
    concat_weights,
    const_array,
    find_eqns,
    matmul_bias,
    one_output_like,
    region_body,
    reshape_const,
    static_ints,
)
from .pooling import (
    MAX_POOL_OPS,
    lower_avg_pool_channels_last,
    lower_max_pool_channels_last,
    max_pool,
    max_pool_dtypes,
    pool_attrs,
    pool_lowerings,
    same_pads,
)
from .region import (
    call_in_vmaps,
    call_region,
    key_name,
    path_name,
    static_bool,
)

__all__ = [
    "Operands",
    "additive_mask",
    "attention_inputs",
    "body_conv",
    "call_in_vmaps",
    "call_region",
    "channels_first",
    "concat_weights",
    "conv_attrs",
    "conv_padding_mode",
    "conv_pads",
    "flax_attention_lowering",
    "const_array",
    "find_eqns",
    "ints_per_axis",
    "is_array",
    "key_name",
    "linen_calls",
    "lower_avg_pool_channels_last",
    "lower_batch_norm",
    "lower_conv_channels_last",
    "lower_dense",
    "lower_dense_general",
    "lower_einsum_bias",
    "lower_embedding_attend",
    "lower_embedding_lookup",
    "lower_conv_transpose_channels_last",
    "lower_dot_product_attention",
    "lower_group_norm",
    "lower_instance_norm",
    "lower_layer_norm",
    "lower_max_pool_channels_last",
    "lower_multi_head_attention",
    "lower_rms_norm",
    "matmul_bias",
    "max_pool",
    "max_pool_dtypes",
    "MAX_POOL_OPS",
    "norm_axes",
    "norm_weight",
    "one_output_like",
    "path_name",
    "pool_attrs",
    "pool_lowerings",
    "region_body",
    "reshape_const",
    "same_pads",
    "stash_type",
    "static_bool",
    "static_ints",
    "to_nchw",
    "to_nhwc",
]
