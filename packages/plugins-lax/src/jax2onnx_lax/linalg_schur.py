"""lax.linalg ``schur`` (real Schur form) and ``eig`` (real input) by LAPACK's algorithm, written
in lax ops and lowered through its jaxpr.

ONNX has no eigen-solver, and the non-symmetric problem needs data-dependent iteration (deflation,
shifts). Rather than hand-building ONNX Loops, this module writes LAPACK's algorithm as a plain JAX
function of one matrix (``lax.while_loop``/``fori_loop``; rows, columns and entries at a traced
index read and written through one-hot MatMuls and masks instead of dynamic shapes), vmaps it
over the batch and lowers its jaxpr with ``ctx.lower_jaxpr`` (the pack's control-flow, gather and
``hessenberg``/``householder_product`` lowerings do the rest). Steps, as ``dgees``/``dgeev`` do them:

1. ``dgebal``: permute rows/columns that isolate an eigenvalue to the ends (``eig`` and ``schur``),
   then scale rows/columns by powers of 2 to balance their norms (``eig`` only); exact operations.
2. Hessenberg reduction (``lax.linalg.hessenberg``) and its orthogonal factor.
3. ``dlahqr``: Francis implicit double-shift QR on the whole matrix, with its deflation criterion
   (Ahues & Kressner), exceptional shifts every 10th iteration without deflation, the search for
   two consecutive small subdiagonal entries to start the bulge, and ``dlanv2``'s standardisation of
   every converged 2x2 block (equal diagonal entries, off-diagonals of opposite sign, or split into
   two real eigenvalues). Eigenvalues come out in the order of T's diagonal, as LAPACK's.
4. ``eig`` vectors, ``dtrevc``-style: back substitution on the quasi-triangular T per eigenvalue
   (complex arithmetic as (real, imag) pairs; a 2x2 diagonal block by Cramer's rule), transformed
   back with the Schur vectors, balancing undone, each vector scaled to unit 2-norm with its
   largest-magnitude component real (``dgeev``'s normalisation, so the vectors equal LAPACK's up to
   rounding, not just up to a phase).

Agreement with JAX (LAPACK 3.12 via scipy), 60 random 3x3..8x8 float64 matrices run as plain JAX:
eigenvalue order identical in all; T identical in 53 (in the others a 2x2 block's basis differs by
a rotation, from a different rounding history of the iterations: T's off-diagonal signs and a
complex eigenvector's overall sign then differ, both equally valid). The testcases compare
quantities that do not depend on that choice.

Cost: every step is sequential, so the graph is a few nested Loops whose bodies onnxruntime runs
per iteration: an 8x8 float32 ``jnp.linalg.eig`` exports ~1.35k nodes (~970 for eigenvalues only),
two thirds of its run time in the bulge-chase Loop body. The port is written in lax primitives
(:mod:`._lapack_ops`: ``where`` rather than ``jnp.where``, MatMuls with constant permutations rather than ``jnp.roll``):
those library functions are jit calls the export recognises and verifies one by one, which was a
third of lowering an eig.

Not reproduced: LAPACK's guards against overflow/underflow (rescaling a matrix with entries near
the float range, ``dtrevc``'s scale factors), and for n >= 75 ``dhseqr`` switches to ``dlaqr0``
(aggressive early deflation), so eigenvalue order there may differ from JAX's on some inputs. A
failure to converge (30 * max(10, n) iterations on one eigenvalue) yields NaN outputs.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax2onnx.plugin import Lowerings

from . import _lapack_ops as lp
from . import _matrix as mx

lowerings = Lowerings()

#: dlahqr's exceptional-shift period (iterations without a deflation).
_KEXSH = 10


# ---------------------------------------------------------------------------------------------
# dgebal


def _balance(a, scale_too):
    """``dgebal`` (LAPACK 3.12's, job 'B' with ``scale_too`` else 'P'): ``(A', perm, d)`` with
    ``A' = D^-1 P^T A P D``, ``P[perm[r], r] = 1``, ``D = diag(d)`` (powers of 2)."""
    n = a.shape[0]
    dtype = a.dtype
    idx = np.arange(n, dtype=np.int32)
    perm = np.arange(n, dtype=np.int32)

    # rows isolating an eigenvalue (zero off the diagonal within columns 0..low) go to the bottom;
    # the scan runs from row low upwards and repeats while a pass moved something
    def row_cond(s):
        return ~s[5]

    def row_body(s):
        a, perm, low, i, moved, done = s
        pass_end = i < 0
        row = lp.pick(a, i, 0)
        can = ~pass_end & ~jnp.any((row != 0) & (idx != i) & (idx <= low))
        a = lp.where(can, lp.swap(a, i, low), a)
        pi, pl = lp.vec_pick(perm, i), lp.vec_pick(perm, low)
        perm = lp.where(can, lp.where(idx == i, pl, lp.where(idx == low, pi, perm)), perm)
        all_done = can & (low == 0)
        low = lp.where(can & (low > 0), low - 1, low)
        moved = moved | can
        # end of a pass: another pass from row low if this one moved a row, else finished
        done = all_done | (pass_end & ~moved)
        i = lp.where(pass_end, low, i - 1)
        moved = lp.where(pass_end, False, moved)
        return a, perm, low, i, moved, done

    a, perm, low, _, _, _ = lax.while_loop(
        row_cond, row_body, (a, perm, jnp.int32(n - 1), jnp.int32(n - 1), jnp.bool_(False), jnp.bool_(n <= 1)))

    # columns isolating an eigenvalue (zero off the diagonal within rows k..low) go to the left
    def col_cond(s):
        return ~s[5]

    def col_body(s):
        a, perm, k, j, moved, done = s
        pass_end = j > low
        col = lp.pick(a, j, 1)
        can = ~pass_end & ~jnp.any((col != 0) & (idx != j) & (idx >= k) & (idx <= low))
        a = lp.where(can, lp.swap(a, j, k), a)
        pj, pk = lp.vec_pick(perm, j), lp.vec_pick(perm, k)
        perm = lp.where(can, lp.where(idx == j, pk, lp.where(idx == k, pj, perm)), perm)
        k = lp.where(can, k + 1, k)
        moved = moved | can
        done = pass_end & ~moved
        j = lp.where(pass_end, k, j + 1)
        moved = lp.where(pass_end, False, moved)
        return a, perm, k, j, moved, done

    a, perm, k, _, _, _ = lax.while_loop(
        col_cond, col_body, (a, perm, jnp.int32(0), jnp.int32(0), jnp.bool_(False), jnp.bool_(n <= 1) | (low == 0)))
    d = jnp.ones((n,), dtype)
    if not scale_too:
        return a, perm, d, k, low

    finfo = np.finfo(dtype)
    sfmin1 = float(finfo.tiny) / float(finfo.eps)
    sfmax1 = 1.0 / sfmin1
    sfmin2 = sfmin1 * 2.0
    sfmax2 = 1.0 / sfmin2
    inside = (idx >= k) & (idx <= low)

    def scale_one(i, s):
        a, d, moved = s
        col, row = lp.pick(a, i, 1), lp.pick(a, i, 0)
        c = jnp.sqrt(jnp.sum(lp.where(inside, col * col, 0)))
        r = jnp.sqrt(jnp.sum(lp.where(inside, row * row, 0)))
        ca = jnp.max(lp.where(idx <= low, jnp.abs(col), 0))
        ra = jnp.max(lp.where(idx >= k, jnp.abs(row), 0))
        skip = (c == 0) | (r == 0)
        s0 = c + r
        one = np.ones((), dtype)

        def up_cond(v):
            f, c, ca, r, g, ra = v
            return (c < g) & (jnp.maximum(jnp.maximum(f, c), ca) < sfmax2) & (jnp.minimum(jnp.minimum(r, g), ra) > sfmin2)

        def up(v):
            f, c, ca, r, g, ra = v
            return f * 2, c * 2, ca * 2, r / 2, g / 2, ra / 2

        f, c, ca, r, g, ra = lax.while_loop(up_cond, up, (one, c, ca, r, r / 2, ra))
        g = c / 2

        def down_cond(v):
            f, c, ca, r, g, ra = v
            return (g >= r) & (jnp.maximum(r, ra) < sfmax2) & (jnp.minimum(jnp.minimum(f, c), jnp.minimum(g, ca)) > sfmin2)

        def down(v):
            f, c, ca, r, g, ra = v
            return f / 2, c / 2, ca / 2, r * 2, g / 2, ra * 2

        f, c, ca, r, g, ra = lax.while_loop(down_cond, down, (f, c, ca, r, g, ra))
        di = lp.vec_pick(d, i)
        skip = skip | ((c + r) >= 0.95 * s0)
        skip = skip | ((f < 1) & (di < 1) & (f * di <= sfmin1))
        skip = skip | ((f > 1) & (di > 1) & (di >= sfmax1 / f))
        f = lp.where(skip, one, f)
        # row i / f, then column i * f (the diagonal entry ends up unchanged, as in LAPACK)
        a = lp.where((idx == i)[:, None], a * (1 / f), a)
        a = lp.where((idx == i)[None, :], a * f, a)
        d = lp.vec_put(d, i, di * f)
        return a, d, moved | ~skip

    def sweep_cond(s):
        return s[2]

    def sweep(s):
        a, d, _ = s
        return lax.fori_loop(k, low + 1, scale_one, (a, d, jnp.bool_(False)))

    a, d, _ = lax.while_loop(sweep_cond, sweep, (a, d, jnp.bool_(n > 1)))
    return a, perm, d, k, low


