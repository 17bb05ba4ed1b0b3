"""keras.layers.LSTM, GRU, SimpleRNN and Bidirectional(...) of them → ONNX ``LSTM``, ``GRU``, ``RNN``.

Keras's cells are exactly ONNX's equations at their default activations (sigmoid gates, tanh
candidate and output): only the gate order differs (Keras LSTM i|f|c|o, ONNX i|o|f|c; GRU is z|r|h
in both), and a GRU with ``reset_after=True`` (Keras's default) is ONNX's
``linear_before_reset=1``. The weights are rearranged on the initializers themselves (ops only
for weights that are not constants). onnxruntime runs only the time-major layout, so one Transpose feeds the op and
one (with a Reshape) restores Keras's batch-first result. ``Bidirectional`` with ``merge_mode="concat"`` is one bidirectional op.

Declined (Keras's own ``lax.scan`` loop is lowered instead): masks, initial or returned states,
stateful layers, other activations, ``go_backwards`` with ``return_sequences`` (Keras returns that
sequence in processing order), merge modes other than concat.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from jax2onnx.fusion import Operands, const_array, is_array
from jax2onnx.plugin import Lowerings

from ._fusion import call_layer, mark_name, one_output_like, patch, plain_float32, relative_name

lowerings = Lowerings()

RECURRENT = "recurrent"

#: kind -> (ONNX op, gates per cell, Keras gate order as indices into ONNX's order)
_KINDS = {"lstm": ("LSTM", 4, (0, 3, 1, 2)), "gru": ("GRU", 3, (0, 1, 2)), "rnn": ("RNN", 1, (0,))}


def _kind(layer: Any) -> str | None:
    name = type(layer).__name__
    return {"LSTM": "lstm", "GRU": "gru", "SimpleRNN": "rnn"}.get(name)


def _mappable(layer: Any, prefix: str) -> dict[str, Any] | None:
    """The static description of one direction, or None when its cell is not ONNX's."""
    import keras

    kind = _kind(layer)
    if kind is None or getattr(layer, "stateful", False) or getattr(layer, "return_state", False):
        return None
    cell = layer.cell
    if cell.activation is not keras.activations.tanh:
        return None
    if kind != "rnn" and cell.recurrent_activation is not keras.activations.sigmoid:
        return None
    if getattr(cell, "kernel", None) is None or getattr(cell, "recurrent_kernel", None) is None:
        return None
    bias = getattr(cell, "bias", None)
    return {
        "kind": kind,
        "units": int(cell.units),
        "kernel": relative_name(cell.kernel.path, prefix),
        "recurrent_kernel": relative_name(cell.recurrent_kernel.path, prefix),
        "bias": relative_name(bias.path, prefix) if bias is not None else None,
        "reset_after": bool(getattr(cell, "reset_after", False)),
        "go_backwards": bool(layer.go_backwards),
    }


def _plain_input(layer: Any, x: Any) -> bool:
    from keras.src import backend

    return is_array(x) and x.ndim == 3 and plain_float32(layer, x) and backend.get_keras_mask(x) is None


def _patch_rnn(original):
    def call(self, sequences, initial_state=None, mask=None, training=False):
        direction = _mappable(self, self.path) if initial_state is None and mask is None else None
        if (
            direction is None
            or not _plain_input(self, sequences)
            or (self.go_backwards and self.return_sequences)
        ):
            return original(self, sequences, initial_state=initial_state, mask=mask, training=training)
        return call_layer(RECURRENT, self, lambda layer, x: original(layer, x, training=training), {"x": sequences},
                          directions=(tuple(sorted(direction.items())),), return_sequences=bool(self.return_sequences))

    return call


def _patch_bidirectional(original):
    def call(self, sequences, initial_state=None, mask=None, training=None):
        fwd, bwd = self.forward_layer, self.backward_layer
        dirs = None
        if initial_state is None and mask is None and self.merge_mode == "concat" and not self.return_state:
            f, b = _mappable(fwd, self.path), _mappable(bwd, self.path)
            if (
                f is not None and b is not None and f["kind"] == b["kind"] and f["units"] == b["units"]
                and not f["go_backwards"] and b["go_backwards"] and fwd.return_sequences == bwd.return_sequences
                and f["reset_after"] == b["reset_after"]
            ):
                dirs = (tuple(sorted(f.items())), tuple(sorted(b.items())))
        if dirs is None or not _plain_input(self, sequences):
            return original(self, sequences, initial_state=initial_state, mask=mask, training=training)
        return call_layer(RECURRENT, self, lambda layer, x: original(layer, x, training=training), {"x": sequences},
                          directions=dirs, return_sequences=bool(fwd.return_sequences))

    return call


_RNN = "keras.src.layers.rnn"
patches = [
    patch(f"{_RNN}.lstm", "LSTM", _patch_rnn),
    patch(f"{_RNN}.gru", "GRU", _patch_rnn),
    patch(f"{_RNN}.simple_rnn", "SimpleRNN", _patch_rnn),
    patch(f"{_RNN}.bidirectional", "Bidirectional", _patch_bidirectional),
]


# ---------------------------------------------------------------------------------------------
# Lowering


def _onnx_gates(w: np.ndarray, n_gates: int, order: tuple[int, ...], axis: int) -> np.ndarray:
    return np.concatenate([np.split(w, n_gates, axis=axis)[i] for i in order], axis=axis)


