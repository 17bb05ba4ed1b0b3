"""lax ``conv_general_dilated`` → ``Conv`` (or ``ConvTranspose`` for input dilation).

Layouts: the lhs and rhs are transposed into ONNX's ``N C spatial`` / ``O I spatial`` order and the
result back into ``out_spec`` order, so NHWC models get one Transpose at each edge and a constant
HWIO kernel folds into an OIHW initializer. ``feature_group_count`` is Conv's ``group``;
``batch_group_count`` moves batch groups into channel groups first.

``lhs_dilation`` (transposed convolution) becomes one ``ConvTranspose`` when the strides are 1 and
the padding fits its (non-negative) pads; otherwise the input is dilated explicitly (zeros inserted
with Pad + Reshape) and convolved. Negative padding crops with a Slice.

onnxruntime implements Conv/ConvTranspose for float16/float32 only. For float64 (and integers)
the same convolution is written as patches (one Slice per kernel tap) contracted with the kernel
in one ``Einsum``: the same sum of products, in the requested precision, never a cast to float32.

Complex convolutions (complex values are ``(real, imag)`` pairs, like every complex lowering of this
pack) are four real convolutions of the parts: ``(xr*wr - xi*wi) + i(xr*wi + xi*wr)``, each lowered
as above (so a complex64 conv runs on onnxruntime's float32 Conv).
"""

from __future__ import annotations

import dataclasses

import numpy as np
from jax import lax
from jax2onnx.plugin import Lowerings

from . import complex_pairs as cp
from .linalg import compute_dtype

lowerings = Lowerings()

_INT64_MIN = np.iinfo(np.int64).min
_INT64_MAX = np.iinfo(np.int64).max


def _transpose(ctx, x, perm):
    perm = [int(p) for p in perm]
    return x if perm == list(range(len(perm))) else ctx.op.Transpose(x, perm=perm)


def _permute(shape, perm):
    return [shape[p] for p in perm]


def _is_int(d) -> bool:
    return isinstance(d, (int, np.integer))


def is_symbolic_same(in_shape, window, strides, padding) -> bool:
    """``padding`` holds symbolic sizes and is exactly lax's "SAME" padding, which is ONNX's
    ``auto_pad="SAME_UPPER"`` (same output size, odd padding at the end): one attribute instead
    of the pad sizes computed in the graph."""
    if all(_is_int(d) for pair in padding for d in pair):
        return False
    try:
        same = lax.padtype_to_pads(tuple(in_shape), tuple(window), tuple(strides), "SAME")
    except Exception:  # noqa: BLE001 - anything JAX cannot decide is simply not SAME
        return False
    return all(str(a) == str(b) for pa, pb in zip(same, padding, strict=True) for a, b in zip(pa, pb, strict=True))


def split_padding(padding, first_axis, keep_static):
    """Negative static padding is a crop (``(starts, ends, axes)`` for a Slice, or None); what is
    left is non-negative. Returns the crop, the pads an explicit Pad must add (``N C spatial``
    order, lows then highs; None when none), and the ``lo.. hi..`` pads left for Conv's attribute:
    all of them when they are static and ``keep_static`` (a native Conv), else zeros."""
    starts, ends, axes = [], [], []
    for i, (lo, hi) in enumerate(padding):
        if (_is_int(lo) and lo < 0) or (_is_int(hi) and hi < 0):
            starts.append(-lo if _is_int(lo) and lo < 0 else 0)
            ends.append(hi if _is_int(hi) and hi < 0 else _INT64_MAX)
            axes.append(first_axis + i)
    crop = (tuple(starts), tuple(ends), tuple(axes)) if axes else None
    padding = [tuple(d if not _is_int(d) else max(int(d), 0) for d in pair) for pair in padding]
    if all(_is_int(d) for pair in padding for d in pair) and keep_static:
        return crop, None, tuple(lo for lo, _ in padding) + tuple(hi for _, hi in padding)
    explicit = None
    if any(not _is_int(d) or d for pair in padding for d in pair):
        lead = [0] * first_axis
        explicit = tuple(lead + [lo for lo, _ in padding] + lead + [hi for _, hi in padding])
    return crop, explicit, (0,) * (2 * len(padding))