# ---------------------------------------------------------------------------------------------
# Hessenberg reduction


def _hessenberg(a, want_q=True):
    """``(H, Q)`` with ``A = Q H Q^T``, H upper Hessenberg (gehrd reflectors, orghr's Q); without
    ``want_q`` Q is an empty ``[0, n]`` (the QR sweeps then update nothing)."""
    n = a.shape[0]
    if n <= 2:
        return a, jnp.eye(n, dtype=a.dtype) if want_q else jnp.zeros((0, n), a.dtype)
    packed, taus = lax.linalg.hessenberg(a)
    h = jnp.triu(packed, -1)
    if not want_q:
        return h, jnp.zeros((0, n), a.dtype)
    q = lax.linalg.householder_product(packed[1:, : n - 1], taus[: n - 1])
    q = jnp.zeros((n, n), a.dtype).at[0, 0].set(1).at[1:, 1:].set(q)
    return h, q


# ---------------------------------------------------------------------------------------------
# dlanv2: standardise a 2x2 block


def _lanv2(a, b, c, d):
    """LAPACK ``dlanv2``: ``(a, b, c, d, rt1r, rt1i, rt2r, rt2i, cs, sn)``, the rotation
    ``[[cs, -sn], [sn, cs]]`` bringing ``[[a, b], [c, d]]`` to standard form (c = 0, or a = d and
    b * c < 0). The extreme-range rescaling loop of the complex branch is left out."""
    dtype = a.dtype
    eps = float(np.finfo(dtype).eps)
    zero, one = np.zeros((), dtype), np.ones((), dtype)

    def nz(x):
        return lp.where(x == 0, one, x)

    # case 1: c == 0 -> nothing; case 2: b == 0 -> swap rows and columns
    case1 = c == 0
    case2 = ~case1 & (b == 0)
    case3 = ~case1 & ~case2 & ((a - d) == 0) & (jnp.sign(b) != jnp.sign(c))
    general = ~case1 & ~case2 & ~case3

    temp = a - d
    p = 0.5 * temp
    bcmax = jnp.maximum(jnp.abs(b), jnp.abs(c))
    bcmis = jnp.minimum(jnp.abs(b), jnp.abs(c)) * lp.unit_sign(b) * lp.unit_sign(c)
    scale = nz(jnp.maximum(jnp.abs(p), bcmax))
    z = (p / scale) * p + (bcmax / scale) * bcmis
    real_ev = z >= 4.0 * eps
    # real eigenvalues
    zr = p + lp.sign(jnp.sqrt(scale) * jnp.sqrt(jnp.maximum(z, 0)), p)
    zr_safe = nz(zr)
    ra = d + zr
    rd = d - (bcmax / zr_safe) * bcmis
    tau = nz(lp.lapy2(c, zr))
    rcs, rsn = zr / tau, c / tau
    rb, rc = b - c, zero
    # complex or (almost) equal real eigenvalues: make the diagonal entries equal
    sigma = b + c
    tau2 = nz(lp.lapy2(sigma, temp))
    ccs = jnp.sqrt(0.5 * (1 + jnp.abs(sigma) / tau2))
    csn = -(p / (tau2 * ccs)) * lp.unit_sign(sigma)
    aa = a * ccs + b * csn
    bb = -a * csn + b * ccs
    cc = c * ccs + d * csn
    dd = -c * csn + d * ccs
    b2 = bb * ccs + dd * csn
    c2 = -aa * csn + cc * ccs
    a2 = aa * ccs + cc * csn
    d2 = -bb * csn + dd * ccs
    t2 = 0.5 * (a2 + d2)
    a2 = d2 = t2
    # c2 != 0 and b2 != 0 with equal signs: real eigenvalues after all, split the block
    split = (c2 != 0) & (b2 != 0) & ((b2 >= 0) == (c2 >= 0))
    sab, sac = jnp.sqrt(jnp.abs(b2)), jnp.sqrt(jnp.abs(c2))
    pp = lp.sign(sab * sac, c2)
    tau3 = 1 / jnp.sqrt(nz(jnp.abs(b2 + c2)))
    cs1, sn1 = sab * tau3, sac * tau3
    s_a, s_d, s_b = t2 + pp, t2 - pp, b2 - c2
    s_cs, s_sn = ccs * cs1 - csn * sn1, ccs * sn1 + csn * cs1
    # b2 == 0 (c2 != 0): swap
    swap = (c2 != 0) & (b2 == 0)
    ca_ = lp.where(split, s_a, a2)
    cd_ = lp.where(split, s_d, d2)
    cb_ = lp.where(split, s_b, lp.where(swap, -c2, b2))
    cc_ = lp.where(split | swap, zero, c2)
    ccs_ = lp.where(split, s_cs, lp.where(swap, -csn, ccs))
    csn_ = lp.where(split, s_sn, lp.where(swap, ccs, csn))

    g_a = lp.where(real_ev, ra, ca_)
    g_b = lp.where(real_ev, rb, cb_)
    g_c = lp.where(real_ev, rc, cc_)
    g_d = lp.where(real_ev, rd, cd_)
    g_cs = lp.where(real_ev, rcs, ccs_)
    g_sn = lp.where(real_ev, rsn, csn_)

    out_a = lp.where(case1 | case3, a, lp.where(case2, d, g_a))
    out_d = lp.where(case1 | case3, d, lp.where(case2, a, g_d))
    out_b = lp.where(case1 | case3, b, lp.where(case2, -c, g_b))
    out_c = lp.where(case1 | case3, c, lp.where(case2, zero, g_c))
    out_cs = lp.where(case2, zero, lp.where(general, g_cs, one))
    out_sn = lp.where(case2, one, lp.where(general, g_sn, zero))
    rt1i = lp.where(out_c == 0, zero, jnp.sqrt(jnp.abs(out_b)) * jnp.sqrt(jnp.abs(out_c)))
    return out_a, out_b, out_c, out_d, out_a, rt1i, out_d, -rt1i, out_cs, out_sn


