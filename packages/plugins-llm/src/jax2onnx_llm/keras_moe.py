"""KerasHub's sparse mixture-of-experts blocks as onnxruntime's ``com.microsoft.MoE``.

Mixtral, Qwen MoE, Qwen 3 MoE, GPT-OSS and Qwen 3.5 MoE compute every expert for every token (a
batched ``einsum`` over the stacked ``[experts, in, out]`` weights) and weight the outputs by a routing
that is zero outside each token's top-k. Inside an export, each block's call (the exported model's
own instances, :class:`~.frontends.keras_hub.attention.KerasHubPatch`) is a marked region whose body is that
call; where the target runs contrib ops, its lowering emits the router's MatMul and one ``MoE``,
which runs only the k chosen experts per token. Elsewhere (``target="onnx"``, a configuration
below) the body is the graph: the library's own code, in standard ONNX.

Why the op expresses the library's routing (onnxruntime 1.32 CPU, ``moe_cpu.cc``): it takes the
router *logits*, softmaxes them over all experts in float32, keeps the top k and, with
``normalize_routing_weights=1``, divides them by their sum:

- Mixtral: softmax, top-k, renormalised: ``normalize_routing_weights=1``;
- Qwen MoE / Qwen 3 MoE: the same, renormalised only when ``norm_top_k_prob``;
- Qwen 3.5 MoE: softmax, top-k, always renormalised (written into its call): ``= 1``;
- GPT-OSS: top-k of the logits, then a softmax over those k: the softmax's order is the logits'
  and a softmax over k of them equals their renormalised full softmax, so also ``= 1``.

The experts' activation is the op's interleaved SwiGLU (``swiglu_fusion=1``, the only form its CPU
kernel runs): ``G = min(g, limit)``, ``L = clip(l, -limit, limit)``, ``G * sigmoid(alpha G) *
(L + beta)``. Mixtral and Qwen's ``silu(gate) * up`` is ``alpha=1, beta=0`` without a limit;
GPT-OSS's clamped GLU (``(up + 1) * gate * sigmoid(1.702 gate)``, gate clipped above and up both
ways at 7, per-expert biases) is ``alpha=1.702, beta=1, limit=7`` with the op's fc1/fc2 biases.
The Qwen blocks keep gate and up in one ``[E, H, 2I]`` kernel that their call splits in halves
(gate first). Qwen MoE's and Qwen 3.5 MoE's shared expert (a SwiGLU MLP beside the routed ones,
times the sigmoid of a one-column dense) is emitted as standard ops and added. The op's weights
are views of the library's (gate and up columns interleaved, each expert ``[out, in]``):
``Transpose``/``Reshape``/``Concat`` of the initializers, which ``precision="int4"`` quantizes
into ``QMoE`` (core's precision stage).

Declined (the library's code runs): float16/bfloat16 layers (the router's dtype would change:
the op routes in float32 from logits of its input's type), a block with any layer quantized or
given LoRA (Keras' ``quantize`` reaches the inner Dense layers, the router's among them, not the
block), activations other than SiLU, training calls. Equal routing probabilities are the one
place the two can differ: the op breaks a tie toward the higher expert index, ``top_k`` toward
the lower (a measure-zero event for real-valued logits).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import jax.numpy as jnp
import numpy as np
import onnx_ir as ir
from jax2onnx.fusion import Operands, call_region
from jax2onnx.plugin import Lowerings, exporting

from .frontends.keras_hub.attention import KerasHubPatch
from .region_patch import region_patch

lowerings = Lowerings()

KERAS_MOE_MARK = "jax2onnx_llm.keras_moe"
MOE_OP = "MoE"
MS = "com.microsoft"


def _silu(activation: Any) -> bool:
    import keras

    return activation is keras.activations.silu or getattr(activation, "__name__", None) == "silu"


def _plain_float32(layer: Any) -> bool:
    """The block and every layer in it float32, unquantized, without LoRA: the lowering reads the
    variables as the op's float32 weights. (Keras' ``quantize`` reaches the block's inner Dense
    layers, the router's among them, and leaves the block's own ``quantization_mode`` unset.)"""
    for sub in layer._flatten_layers():  # the block itself included
        if getattr(sub, "quantization_mode", None) or getattr(sub, "lora_enabled", False):
            return False
    if layer.compute_dtype != "float32" or layer.variable_dtype != "float32":
        return False
    return all(np.dtype(v.dtype) == np.float32 for v in layer.variables)


def _moe_plan(layer: Any, style: str) -> dict[str, Any] | None:
    """The static facts the lowering needs, or None when the block is configured beyond it."""
    if not _plain_float32(layer):
        return None
    plan: dict[str, Any] = {"style": style, "k": int(layer.top_k), "experts": int(layer.num_experts),
                            "hidden": int(layer.hidden_dim)}
    if style == "gpt_oss":
        experts = layer.experts
        plan.update(normalize=1, alpha=float(experts.alpha), beta=1.0, limit=float(experts.limit),
                    inter=int(experts.intermediate_dim))
        return plan
    experts = layer.expert_bank
    if style == "qwen3_5_moe":  # SiLU and the renormalised top-k are written into its call, not configured
        plan.update(normalize=1, alpha=1.0, beta=0.0, limit=None, inter=int(experts.intermediate_dim))
        return plan
    if not _silu(experts.activation):
        return None
    plan.update(normalize=1 if style == "mixtral" or layer.norm_top_k_prob else 0, alpha=1.0, beta=0.0, limit=None,
                inter=int(experts.intermediate_dim))
    if style == "qwen_moe" and layer.shared_expert_dense.activation_fn not in ("silu", "swish"):
        return None
    return plan


def _exporting(layer: Any, named: dict[str, Any]) -> bool:
    return exporting()


def _moe_region(layer: Any, original: Callable[..., Any], named: dict[str, Any], style: str) -> Any:
    import keras

    if named.get("training"):
        return None
    x = named["hidden_states"]
    plan = _moe_plan(layer, style)
    if plan is None or getattr(x, "ndim", 0) != 3 or np.dtype(x.dtype) != np.float32:
        return None
    variables = list(layer.variables)
    prefix = layer.path
    names = [v.path[len(prefix) + 1:] if v.path.startswith(prefix + "/") else v.path for v in variables]

    def run(leaves: list[Any], x: Any) -> Any:
        # the block's own call (unpatched) on these operands: the body, and the fallback's graph.
        # (Mixtral's and Qwen's attention_mask only weighs the training-time auxiliary loss.)
        with keras.StatelessScope(state_mapping=list(zip(variables, leaves))):
            return original(layer, x)

    return call_region(KERAS_MOE_MARK, run, {"x": jnp.asarray(x)}, [(n, v.value) for n, v in zip(names, variables)],
                       **plan)


_KH = "keras_hub.src.models"
patches = [
    KerasHubPatch(f"{_KH}.mixtral.mixtral_decoder:MixtralSparseMoeBlock", "call",
                  region_patch(_exporting, partial(_moe_region, style="mixtral"))),
    KerasHubPatch(f"{_KH}.qwen_moe.qwen_moe_decoder:QwenSparseMoeBlock", "call",
                  region_patch(_exporting, partial(_moe_region, style="qwen_moe"))),
    KerasHubPatch(f"{_KH}.qwen3_moe.qwen3_moe_decoder:Qwen3SparseMoeBlock", "call",
                  region_patch(_exporting, partial(_moe_region, style="qwen3_moe"))),
    KerasHubPatch(f"{_KH}.gpt_oss.gpt_oss_decoder:GptOssSparseMoeBlock", "call",
                  region_patch(_exporting, partial(_moe_region, style="gpt_oss"))),
    KerasHubPatch(f"{_KH}.qwen3_5_moe.qwen3_5_moe_decoder:Qwen3_5MoeSparseMoeBlock", "call",
                  region_patch(_exporting, partial(_moe_region, style="qwen3_5_moe"))),
]

#: the router's kernel among each block's variables (Mixtral's and the Qwen blocks' unless named here)
_ROUTER = {"gpt_oss": "router/router_dense/kernel", "qwen3_5_moe": "router_gate/kernel"}
#: the shared expert's dense layers (``<prefix>{gate,intermediate,output}_dense/kernel``) and its gate's kernel
_SHARED = {"qwen_moe": ("shared_expert_dense/feedforward_", "shared_expert_gate_dense/kernel"),
           "qwen3_5_moe": ("shared_expert/feedforward_", "shared_expert_gate/kernel")}


def _interleaved(ctx: Any, gate: ir.Value, up: ir.Value, e: int, h: int, i: int) -> ir.Value:
    """fc1 ``[E, 2I, H]`` with gate and up rows interleaved, from ``[E, H, I]`` gate and up
    (data movement only, so the precision stage still reads it as a weight)."""
    pairs = ctx.op.Concat(ctx.op.Unsqueeze(gate, ctx.i64([3])), ctx.op.Unsqueeze(up, ctx.i64([3])), axis=3)
    return ctx.op.Transpose(ctx.op.Reshape(pairs, ctx.i64([e, h, 2 * i])), perm=[0, 2, 1])


def _expert_weights(ctx: Any, ops: Operands, p: dict[str, Any]) -> tuple[ir.Value, ...]:
    """``(fc1 [E, 2I, H], fc1 bias or None, fc2 [E, H, I], fc2 bias or None)`` in the op's layout."""
    e, h, i = p["experts"], p["hidden"], p["inter"]
    if p["style"] == "gpt_oss":  # gate_up already interleaved (gate = [..., ::2], up = [..., 1::2])
        fc1 = ctx.op.Transpose(ops["experts/gate_up_proj"], perm=[0, 2, 1])
        fc2 = ctx.op.Transpose(ops["experts/down_proj"], perm=[0, 2, 1])
        return fc1, ops["experts/gate_up_proj_bias"], fc2, ops["experts/down_proj_bias"]
    if p["style"] == "mixtral":
        gate, up = ops["experts/expert_feedforward_gate_dense"], ops["experts/expert_feedforward_intermediate_dense"]
        fc1 = _interleaved(ctx, gate, up, e, h, i)
    else:  # the Qwen blocks: one [E, H, 2I] kernel split in two, gate = first half, up = second half
        halves = ctx.op.Reshape(ops["experts/expert_feedforward_gate_dense"], ctx.i64([e, h, 2, i]))
        fc1 = ctx.op.Transpose(ctx.op.Reshape(ctx.op.Transpose(halves, perm=[0, 1, 3, 2]), ctx.i64([e, h, 2 * i])),
                               perm=[0, 2, 1])
    fc2 = ctx.op.Transpose(ops["experts/expert_feedforward_output_dense"], perm=[0, 2, 1])
    return fc1, None, fc2, None