def _pad_input(ctx, x, crop, explicit):
    if crop is not None:
        x = ctx.op.Slice(x, *(ctx.i64(v) for v in crop))
    if explicit is not None:
        static = all(_is_int(d) for d in explicit)
        x = ctx.op.Pad(x, ctx.i64(explicit) if static else ctx.shape_tensor(list(explicit)))
    return x


def _dilate_input(ctx, x, steps):
    """Insert ``d-1`` zeros after every element along each dilated spatial axis (the trailing
    ``d-1`` zeros are cropped by the padding); ``steps`` from :class:`ConvPlan`."""
    for axis, d, shape in steps:
        x = ctx.op.Unsqueeze(x, ctx.i64([axis + 1]))
        pads = [0] * (len(shape) + 1) * 2
        pads[len(shape) + 1 + axis + 1] = d - 1
        x = ctx.op.Pad(x, ctx.i64(pads))
        x = ctx.op.Reshape(x, ctx.shape_tensor(shape))
    return x


def _conv_transpose_kernel(ctx, w, w_shape, groups):
    """lax kernel ``[O, I/g, k...]`` → ConvTranspose's ``[I, O/g, k...]``, taps reversed."""
    o, i_per_group, *ks = w_shape
    spatial = len(ks)
    w = ctx.op.Reshape(w, ctx.shape_tensor([groups, o // groups, i_per_group, *ks]))
    w = ctx.op.Transpose(w, perm=[0, 2, 1, *range(3, 3 + spatial)])
    w = ctx.op.Reshape(w, ctx.shape_tensor([groups * i_per_group, o // groups, *ks]))
    axes = list(range(2, 2 + spatial))
    return ctx.op.Slice(w, ctx.i64([-1] * spatial), ctx.i64([_INT64_MIN] * spatial), ctx.i64(axes), ctx.i64([-1] * spatial))


def _conv_as_einsum(ctx, x, w, w_shape, strides, rhs_dilation, groups, out_shape):
    """Conv on already padded ``x`` ([N, C, S...]) as kernel-tap slices + one Einsum."""
    o_total, c_per_group, *kernel_shape = w_shape
    spatial = len(kernel_shape)
    eff = [(k - 1) * d + 1 for k, d in zip(kernel_shape, rhs_dilation, strict=True)]
    taps = []
    for tap in np.ndindex(*kernel_shape):
        starts = [t * d for t, d in zip(tap, rhs_dilation, strict=True)]
        # Counting from the end keeps exactly out_size elements without knowing the input size.
        ends = [-(e - 1 - s) if e - 1 - s > 0 else _INT64_MAX for s, e in zip(starts, eff, strict=True)]
        piece = ctx.op.Slice(x, ctx.i64(starts), ctx.i64(ends), ctx.i64(range(2, 2 + spatial)), ctx.i64(strides))
        taps.append(ctx.op.Unsqueeze(piece, ctx.i64([2])))
    patches = taps[0] if len(taps) == 1 else ctx.op.Concat(*taps, axis=2)  # [N, C, P, O...]
    n_taps = len(taps)
    patches = ctx.op.Reshape(patches, ctx.shape_tensor([0, groups, c_per_group, n_taps, -1]))
    kernel = ctx.op.Reshape(w, ctx.shape_tensor([groups, o_total // groups, c_per_group, n_taps]))
    y = ctx.op.Einsum(patches, kernel, equation="ngcpx,gmcp->ngmx")
    return ctx.op.Reshape(y, ctx.shape_tensor(out_shape))


@dataclasses.dataclass(frozen=True)
class ConvPlan:
    """The layout and padding arithmetic of one ``conv_general_dilated``, from its params and
    avals alone (no ONNX). Shapes are in ONNX's ``N C spatial`` / ``O I spatial`` order."""

    lhs_perm: tuple[int, ...]  # lhs -> N C spatial
    rhs_perm: tuple[int, ...]  # rhs -> O I spatial
    out_perm: tuple[int, ...]  # N C spatial -> JAX's output layout
    compute: np.dtype  # dtype the convolution runs in; the result is cast to ``out_dtype``
    out_dtype: np.dtype
    x_shape: tuple  # lhs in N C spatial, batch groups folded into channels
    w_shape: tuple  # O, I/groups, window
    out_nc: tuple  # the output in N C spatial
    batch_groups: int
    groups: int  # Conv's group (batch groups become channel groups)
    strides: tuple[int, ...]
    lhs_dilation: tuple[int, ...]
    rhs_dilation: tuple[int, ...]
    #: "conv_transpose": one ConvTranspose; "conv_same": Conv with auto_pad=SAME_UPPER; "conv": Conv
    #: with pads; "einsum": kernel-tap slices + one Einsum (no onnxruntime Conv for the dtype)
    path: str
    ct_pads: tuple[int, ...] = ()  # "conv_transpose": its pads
    dilate_steps: tuple = ()  # explicit input dilation: (axis, d, shape after) per dilated axis
    crop: tuple | None = None  # negative padding: Slice (starts, ends, axes)
    explicit_pads: tuple | None = None  # padding a Pad adds (symbolic, or any for the einsum path)
    conv_pads: tuple[int, ...] = ()  # Conv's pads attribute

    @property
    def kernel(self) -> tuple[int, ...]:
        return tuple(self.w_shape[2:])

    @classmethod
    def of(cls, params, lhs_aval, rhs_aval, out_aval, *, conv_dtypes) -> ConvPlan:
        """``conv_dtypes``: what the target onnxruntime runs Conv/ConvTranspose on (else Einsum)."""
        dn = params["dimension_numbers"]
        lhs_spec, rhs_spec, out_spec = (tuple(int(d) for d in s) for s in (dn.lhs_spec, dn.rhs_spec, dn.out_spec))
        spatial = len(lhs_spec) - 2
        strides = tuple(int(s) for s in params["window_strides"])
        padding = [tuple(int(d) if _is_int(d) else d for d in pair) for pair in params["padding"]]
        lhs_dilation = tuple(int(d) for d in (params["lhs_dilation"] or (1,) * spatial))
        rhs_dilation = tuple(int(d) for d in (params["rhs_dilation"] or (1,) * spatial))
        groups, batch_groups = int(params["feature_group_count"]), int(params["batch_group_count"])
        out_dtype = np.dtype(out_aval.dtype)
        compute = compute_dtype(out_dtype)
        native = compute in conv_dtypes

        x_shape = _permute(lhs_aval.shape, lhs_spec)
        # Kernel-gradient convs have the batch as a kernel channel dim: only the window must be static.
        w_shape = [int(d) if _is_int(d) else d for d in _permute(rhs_aval.shape, rhs_spec)]
        kernel = w_shape[2:]
        if not all(_is_int(k) for k in kernel):
            raise NotImplementedError(f"conv_general_dilated with a symbolic window size {kernel}")
        if batch_groups > 1:
            n, c, *sp = x_shape
            x_shape = [n // batch_groups, c * batch_groups, *sp]
            groups = batch_groups
        common = dict(lhs_perm=lhs_spec, rhs_perm=rhs_spec, out_perm=tuple(int(i) for i in np.argsort(out_spec)),
                      compute=compute, out_dtype=out_dtype, w_shape=tuple(w_shape),
                      out_nc=tuple(_permute(out_aval.shape, out_spec)), batch_groups=batch_groups, groups=groups,
                      strides=strides, lhs_dilation=lhs_dilation, rhs_dilation=rhs_dilation)

        eff = [(k - 1) * d + 1 for k, d in zip(kernel, rhs_dilation, strict=True)]
        steps = []
        if any(d > 1 for d in lhs_dilation):
            ct_pads = [(e - 1 - lo, e - 1 - hi) for e, (lo, hi) in zip(eff, padding, strict=True)]
            fits = all(_is_int(a) and _is_int(b) and a >= 0 and b >= 0 for a, b in ct_pads)
            if native and all(s == 1 for s in strides) and fits:
                return cls(**common, x_shape=tuple(x_shape), path="conv_transpose",
                           ct_pads=tuple(a for a, _ in ct_pads) + tuple(b for _, b in ct_pads))
            for i, d in enumerate(lhs_dilation):
                if d > 1:
                    x_shape[2 + i] = x_shape[2 + i] * d
                    steps.append((2 + i, d, tuple(x_shape)))
            # The dilated size is S*d; lax's is (S-1)*d+1, so the last d-1 zeros come off the high side.
            padding = [(lo, hi - (d - 1)) for (lo, hi), d in zip(padding, lhs_dilation, strict=True)]
        common.update(x_shape=tuple(x_shape), dilate_steps=tuple(steps))

        # onnxruntime rejects auto_pad together with dilation; those pad explicitly.
        if native and all(d == 1 for d in rhs_dilation) and is_symbolic_same(x_shape[2:], eff, strides, padding):
            return cls(**common, path="conv_same")
        crop, explicit, conv_pads = split_padding(padding, 2, keep_static=native)
        return cls(**common, path="conv" if native else "einsum", crop=crop, explicit_pads=explicit,
                   conv_pads=conv_pads)


def lower_conv_complex(ctx, lhs, rhs):
    """The ``complex=`` form: four real convolutions of the parts, lowered by this module."""
    params = dict(ctx.params)
    if params.get("preferred_element_type") is not None:
        params["preferred_element_type"] = cp.part_dtype(params["preferred_element_type"])

    def conv(a, b):
        return lax.conv_general_dilated_p.bind(a, b, **params)

    def complex_conv(x, w):
        xr, xi, wr, wi = lax.real(x), lax.imag(x), lax.real(w), lax.imag(w)
        return lax.complex(conv(xr, wr) - conv(xi, wi), conv(xr, wi) + conv(xi, wr))

    return ctx.lower_function(complex_conv, [lhs, rhs])


@lowerings.register("conv_general_dilated", complex=lower_conv_complex)
def lower_conv_general_dilated(ctx, lhs, rhs):
    plan = ConvPlan.of(ctx.params, ctx.avals_in[0], ctx.avals_in[1], ctx.avals_out[0],
                       conv_dtypes=ctx.kernel_dtypes("Conv") & ctx.kernel_dtypes("ConvTranspose"))
    x = _transpose(ctx, ctx.cast(lhs, plan.compute), plan.lhs_perm)
    w = _transpose(ctx, ctx.cast(rhs, plan.compute), plan.rhs_perm)
    if plan.batch_groups > 1:
        bg = plan.batch_groups
        n, c, *sp = _permute(ctx.avals_in[0].shape, plan.lhs_perm)
        x = ctx.op.Reshape(x, ctx.shape_tensor([bg, n // bg, c, *sp]))
        x = ctx.op.Transpose(x, perm=[1, 0, *range(2, 3 + len(sp))])
        x = ctx.op.Reshape(x, ctx.shape_tensor(plan.x_shape))

    if plan.path == "conv_transpose":
        wt = _conv_transpose_kernel(ctx, w, plan.w_shape, plan.groups)
        y = ctx.op.ConvTranspose(x, wt, strides=plan.lhs_dilation, dilations=plan.rhs_dilation, group=plan.groups,
                                 pads=plan.ct_pads)
    elif plan.path == "conv_same":
        y = ctx.op.Conv(_dilate_input(ctx, x, plan.dilate_steps), w, strides=plan.strides,
                        dilations=plan.rhs_dilation, group=plan.groups, auto_pad="SAME_UPPER", kernel_shape=plan.kernel)
    else:
        x = _pad_input(ctx, _dilate_input(ctx, x, plan.dilate_steps), plan.crop, plan.explicit_pads)
        if plan.path == "conv":
            y = ctx.op.Conv(x, w, strides=plan.strides, dilations=plan.rhs_dilation, group=plan.groups,
                            pads=plan.conv_pads, kernel_shape=plan.kernel)
        else:
            y = _conv_as_einsum(ctx, x, w, plan.w_shape, plan.strides, plan.rhs_dilation, plan.groups, plan.out_nc)
    return ctx.cast(_transpose(ctx, y, plan.out_perm), plan.out_dtype)