def _direction_weights_np(ops: Operands, d: dict[str, Any]) -> tuple[np.ndarray, ...] | None:
    """(W, R, B) of one direction in ONNX's layout, (gates*H, in), (gates*H, H), (2*gates*H,),
    computed on the weights themselves: one initializer each, whatever the folding pass's limits."""
    _, n_gates, order = _KINDS[d["kind"]]
    h = d["units"]
    kernel, rec = const_array(ops[d["kernel"]], lazy=False), const_array(ops[d["recurrent_kernel"]], lazy=False)
    bias = const_array(ops[d["bias"]], lazy=False) if d["bias"] is not None else np.zeros([n_gates * h], np.float32)
    if kernel is None or rec is None or bias is None:
        return None
    w = _onnx_gates(kernel, n_gates, order, 1).T
    r = _onnx_gates(rec, n_gates, order, 1).T
    if bias.ndim == 2:  # GRU reset_after: (input bias, recurrent bias)
        b = bias.reshape(-1)
    else:  # one bias: the input side's; ONNX adds W's and R's, so R's is zero
        b = np.concatenate([_onnx_gates(bias, n_gates, order, 0), np.zeros([n_gates * h], bias.dtype)])
    return w, r, b


def _stacked_weights(ctx: Any, ops: Operands, dirs: list[dict[str, Any]]) -> list[Any]:
    """W, R, B with a leading directions axis, as initializers, or as ops on traced weights."""
    arrays = [_direction_weights_np(ops, d) for d in dirs]
    if all(a is not None for a in arrays):
        return [ctx.const(np.stack([a[i] for a in arrays]).astype(np.float32)) for i in range(3)]
    weights = [_direction_weights(ctx, ops, d) for d in dirs]
    return [ctx.op.Concat(*[ctx.op.Unsqueeze(w[i], ctx.i64([0])) for w in weights], axis=0) for i in range(3)]


def _reorder(ctx: Any, w: Any, n_gates: int, order: tuple[int, ...], axis: int, h: int) -> Any:
    """Gate blocks (``h`` wide) of ``w`` along ``axis`` from Keras's order into ONNX's."""
    if order == tuple(range(n_gates)):
        return w
    parts = ctx.op.Split(w, ctx.i64([h] * n_gates), axis=axis, _outputs=n_gates)
    return ctx.op.Concat(*[parts[i] for i in order], axis=axis)


def _direction_weights(ctx: Any, ops: Operands, d: dict[str, Any]) -> tuple[Any, Any, Any]:
    """:func:`_direction_weights_np` with ops, for weights that are not initializers."""
    _, n_gates, order = _KINDS[d["kind"]]
    h = d["units"]
    w = ctx.op.Transpose(_reorder(ctx, ops[d["kernel"]], n_gates, order, 1, h), perm=[1, 0])
    r = ctx.op.Transpose(_reorder(ctx, ops[d["recurrent_kernel"]], n_gates, order, 1, h), perm=[1, 0])
    if d["bias"] is None:
        b = ctx.const(np.zeros([2 * n_gates * h], np.float32))
    elif len(ops.shape(d["bias"])) == 2:
        b = ctx.op.Reshape(ops[d["bias"]], ctx.i64([2 * n_gates * h]))
    else:
        b = ctx.op.Concat(_reorder(ctx, ops[d["bias"]], n_gates, order, 0, h),
                          ctx.const(np.zeros([n_gates * h], np.float32)), axis=0)
    return w, r, b


@lowerings.register_call(mark_name(RECURRENT))
def lower_recurrent(ctx, *ins):
    ops = Operands(ctx, ins)
    p = ctx.marked.params
    dirs = [dict(d) for d in p["directions"]]
    kind, h = dirs[0]["kind"], dirs[0]["units"]
    x_shape = ops.shape("x")
    n_dir = len(dirs)
    out_shape = (x_shape[0], x_shape[1], n_dir * h) if p["return_sequences"] else (x_shape[0], n_dir * h)
    if not one_output_like(ctx, out_shape):
        return None
    op_type = _KINDS[kind][0]
    stacked = _stacked_weights(ctx, ops, dirs)
    if n_dir == 2:
        direction = "bidirectional"
    else:
        direction = "reverse" if dirs[0]["go_backwards"] else "forward"
    attrs: dict[str, Any] = {"hidden_size": h, "direction": direction}
    if kind == "gru":
        attrs["linear_before_reset"] = 1 if dirs[0]["reset_after"] else 0
    n_out = 3 if kind == "lstm" else 2
    # onnxruntime runs only the time-major layout (layout=0): (seq, batch, features).
    x = ctx.op.Transpose(ops["x"], perm=[1, 0, 2])
    outs = getattr(ctx.op, op_type)(x, *stacked, _outputs=n_out, **attrs)
    y, y_h = outs[0], outs[1]
    if p["return_sequences"]:  # Y: (seq, directions, batch, hidden) → (batch, seq, directions * hidden)
        return ctx.op.Reshape(ctx.op.Transpose(y, perm=[2, 0, 1, 3]), ctx.i64([0, 0, n_dir * h]))
    if n_dir == 1:  # Y_h: (directions, batch, hidden)
        return ctx.op.Squeeze(y_h, ctx.i64([0]))
    return ctx.op.Reshape(ctx.op.Transpose(y_h, perm=[1, 0, 2]), ctx.i64([0, n_dir * h]))