def _shared_expert(ctx: Any, ops: Operands, x: ir.Value, style: str) -> ir.Value:
    """Qwen MoE's and Qwen 3.5 MoE's shared expert: ``(silu(x Wg) * (x Wi)) Wo * sigmoid(x Ws)``."""
    base, shared_gate = _SHARED[style]
    gate = ctx.op.MatMul(x, ops[f"{base}gate_dense/kernel"])
    gate = ctx.op.Mul(gate, ctx.op.Sigmoid(gate))
    hidden = ctx.op.Mul(ctx.op.MatMul(x, ops[f"{base}intermediate_dense/kernel"]), gate)
    out = ctx.op.MatMul(hidden, ops[f"{base}output_dense/kernel"])
    return ctx.op.Mul(out, ctx.op.Sigmoid(ctx.op.MatMul(x, ops[shared_gate])))


def _typed(value: ir.Value) -> ir.Value:
    value.type = ir.TensorType(ir.DataType.FLOAT)  # no schema types a contrib op's output
    return value


@lowerings.register(f"call:{KERAS_MOE_MARK}")
def lower_keras_moe(ctx: Any, *ins: ir.Value) -> Any:
    if ctx.options is None or not ctx.target.allows(MOE_OP, MS):
        return None  # standard ONNX: the library's code (the body)
    ops = Operands(ctx, ins)
    p = ctx.marked.params
    x = ctx.op.Reshape(ops["x"], ctx.i64([-1, p["hidden"]]))  # (tokens, hidden), as the library flattens
    logits = ctx.op.MatMul(x, ops[_ROUTER.get(p["style"], "sparse_feedforward_gate_dense/kernel")])
    if p["style"] == "gpt_oss":
        logits = ctx.op.Add(logits, ops["router/router_dense/bias"])
    fc1, b1, fc2, b2 = _expert_weights(ctx, ops, p)
    attrs: dict[str, Any] = dict(k=p["k"], activation_type="swiglu", swiglu_fusion=1,
                                 normalize_routing_weights=p["normalize"], activation_alpha=p["alpha"],
                                 activation_beta=p["beta"])
    if p["limit"] is not None:
        attrs["swiglu_limit"] = p["limit"]
    out = _typed(ctx.op.MoE(x, logits, fc1, b1, fc2, b2, _domain=MS, _name="moe", **attrs))
    if p["style"] in _SHARED:
        out = ctx.op.Add(out, _shared_expert(ctx, ops, x, p["style"]))
    out = ctx.op.Reshape(out, ctx.op.Shape(ops["x"]))
    if p["style"] == "gpt_oss":  # the block's second output: the top-k softmax scattered over all experts
        values, indices = ctx.op.TopK(logits, ctx.i64([p["k"]]), axis=-1, _outputs=2)
        zeros = ctx.op.ConstantOfShape(ctx.op.Shape(logits))  # float32 zeros
        return out, ctx.op.ScatterElements(zeros, indices, ctx.op.Softmax(values, axis=-1), axis=-1)
    return out, logits
