"""`relevancy` equals `lsplat-engine query`'s maps bit for bit on a run whose features
are in the text space (a 16-D solve of a real splat)."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import numpy as np

import lsplat

PHRASES = ["object", "things", "stuff", "texture", "red", "blue guitar"]


def test_relevancy_equals_the_cli(synth_toml: Path, run_cli: Callable[..., str], tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    emb = rng.standard_normal((len(PHRASES), 16)).astype(np.float32)
    np.save(tmp_path / "text.npy", emb)
    (tmp_path / "text.txt").write_text("\n".join(PHRASES) + "\n")
    run_cli("solve", "--scene", synth_toml, "--method", "average", "--out", tmp_path / "run")
    run_cli("query", "--run", tmp_path / "run", "--text", tmp_path / "text.npy", "--out", tmp_path / "q")
    run = lsplat.Run.open(tmp_path / "run")
    from_file = {name: lsplat.relevancy(lsplat.render(run, None, name), tmp_path / "text.npy") for name in run.scene.camera_names}
    for name, rel in from_file.items():
        assert rel.shape == (72, 96, 2) and rel.dtype == np.float32
        for q, phrase in enumerate(["red", "blue_guitar"]):
            want = np.load(tmp_path / "q" / name / f"{phrase}.npy")
            assert np.array_equal(rel[..., q], want), (name, phrase)
    # A dict of vectors (any float dtype) scores the same; queries pick and order.
    text = {p: emb[i].astype(np.float64) for i, p in enumerate(PHRASES)}
    name = run.scene.camera_names[0]
    img = lsplat.render(run, None, name)
    one = lsplat.relevancy(img, text, ["blue guitar"])
    assert np.array_equal(one[..., 0], from_file[name][..., 1])
    assert 0.0 <= one.min() and one.max() <= 1.0
