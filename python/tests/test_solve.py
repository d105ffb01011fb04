"""`solve` equals `lsplat-engine solve` bit for bit on the CPU (the embedded demo's
files and a real splat), several levels at once; errors are exceptions carrying the
engine's message."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Callable

import numpy as np
import pytest

import lsplat


@pytest.mark.parametrize("method", ["average", "lsq"])
def test_solve_equals_the_cli_on_two_levels(demo_toml: Path, run_cli: Callable[..., str], tmp_path: Path, method: str) -> None:
    scene = lsplat.Scene.from_toml(demo_toml)
    x = lsplat.solve(scene, method=method, levels=[1, 2])
    assert x.dtype == np.float32 and x.flags.c_contiguous
    assert x.shape == (1500, 2 * 3)
    run_cli("solve", "--scene", demo_toml, "--method", method, "--levels", "1,2", "--out", tmp_path / "run")
    for i, level in enumerate([1, 2]):
        want = np.load(tmp_path / "run" / f"level_{level}" / "features.npy")
        got = x[:, 3 * i : 3 * (i + 1)]
        assert np.array_equal(got, want), f"level {level}: max |diff| {np.abs(got - want).max()}"
    assert np.abs(x).max() > 0.1


def test_solve_equals_the_cli_on_a_real_splat(synth_toml: Path, run_cli: Callable[..., str], tmp_path: Path) -> None:
    scene = lsplat.Scene.from_toml(synth_toml)
    assert (scene.num_gaussians, scene.channels, len(scene.cameras)) == (90854, 16, 6)
    x = lsplat.solve(scene, method="lsq", config={"solve.max_iters": 10})
    run_cli("solve", "--scene", synth_toml, "--method", "lsq", "--set", "solve.max_iters=10", "--out", tmp_path / "run")
    want = np.load(tmp_path / "run" / "features.npy")
    assert x.shape == want.shape == (90854, 16)
    assert np.array_equal(x, want)


def test_a_scene_made_from_arrays_solves_like_its_files(demo_toml: Path) -> None:
    files = lsplat.Scene.from_toml(demo_toml)
    labels = [files.labels(i) for i in range(len(files.cameras))]
    arrays = lsplat.Scene(splats=files.splats(), cameras=files.cameras, dataset=labels)
    assert arrays.num_gaussians == files.num_gaussians and arrays.channels == 3
    for method in ["average", "lsq"]:
        assert np.array_equal(lsplat.solve(arrays, method), lsplat.solve(files, method))
    # Rotations not of unit length are normalised.
    s = files.splats()
    doubled = lsplat.Scene(splats=dict(s, rotations=2 * s["rotations"]), cameras=files.cameras)
    np.testing.assert_allclose(np.linalg.norm(doubled.splats()["rotations"], axis=1), 1.0, atol=1e-6)
    np.testing.assert_allclose(doubled.splats()["rotations"], s["rotations"], atol=1e-6)
    # A segmentation map round-trips: -1 where no mask covers the pixel.
    seg = labels[0]["segmentation"]
    assert seg.dtype == np.int32 and seg.shape == (72, 96) and (seg == -1).any() and (seg >= 0).any()


def test_errors_carry_the_engine_message(demo_toml: Path, tmp_path: Path) -> None:
    scene = lsplat.Scene.from_toml(demo_toml)
    with pytest.raises(ValueError, match="method"):
        lsplat.solve(scene, method="mean")
    with pytest.raises(lsplat.ConfigError, match="unknown configuration key `solve.nope`"):
        lsplat.solve(scene, config={"solve.nope": 1})
    with pytest.raises(ValueError, match="levels: .*4 is not 1, 2 or 3"):
        lsplat.solve(scene, levels=[4])
    with pytest.raises(lsplat.ConfigError, match=r"scene\.\* and demo\.\*"):
        lsplat.solve(scene, config={"demo.gaussians": 10})
    unlabelled = lsplat.Scene(splats=scene.splats(), cameras=scene.cameras)
    with pytest.raises(lsplat.ConfigError, match="no labels"):
        lsplat.solve(unlabelled)
    missing = tmp_path / "missing.toml"
    missing.write_text(f'[scene]\nsplats = "{tmp_path}/none.ply"\ncameras = "{tmp_path}/cams.json"\ndataset = "{tmp_path}/ds"\n')
    with pytest.raises(lsplat.DataError, match="none.ply"):
        lsplat.Scene.from_toml(missing)
    with pytest.raises(lsplat.ConfigError, match="nowhere.toml"):
        lsplat.Scene.from_toml(tmp_path / "nowhere.toml")
    assert issubclass(lsplat.ConfigError, ValueError) and issubclass(lsplat.DataError, lsplat.LsplatError)


def test_the_gil_is_released_while_the_engine_works(synth_toml: Path) -> None:
    scene = lsplat.Scene.from_toml(synth_toml)
    ticks = [0]
    seen = {}

    def work() -> None:
        before = ticks[0]
        lsplat.solve(scene, method="lsq", config={"solve.max_iters": 10})
        seen["during"] = ticks[0] - before

    t = threading.Thread(target=work)
    t.start()
    while t.is_alive():
        ticks[0] += 1
        time.sleep(0.001)
    t.join()
    # A call holding the GIL would freeze this loop for the whole solve.
    assert seen["during"] >= 20, seen
