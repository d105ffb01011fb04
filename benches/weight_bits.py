"""Would low-bit operator weights keep the solution and the loss within 1e-3 of f32?

Issue 32, item 3: an operator at <= 1/3 of 6.3 bytes per entry leaves ~1.5 bytes of
weight per entry. This builds 12 cameras' operators of a scene (SciPy CSR from the
`lsplat` package, valid pixels only), rounds the weights to B-bit log codes over
[3e-7, 1] and compares the `average` and ridge least-squares (CG to 1e-10) solutions
and their losses with the f32 operator's.
Usage: python benches/weight_bits.py SCENE.toml (a scene with a dataset).
"""
import sys, numpy as np, scipy.sparse as sp, scipy.sparse.linalg as spl, lsplat
sc = lsplat.Scene.from_toml(sys.argv[1])
cams = sc.camera_names[::4][:12]
Ws, Ys = [], []
for c in cams:
    W = lsplat.operator(sc, c).tocsr()
    lab = sc.labels(c)
    seg = lab['segmentation'].reshape(-1); F = lab['features']
    m = seg >= 0
    Ws.append(W[m]); Ys.append(F[seg[m]].astype(np.float64))
W = sp.vstack(Ws).tocsr(); Y = np.vstack(Ys)
print('rows', W.shape, 'nnz', W.nnz, file=sys.stderr)
def quant_log(w, bits):
    lo, hi = np.log2(3.0e-7), 0.0
    n = 2**bits - 1
    q = np.clip(np.round((np.log2(np.maximum(w, 1e-30)) - lo) / (hi - lo) * n), 0, n)
    return (2.0 ** (lo + q / n * (hi - lo))).astype(np.float32)
def solve(Wq):
    Wd = Wq.astype(np.float64)
    # average: x = (W^T Y) / (W^T 1)
    den = np.asarray(Wd.sum(0)).ravel()[:, None]
    xa = (Wd.T @ Y) / np.maximum(den, 1e-12)
    # lsq: min ||W x - Y||^2 + lam||x||^2, per channel, CG on normal equations
    lam = 1e-4
    A = spl.LinearOperator((Wd.shape[1],) * 2, matvec=lambda v: Wd.T @ (Wd @ v) + lam * v)
    xl = np.column_stack([spl.cg(A, Wd.T @ Y[:, k], rtol=1e-10, maxiter=400)[0] for k in range(Y.shape[1])])
    return xa, xl
def loss(Wq, x):  # masked L1 of the f32 operator's render... evaluated with the given operator
    return np.abs(Wq.astype(np.float64) @ x - Y).mean()
xa0, xl0 = solve(W)
def quant_float(w, mantissa):
    # A float with `mantissa` stored bits (compact's 16-bit weights: 11), nearest.
    m, e = np.frexp(w.astype(np.float64))
    return np.ldexp(np.round(m * 2.0 ** (mantissa + 1)) / 2.0 ** (mantissa + 1), e).astype(np.float32)
variants = [(f'{b}-bit log weights', b) for b in (8, 10, 12, 14)] + [('16-bit float, 11 mantissa bits (as compact)', None)]
for name, bits in variants:
    Wq = W.copy()
    Wq.data = quant_log(W.data, bits) if bits is not None else quant_float(W.data, 11)
    relw = np.abs(Wq.data / W.data - 1).max()
    xa, xl = solve(Wq)
    ra = np.linalg.norm(xa - xa0) / np.linalg.norm(xa0); rl = np.linalg.norm(xl - xl0) / np.linalg.norm(xl0)
    la0, la = loss(W, xa0), loss(Wq, xa0); ll0 = loss(W, xl0)
    print(f'{name}: max rel weight err {relw:.2e}; average ||dx||/||x|| {ra:.2e}; lsq ||dx||/||x|| {rl:.2e}; '
          f'loss at the f32 average solution rel diff {abs(la-la0)/la0:.2e}; lsq loss f32 {ll0:.3e} vs quantized-op solution under f32 op {loss(W, xl):.3e} (rel {abs(loss(W,xl)-ll0)/ll0:.2e})')
