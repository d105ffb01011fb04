# %% [markdown]
# # lsplat quickstart
#
# Language features on frozen Gaussian splats from Python: load a scene, fit its
# per-Gaussian features two ways, render them, take a camera's blending weights as a
# SciPy matrix to write a solver of your own, and score text queries. Runs as a script
# or cell by cell in a notebook (`# %%` cells); about a minute on a laptop CPU.

# %%
import numpy as np

import lsplat

# The embedded synthetic demo (objects with known features), made smaller here. A real
# scene: lsplat.Scene.from_toml("scene.toml"), or Scene(splats=..., cameras=..., dataset=...).
scene = lsplat.Scene.demo(config={"demo.gaussians": 2000, "demo.cameras": 8, "demo.width": 128, "demo.height": 96})
print(scene)

# %% Fit without training: least squares over every camera (seconds).
x = lsplat.solve(scene, method="lsq")
print("solve:", x.shape, x.dtype)

# %% Or train as LangSplat does (Adam steps); the callback sees each logging window.
trained = lsplat.train(scene, iterations=300, callback=lambda step, loss: print(f"  step {step}: loss {loss:.4f}"))
print(f"train: {trained.steps} steps in {trained.seconds:.1f} s, mean cosine {trained.quality[0]['fitted']['mean_cosine']:.3f}")

# %% Render camera 0 with each: [H, W, C] images (alpha=True adds the opacity channel).
img = lsplat.render(x, scene, 0)
img_trained = lsplat.render(trained, scene, 0)
print("render:", img.shape, "opacity max", lsplat.render(x, scene, 0, alpha=True)[..., -1].max())

# %% The camera's blending weights: a CSR matrix [H*W, N]; W @ x is the render.
W = lsplat.operator(scene, 0)
print(f"operator: {W.shape}, {W.nnz} weights, max |W x - render| = {np.abs(W @ x - img.reshape(-1, 3)).max():.2e}")

# %% A solver of your own: each Gaussian's weighted mean of its pixels' targets
# (LUDVIG's rule), from the operators and the labels; lsplat.solve(method="average")
# is the same rule.
num = np.zeros_like(x)
den = np.zeros(scene.num_gaussians, np.float32)
for cam in range(len(scene.cameras)):
    Wc = lsplat.operator(scene, cam)
    lab = scene.labels(cam)
    seg = lab["segmentation"].reshape(-1)
    valid = seg >= 0
    Wv = Wc[np.flatnonzero(valid)]
    num += Wv.T @ lab["features"][seg[valid]]
    den += np.asarray(Wv.sum(axis=0)).ravel()
mine = num / np.maximum(den, 1e-12)[:, None]
theirs = lsplat.solve(scene, method="average")
seen = den > 0
print(f"own average solver vs lsplat.solve: max |diff| {np.abs(mine[seen] - theirs[seen]).max():.2e} over {seen.sum()} Gaussians")

# %% Text queries: relevancy against the canonical phrases ("object", "things", "stuff",
# "texture"). Real use: CLIP text embeddings of the phrases; here, made-up 3-D ones and
# one query pointing at the feature of the most common label of camera 0.
feats0 = scene.labels(0)["features"]
text = {"object": [0.0, 0.0, 1.0], "things": [0.0, 1.0, 0.0], "stuff": [1.0, 0.0, 0.0], "texture": [-1.0, -1.0, -1.0]}
text["that segment"] = list(feats0[0])
rel = lsplat.relevancy(img, text)
print(f"relevancy: {rel.shape}, {(rel[..., 0] > 0.5).mean():.1%} of the pixels above 0.5")