# ---------------------------------------------------------------------------------------------
# dlahqr


def _larfg3(alpha, x2, x3):
    """``dlarfg`` for a vector ``(alpha, x2, x3)``: ``(beta, tau, v2, v3)`` with
    ``(I - tau [1 v2 v3]^T [1 v2 v3]) (alpha x2 x3)^T = (beta 0 0)^T``."""
    xnorm = lp.lapy2(x2, x3)
    zero_x = xnorm == 0
    beta = -lp.sign(lp.lapy2(alpha, xnorm), alpha)
    beta_safe = lp.where(zero_x, 1, beta)
    tau = lp.where(zero_x, 0, (beta_safe - alpha) / beta_safe)
    den = lp.where(zero_x, 1, alpha - beta_safe)
    scal = 1 / den
    return lp.where(zero_x, alpha, beta), tau, lp.where(zero_x, x2, x2 * scal), lp.where(zero_x, x3, x3 * scal)


def _lahqr(h, z):
    """LAPACK ``dlahqr`` with ``wantt = wantz = True`` on the whole matrix (ilo = 0, ihi = n-1):
    ``(T, Z, wr, wi, ok)``."""
    n = h.shape[0]
    dtype = h.dtype
    finfo = np.finfo(dtype)
    ulp = float(finfo.eps)
    smlnum = float(finfo.tiny) * (n / ulp)
    itmax = 30 * max(10, n)
    idx = np.arange(n, dtype=np.int32)
    zero = np.zeros((), dtype)
    wr0 = jnp.zeros((n,), dtype)
    if n == 1:
        return h, z, jnp.diagonal(h), wr0, jnp.bool_(True)

    def diag(a, off):
        """``a[k, k + off]`` for k = 0..n-1 (zero where out of range)."""
        return lp.diag_pad(a, off)

    def search_split(h, low, i):
        """dlahqr's deflation search: the largest k in (low, i] with h[k, k-1] negligible, else low."""
        sub = diag(h, -1)             # h[k, k-1]
        d0 = diag(h, 0)               # h[k, k]
        dm1 = lp.roll(d0, 1)         # h[k-1, k-1]
        sup = lp.roll(diag(h, 1), 1)  # h[k-1, k]
        sub_m1 = lp.roll(sub, 1)     # h[k-1, k-2]
        sub_p1 = lp.roll(sub, -1)    # h[k+1, k]
        hk = jnp.abs(sub)
        tst = jnp.abs(dm1) + jnp.abs(d0)
        extra = lp.where(idx - 2 >= 0, jnp.abs(sub_m1), 0) + lp.where(idx + 1 <= n - 1, jnp.abs(sub_p1), 0)
        tst = lp.where(tst == 0, tst + extra, tst)
        ab = jnp.maximum(hk, jnp.abs(sup))
        ba = jnp.minimum(hk, jnp.abs(sup))
        aa = jnp.maximum(jnp.abs(d0), jnp.abs(dm1 - d0))
        bb = jnp.minimum(jnp.abs(d0), jnp.abs(dm1 - d0))
        s = aa + ab
        s = lp.where(s == 0, 1, s)
        small = (hk <= smlnum) | ((hk <= ulp * tst) & (ba * (ab / s) <= jnp.maximum(smlnum, ulp * (bb * (aa / s)))))
        cand = small & (idx > low) & (idx <= i) & (idx >= 1)
        return jnp.max(lp.where(cand, idx, low)).astype(low.dtype)

    def deflate(state, low):
        h, z, wr, wi, i, _, _, ok = state
        # one eigenvalue (low == i) or a 2x2 block (low == i - 1) standardised by dlanv2
        two = low == i - 1
        # rows / columns i-1 and i are read and written through a [2, n] one-hot selector
        sel = (idx[None, :] == (i - 1 + np.arange(2, dtype=np.int32))[:, None]).astype(dtype)
        block = sel @ h @ sel.T
        a, b, c, d = block[0, 0], block[0, 1], block[1, 0], block[1, 1]
        na, nb, nc, nd, rt1r, rt1i, rt2r, rt2i, cs, sn = _lanv2(a, b, c, d)
        cs = lp.where(two, cs, 1)
        sn = lp.where(two, sn, 0)
        rot = jnp.stack([jnp.stack([cs, sn]), jnp.stack([-sn, cs])])  # [[cs, sn], [-sn, cs]]
        both = (idx == i - 1) | (idx == i)
        # the rotation on rows i-1, i right of the block, on columns i-1, i above it, and on Z's
        # columns; the block itself becomes dlanv2's standard form
        h = lp.where(both[:, None] & (idx > i)[None, :] & two, sel.T @ (rot @ (sel @ h)), h)
        h = lp.where((idx < i - 1)[:, None] & both[None, :] & two, ((h @ sel.T) @ rot.T) @ sel, h)
        new_block = jnp.stack([jnp.stack([na, nb]), jnp.stack([nc, nd])])
        h = lp.where(both[:, None] & both[None, :] & two, sel.T @ new_block @ sel, h)
        z = lp.where(both[None, :] & two, ((z @ sel.T) @ rot.T) @ sel, z)
        # wr[i-1], wi[i-1] only for a 2x2 block
        written = (idx == i) | ((idx == i - 1) & two)
        wr = lp.where(written, jnp.stack([rt1r, lp.where(two, rt2r, d)]) @ sel, wr)
        wi = lp.where(written, jnp.stack([rt1i, lp.where(two, rt2i, zero)]) @ sel, wi)
        return h, z, wr, wi, low - 1, jnp.zeros_like(low), jnp.zeros_like(low), ok

    def sweep(state, low):
        h, z, wr, wi, i, _, kdefl, ok = state
        kdefl = kdefl + 1
        # shifts: exceptional every 10th (20th) iteration without a deflation, else Francis' double
        # shift from the trailing 2x2 block
        exc_bottom = (kdefl % (2 * _KEXSH)) == 0
        exc_top = ~exc_bottom & ((kdefl % _KEXSH) == 0)
        d0 = diag(h, 0)
        sub = diag(h, -1)
        sup = diag(h, 1)
        e_i, e_im1, e_low = lp.onehot(i, n, dtype), lp.onehot(i - 1, n, dtype), lp.onehot(low, n, dtype)
        h_ii, h_im1im1 = d0 @ e_i, d0 @ e_im1
        h_iim1, h_im1i = sub @ e_i, sup @ e_im1
        s_b = jnp.abs(h_iim1) + jnp.abs(sub @ e_im1)
        s_t = jnp.abs(sub @ lp.onehot(low + 1, n, dtype)) + jnp.abs(sub @ lp.onehot(low + 2, n, dtype))
        s_e = lp.where(exc_bottom, s_b, s_t)
        e11 = 0.75 * s_e + lp.where(exc_bottom, h_ii, d0 @ e_low)
        exc = exc_bottom | exc_top
        h11 = lp.where(exc, e11, h_im1im1)
        h12 = lp.where(exc, -0.4375 * s_e, h_im1i)
        h21 = lp.where(exc, s_e, h_iim1)
        h22 = lp.where(exc, e11, h_ii)
        s = jnp.abs(h11) + jnp.abs(h12) + jnp.abs(h21) + jnp.abs(h22)
        s_safe = lp.where(s == 0, 1, s)
        h11, h12, h21, h22 = h11 / s_safe, h12 / s_safe, h21 / s_safe, h22 / s_safe
        tr = (h11 + h22) / 2
        det = (h11 - tr) * (h22 - tr) - h12 * h21
        rtdisc = jnp.sqrt(jnp.abs(det))
        cplx = det >= 0
        r1, r2 = tr + rtdisc, tr - rtdisc
        real_shift = lp.where(jnp.abs(r1 - h22) <= jnp.abs(r2 - h22), r1, r2) * s
        rt1r = lp.where(cplx, tr * s, real_shift)
        rt1i = lp.where(cplx, rtdisc * s, zero)
        rt2r, rt2i = rt1r, -rt1i
        rt1r, rt2r, rt1i, rt2i = (lp.where(s == 0, zero, x) for x in (rt1r, rt2r, rt1i, rt2i))

        # where to start the bulge: the largest m in [low, i-2] whose h[m, m-1] the first reflector
        # would leave negligible (vectorised over m; m = low if none)
        hmm, hm1m = d0, lp.roll(sub, -1)            # h[m, m], h[m+1, m]
        hmm1, hm1m1 = sup, lp.roll(d0, -1)           # h[m, m+1], h[m+1, m+1]
        hm2m1 = lp.roll(sub, -2)                     # h[m+2, m+1]
        h21s = hm1m
        sv = jnp.abs(hmm - rt2r) + jnp.abs(rt2i) + jnp.abs(h21s)
        sv = lp.where(sv == 0, 1, sv)
        h21s = hm1m / sv
        v1 = h21s * hmm1 + (hmm - rt1r) * ((hmm - rt2r) / sv) - rt1i * (rt2i / sv)
        v2 = h21s * (hmm + hm1m1 - rt1r - rt2r)
        v3 = h21s * hm2m1
        sv = jnp.abs(v1) + jnp.abs(v2) + jnp.abs(v3)
        sv = lp.where(sv == 0, 1, sv)
        v1, v2, v3 = v1 / sv, v2 / sv, v3 / sv
        h00 = jnp.abs(sub) * (jnp.abs(v2) + jnp.abs(v3))
        h01 = ulp * jnp.abs(v1) * (jnp.abs(lp.roll(d0, 1)) + jnp.abs(d0) + jnp.abs(hm1m1))
        cand = (h00 <= h01) & (idx > low) & (idx <= i - 2)
        m = jnp.max(lp.where(cand, idx, low)).astype(low.dtype)
        v_first = (lp.vec_pick(v1, m), lp.vec_pick(v2, m), lp.vec_pick(v3, m))

        def chase(k, hz):
            """One reflector of the double-shift step at rows k..k+2 (k..k+1 at the bottom). The
            three rows / columns are picked at once by MatMuls with a [3, n] one-hot selector
            (out-of-range rows pick zeros), which keeps the Loop body short."""
            h, z = hz
            three = k < i - 1  # nr = 3, else nr = 2 (k = i - 1)
            later = k > m
            sel = (idx[None, :] == (k + np.arange(3, dtype=np.int32))[:, None]).astype(dtype)  # [3, n]
            rows3 = sel @ h  # h[k:k+3, :]
            prev = rows3 @ lp.onehot(k - 1, n, dtype)  # h[k:k+3, k-1]
            a1 = lp.where(later, prev[0], v_first[0])
            a2 = lp.where(later, prev[1], v_first[1])
            a3 = lp.where(three, lp.where(later, prev[2], v_first[2]), zero)
            beta, t1, w2, w3 = _larfg3(a1, a2, a3)
            w3 = lp.where(three, w3, zero)
            # column k-1: the chased bulge becomes (beta, 0, 0); the first reflector of a step that
            # starts below l scales h[k, k-1] by (1 - t1) (LAPACK's underflow-safe negation)
            first_row = lp.where(later, beta, prev[0] * (1 - t1))
            write = ((idx == k) & (later | (m > low))) | ((idx == k + 1) & later) | ((idx == k + 2) & later & three)
            h = lp.where(write[:, None] & (idx == k - 1)[None, :], (sel[0] * first_row)[:, None], h)
            # the reflector (1, w2, w3) (w3 = 0 for two rows) at rows k..k+2, and tau times it
            v = jnp.stack([jnp.ones_like(w2), w2, w3])
            u = (t1 * v) @ sel
            # from the left on rows k..k+2, columns k..n-1
            ssum = lp.where(idx >= k, v @ rows3, zero)
            h = h - u[:, None] * ssum[None, :]
            # from the right on columns k..k+2, rows 0..min(k+3, i)
            ssum = lp.where(idx <= jnp.minimum(k + 3, i), h @ (v @ sel), zero)
            h = h - ssum[:, None] * u[None, :]
            z = z - (z @ (v @ sel))[:, None] * u[None, :]
            return h, z

        h, z = lax.fori_loop(m, i, chase, (h, z))
        return h, z, wr, wi, i, state[5] + 1, kdefl, ok

    def body(s):
        h, z, wr, wi, i, its, kdefl, ok, lprev = s
        low = search_split(h, lprev, i)
        h = lp.put(h, low, low - 1, zero, low > 0)
        st = (h, z, wr, wi, i, its, kdefl, ok)
        h, z, wr, wi, i2, its2, kdefl2, ok2 = lax.cond(low >= i - 1, deflate, sweep, st, low)
        ok2 = ok2 & (its2 <= itmax)
        # the active block's lower end low persists between iterations on the same i (LAPACK's
        # search only looks above it); a deflation starts the next block's search from the top
        return h, z, wr, wi, i2, its2, kdefl2, ok2, lp.where(i2 == i, low, 0)

    def cond(s):
        return (s[4] >= 0) & s[7]

    int0 = jnp.int32(0)
    init = (h, z, wr0, wr0, jnp.int32(n - 1), int0, int0, jnp.bool_(True), int0)
    h, z, wr, wi, _, _, _, ok, _ = lax.while_loop(cond, body, init)
    return jnp.triu(h, -1), z, wr, wi, ok


