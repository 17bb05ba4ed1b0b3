"""numpy emulation of the halving + panel algorithm, internal float32 vs float64 (claim check)."""
import numpy as np, jax, jax.numpy as jnp
def halving(x, dt):
    # x [B, h, h]
    lts = []; h = x.shape[-1]
    while h > 1:
        k = h // 2
        a11, a12, a21, a22 = x[:, :k, :k], x[:, :k, k:], x[:, k:, :k], x[:, k:, k:]
        lt = (a21 @ np.linalg.inv(a11)).astype(dt)
        s = (a22 - lt @ a12).astype(dt)
        lts.append(lt); x = np.concatenate([a11, s], axis=1).reshape(-1, k, k); h = k
    l = np.sqrt(x)
    for lt in reversed(lts):
        k = lt.shape[-1]; q = l.reshape(-1, 2 * k, k); l1, l2 = q[:, :k], q[:, k:]
        l = np.concatenate([np.concatenate([l1, np.zeros_like(l1)], -1), np.concatenate([lt @ l1, l2], -1)], 1)
    return l
def chol(a, dt, panel=32):
    n = len(a); t = a.astype(dt); piv, lts = [], []
    for s in range(0, n - panel, panel):
        d, t12, t21, t22 = t[:panel, :panel], t[:panel, panel:], t[panel:, :panel], t[panel:, panel:]
        lt = (t21 @ np.linalg.inv(d)).astype(dt); t = (t22 - lt @ t12).astype(dt); piv.append(d); lts.append(lt)
    piv.append(t)
    lb = halving(np.stack(piv), dt)
    L = np.zeros((n, n), dt)
    for j in range(len(piv)):
        L[j*panel:(j+1)*panel, j*panel:(j+1)*panel] = lb[j]
        if j < len(lts): L[(j+1)*panel:, j*panel:(j+1)*panel] = lts[j] @ lb[j]
    return L.astype(np.float32)
rng = np.random.default_rng(0)
def spd(n, cond):
    if cond is None:
        g = rng.standard_normal((n, n)); return g @ g.T + n * np.eye(n)
    q, _ = np.linalg.qr(rng.standard_normal((n, n))); return (q * np.geomspace(1, 1 / cond, n)) @ q.T
res = lambda l, a: np.linalg.norm(l.astype(np.float64) @ l.T.astype(np.float64) - a) / np.linalg.norm(a)
print("| n | cond | internal float32 | internal float64 | JAX float32 |")
for n in (64, 256):
    for cond in (None, 1e4, 1e6):
        r = [[], [], []]
        for _ in range(5):
            a = spd(n, cond).astype(np.float32); a64 = a.astype(np.float64)
            r[0].append(res(chol(a, np.float32), a64)); r[1].append(res(chol(a, np.float64), a64)); r[2].append(res(np.asarray(jnp.linalg.cholesky(a)), a64))
        print(f"| {n} | {cond} | " + " | ".join(f"{np.median(x):.1e}" for x in r) + " |")