# ---------------------------------------------------------------------------------------------
# dtrevc: eigenvectors of the quasi-triangular T


def _cmul(ar, ai, br, bi):
    return ar * br - ai * bi, ar * bi + ai * br


def _cdiv(ar, ai, br, bi):
    """``(ar + i ai) / (br + i bi)`` by Smith's algorithm (no overflow of ``|b|^2``)."""
    big_r = jnp.abs(br) >= jnp.abs(bi)
    safe_br = lp.where(br == 0, 1, br)
    safe_bi = lp.where(bi == 0, 1, bi)
    e = lp.where(big_r, bi / safe_br, br / safe_bi)
    f = lp.where(big_r, br + bi * e, bi + br * e)
    re = lp.where(big_r, ar + ai * e, ar * e + ai) / f
    im = lp.where(big_r, ai - ar * e, ai * e - ar) / f
    return re, im


def _trevc(t, wr, wi):
    """Right eigenvectors of the quasi-upper-triangular ``t``: ``(X_re, X_im)``, column e the
    eigenvector for ``wr[e] + i wi[e]``, with ``dtrevc``'s normalisation inside its own block (1 on a
    1x1 block; on a 2x2 block ``(1, i wi / b)`` or ``(-wi / c, i)``, conjugated for ``wi < 0``) and
    back substitution upwards. A diagonal entry of ``T - lambda`` below ``smin`` is replaced by
    ``smin`` (``dlaln2``'s perturbation), so repeated eigenvalues give finite vectors."""
    n = t.shape[0]
    dtype = t.dtype
    finfo = np.finfo(dtype)
    ulp = float(finfo.eps)
    smlnum = float(finfo.tiny) * (n / ulp)
    idx = np.arange(n, dtype=np.int32)
    zero = np.zeros((), dtype)
    sub = lp.diag_pad(t, -1)  # t[k, k-1]
    sup = lp.diag_pad(t, 1)   # t[k, k+1]
    bottom = (idx >= 1) & (sub != 0)
    top = lp.roll(bottom, -1) & (idx < n - 1)
    lo = lp.where(bottom, idx - 1, idx)
    b = lp.where(top, sup, lp.roll(sup, 1))    # t[lo, lo+1] of the column's 2x2 block
    c = lp.where(top, lp.roll(sub, -1), sub)   # t[lo+1, lo]
    pair = top | bottom
    s = lp.where(wi < 0, -1.0, 1.0).astype(dtype)
    wabs = jnp.abs(wi)
    first = jnp.abs(b) >= jnp.abs(c)
    b_safe = lp.where(b == 0, 1, b)
    c_safe = lp.where(c == 0, 1, c)
    lo_re = lp.where(first, 1.0, -wabs / c_safe)
    hi_im = s * lp.where(first, wabs / b_safe, 1.0)
    rows = idx[:, None]
    # row r, column e: the column's own block holds its initial values
    x_re = lp.where(rows == idx[None, :], 1.0, 0.0).astype(dtype)
    x_re = lp.where(pair[None, :], lp.where(rows == lo[None, :], lo_re[None, :], 0.0), x_re).astype(dtype)
    x_im = lp.where(pair[None, :] & (rows == lo[None, :] + 1), hi_im[None, :], 0.0).astype(dtype)
    smin = jnp.maximum(ulp * (jnp.abs(wr) + jnp.abs(wi)), smlnum)

    def step(r, x):
        x_re, x_im = x
        j = n - 1 - r
        row_j, row_jm = lp.pick(t, j, 0), lp.pick(t, j - 1, 0)
        rhs_re, rhs_im = -(row_j @ x_re), -(row_j @ x_im)
        rhs2_re, rhs2_im = -(row_jm @ x_re), -(row_jm @ x_im)
        tjj, tmm = lp.entry(t, j, j), lp.entry(t, j - 1, j - 1)
        tjm, tmj = lp.entry(t, j, j - 1), lp.entry(t, j - 1, j)
        is_bottom = lp.vec_pick(bottom.astype(dtype), j) != 0
        is_top = lp.vec_pick(top.astype(dtype), j) != 0
        # 1x1 block: (t[j, j] - lambda) x_j = rhs
        d_re, d_im = tjj - wr, -wi
        tiny = (jnp.abs(d_re) + jnp.abs(d_im)) < smin
        d_re, d_im = lp.where(tiny, smin, d_re), lp.where(tiny, zero, d_im)
        one_re, one_im = _cdiv(rhs_re, rhs_im, d_re, d_im)
        # 2x2 block (rows j-1, j) by Cramer's rule
        m11_re, m11_im = tmm - wr, -wi
        m22_re, m22_im = tjj - wr, -wi
        p_re, p_im = _cmul(m11_re, m11_im, m22_re, m22_im)
        det_re, det_im = p_re - tmj * tjm, p_im
        tiny = (jnp.abs(det_re) + jnp.abs(det_im)) < smin * smin
        det_re, det_im = lp.where(tiny, smin * smin, det_re), lp.where(tiny, zero, det_im)
        n1_re, n1_im = _cmul(rhs2_re, rhs2_im, m22_re, m22_im)
        n1_re, n1_im = n1_re - tmj * rhs_re, n1_im - tmj * rhs_im
        n2_re, n2_im = _cmul(m11_re, m11_im, rhs_re, rhs_im)
        n2_re, n2_im = n2_re - tjm * rhs2_re, n2_im - tjm * rhs2_im
        x1_re, x1_im = _cdiv(n1_re, n1_im, det_re, det_im)
        x2_re, x2_im = _cdiv(n2_re, n2_im, det_re, det_im)
        solve = (j < lo) & ~is_top  # columns whose own block lies below row j
        at_j = (idx == j)[:, None] & solve[None, :]
        at_jm = (idx == j - 1)[:, None] & (solve & is_bottom)[None, :]
        new_j_re = lp.where(is_bottom, x2_re, one_re)
        new_j_im = lp.where(is_bottom, x2_im, one_im)
        x_re = lp.where(at_j, new_j_re[None, :], lp.where(at_jm, x1_re[None, :], x_re))
        x_im = lp.where(at_j, new_j_im[None, :], lp.where(at_jm, x1_im[None, :], x_im))
        return x_re, x_im

    return lax.fori_loop(0, n, step, (x_re, x_im))


def _normalise(v_re, v_im, wi):
    """``dgeev``'s normalisation: unit 2-norm, and a complex vector rotated so its largest-magnitude
    component is real (keeping the sign of that component's real part)."""
    nrm = jnp.sqrt(jnp.sum(v_re * v_re, axis=0) + jnp.sum(v_im * v_im, axis=0))
    nrm = lp.where(nrm == 0, 1, nrm)
    v_re, v_im = v_re / nrm, v_im / nrm
    mag = v_re * v_re + v_im * v_im
    k = jnp.argmax(mag, axis=0)
    rows = np.arange(v_re.shape[0], dtype=np.int32)[:, None] == k[None, :]
    f = jnp.sum(lp.where(rows, v_re, 0), axis=0)
    g = jnp.sum(lp.where(rows, v_im, 0), axis=0)
    dd = lp.lapy2(f, g)
    r = lp.sign(dd, f)
    r_safe = lp.where(r == 0, 1, r)
    cs = lp.where(g == 0, 1, jnp.abs(f) / lp.where(dd == 0, 1, dd))
    sn = lp.where(g == 0, 0, g / r_safe)
    cplx = wi != 0
    cs, sn = lp.where(cplx, cs, 1), lp.where(cplx, sn, 0)
    new_re = cs * v_re + sn * v_im
    new_im = lp.where(rows & cplx[None, :], 0, cs * v_im - sn * v_re)
    return new_re, lp.where(cplx[None, :], new_im, 0)


# ---------------------------------------------------------------------------------------------
# the algorithms on one matrix


def _schur_one(a, want_z):
    """``dgees`` without sorting: ``(T, Z)`` with ``A = Z T Z^T``."""
    n = a.shape[0]
    a_bal, perm, _, _, _ = _balance(a, scale_too=False)
    h, q = _hessenberg(a_bal, want_z)
    t, z, _, _, ok = _lahqr(h, q)
    nan = np.asarray(np.nan, a.dtype)
    t = lp.where(ok, t, nan)
    if not want_z:
        return t, None
    z = lp.perm_matrix(perm, a.dtype) @ z if n > 1 else z
    return t, lp.where(ok, z, nan)


def _eig_one(a, left, right):
    """``dgeev``: ``(wr, wi, [vl_re, vl_im], [vr_re, vr_im])``."""
    dtype = a.dtype
    a_bal, perm, d, _, _ = _balance(a, scale_too=True)
    vectors = left or right
    h, q = _hessenberg(a_bal, vectors)
    t, z, wr, wi, ok = _lahqr(h, q)
    nan = np.asarray(np.nan, dtype)
    outs = [lp.where(ok, wr, nan), lp.where(ok, wi, nan)]
    p = lp.perm_matrix(perm, dtype)
    if left:
        # u^H T = lambda u^H  <=>  T^T conj(u) = lambda conj(u): the right-vector solver on T^T with
        # the index order reversed (upper quasi-triangular again), then conjugated; dtrevc's own
        # choice inside the block equals i * conj of the solver's, hence the swap of the parts
        w_re, w_im = _trevc(t.T[::-1, ::-1], wr[::-1], wi[::-1])
        w_re, w_im = w_re[::-1, ::-1], w_im[::-1, ::-1]
        s = jnp.sign(wi)
        y_re = lp.where(wi != 0, s * w_im, w_re)
        y_im = lp.where(wi != 0, s * w_re, 0)
        u_re, u_im = z @ y_re, z @ y_im
        u_re, u_im = p @ (u_re / d[:, None]), p @ (u_im / d[:, None])
        u_re, u_im = _normalise(u_re, u_im, wi)
        outs += [lp.where(ok, u_re, nan), lp.where(ok, u_im, nan)]
    if right:
        x_re, x_im = _trevc(t, wr, wi)
        v_re, v_im = z @ x_re, z @ x_im
        v_re, v_im = p @ (v_re * d[:, None]), p @ (v_im * d[:, None])
        v_re, v_im = _normalise(v_re, v_im, wi)
        outs += [lp.where(ok, v_re, nan), lp.where(ok, v_im, nan)]
    return outs


def _batched(fn, a, *args):
    """``fn`` on every matrix of ``a [..., n, n]`` (vmapped over the flattened batch)."""
    batch = a.shape[:-2]
    n = a.shape[-1]
    if not batch:
        return fn(a, *args)
    flat = a.reshape((-1, n, n))
    outs = jax.vmap(lambda m: fn(m, *args))(flat)
    return jax.tree_util.tree_map(lambda o: o.reshape(batch + o.shape[1:]), outs)


def schur(a, compute_schur_vectors=True):
    """Real Schur form of ``a [..., n, n]`` (float32/float64) as ``lax.linalg.schur`` returns it."""
    t, z = _batched(_schur_one, a, compute_schur_vectors)
    return (t, z) if compute_schur_vectors else (t,)


def eig(a, compute_left_eigenvectors=False, compute_right_eigenvectors=True):
    """``lax.linalg.eig`` of a real ``a``: eigenvalues, then left, then right eigenvectors, complex."""
    left, right = compute_left_eigenvectors, compute_right_eigenvectors
    outs = _batched(_eig_one, a, left, right)
    w = lax.complex(outs[0], outs[1])
    res = [w]
    for k in range(2, len(outs), 2):
        res.append(lax.complex(outs[k], outs[k + 1]))
    return res


# ---------------------------------------------------------------------------------------------
# lowerings: trace the functions above for the operand's shape and lower their jaxpr


def _square_real(ctx, what):
    aval = ctx.avals_in[0]
    if np.dtype(aval.dtype).kind == "c":
        raise NotImplementedError(
            f"{ctx.primitive}: complex input is not supported by the ONNX lowering (real float32/float64 "
            f"only: {what}). For a complex matrix, export the real 2n x 2n form [[Re, -Im], [Im, Re]] instead "
            "(its eigenvalues are the matrix's and their conjugates)."
        )
    m, n = mx.static_matrix_dims(ctx, aval, "the matrix")
    if m != n:
        raise NotImplementedError(f"{ctx.primitive}: the matrix must be square, got {aval.shape}")
    return aval


@lowerings.register("schur")
def lower_schur(ctx, a):
    p = ctx.params
    if p.get("sort_eig_vals"):
        raise NotImplementedError(
            "schur: sort_eig_vals=True (reordering the Schur form by select_callable, LAPACK's trsen) has no "
            "ONNX lowering; export with sort_eig_vals=False (the default) and reorder outside the model."
        )
    if p.get("select_callable") is not None:
        raise NotImplementedError(
            "schur: select_callable has no ONNX lowering (it only applies with sort_eig_vals=True); drop it."
        )
    _square_real(ctx, "the complex Schur form is not; for a real matrix use jax.scipy.linalg.schur(a, output='real')")
    want_z = bool(p.get("compute_schur_vectors", True))
    return ctx.lower_function(lambda x: schur(x, want_z), [a])


@lowerings.register("eig")
def lower_eig(ctx, a):
    _square_real(ctx, "complex eigenvalues of a real matrix are supported, complex matrices are not")
    left = bool(ctx.params.get("compute_left_eigenvectors", False))
    right = bool(ctx.params.get("compute_right_eigenvectors", True))
    return ctx.lower_function(lambda x: eig(x, left, right), [a])
