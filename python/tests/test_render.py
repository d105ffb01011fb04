"""`render` equals `lsplat-engine render`'s arrays bit for bit on the CPU; `operator`
times the features is the render; cameras by index, name or `Camera`; runs read back."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

import numpy as np
import pytest

import lsplat


@pytest.fixture(scope="module")
def solved_run(synth_toml: Path, run_cli: Callable[..., str], tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("solved") / "run"
    run_cli("solve", "--scene", synth_toml, "--method", "average", "--out", out)
    return out


def test_render_equals_the_cli(solved_run: Path, run_cli: Callable[..., str], tmp_path: Path) -> None:
    run_cli("render", "--run", solved_run, "--out", tmp_path / "r")
    run = lsplat.Run.open(solved_run)
    images = lsplat.render(run, progress=False)
    names = run.scene.camera_names
    assert len(images) == len(names) == 6
    for name, img in zip(names, images):
        want = np.load(tmp_path / "r" / f"{name}.npy")
        assert img.shape == want.shape == (72, 96, 16) and img.dtype == np.float32
        assert np.array_equal(img, want), name
    # The same through a features array, a name, and a Camera object.
    one = lsplat.render(run.features, run.scene, names[2])
    assert np.array_equal(one, images[2])
    cam = run.scene.cameras[2]
    copy = lsplat.Camera(cam.name, cam.width, cam.height, *cam.intrinsics, cam.world_to_camera.astype(np.float64))
    assert np.array_equal(lsplat.render(run, run.scene, copy), images[2])
    assert np.array_equal(lsplat.render(run, None, -4), images[2])


def test_alpha_is_the_render_of_ones(solved_run: Path) -> None:
    run = lsplat.Run.open(solved_run)
    with_alpha = lsplat.render(run, run.scene, 0, alpha=True)
    assert with_alpha.shape == (72, 96, 17)
    ones = np.ones((run.scene.num_gaussians, 1), np.float32)
    assert np.array_equal(with_alpha[..., 16], lsplat.render(ones, run.scene, 0)[..., 0])
    assert 0.1 < with_alpha[..., 16].max() <= 1.0


def test_operator_times_features_is_the_render(solved_run: Path) -> None:
    run = lsplat.Run.open(solved_run)
    x = run.features
    for cam in [0, 3]:
        W = lsplat.operator(run.scene, cam)
        assert W.shape == (72 * 96, 90854) and W.dtype == np.float32
        assert W.indices.dtype == np.int32 and W.has_sorted_indices in (True, False)
        img = lsplat.render(run, run.scene, cam)
        got = (W @ x).reshape(img.shape)
        # Each pixel's terms are summed in the same (front-to-back) order; SciPy's
        # float32 product may fuse multiply-adds, so allow a few ulps of the sums.
        scale = (abs(W) @ np.abs(x)).reshape(img.shape)
        err = np.abs(got - img)
        assert (err <= 4 * np.finfo(np.float32).eps * scale + 1e-30).all(), err.max()
        print(f"camera {cam}: {W.nnz} weights, max |W·x − render| = {err.max():.3g}, bitwise equal: {np.array_equal(got, img)}")
        # Weights are α·T: in (0, 1], and each pixel's sum (its opacity) at most 1.
        assert W.data.min() > 0 and W.data.max() <= 1
        assert np.asarray(W.sum(axis=1)).max() <= 1 + 1e-5


def test_run_reads_config_metrics_and_checkpoints(demo_toml: Path, run_cli: Callable[..., str], tmp_path: Path) -> None:
    run_cli("train", "--scene", demo_toml, "--set", "train.iterations=100", "--set", "log.checkpoint_every=50", "--out", tmp_path / "run")
    run = lsplat.Run.open(tmp_path / "run")
    assert run.config["train"]["iterations"] == 100 and run.channels == 3 and run.decoder is None
    assert np.array_equal(run.features, np.load(tmp_path / "run" / "features.npy"))
    steps, losses = run.losses()
    lines = [json.loads(l) for l in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert steps.tolist() == list(range(100))
    assert np.array_equal(losses, np.array([l["loss"] for l in lines], np.float32))
    assert run.summary["steps"] == 100
    assert [s for s, _ in run.checkpoints()] == [50, 100]
    assert run.scene.num_gaussians == 1500 and len(run.scene.cameras) == 6 and run.scene.channels is None
    with pytest.raises(lsplat.DataError, match="not a run directory"):
        lsplat.Run.open(tmp_path)


def test_a_run_of_several_levels_opens_by_level(demo_toml: Path, run_cli: Callable[..., str], tmp_path: Path) -> None:
    run_cli("solve", "--scene", demo_toml, "--method", "average", "--levels", "1,3", "--out", tmp_path / "run")
    with pytest.raises(lsplat.DataError, match="level_1, level_3"):
        lsplat.Run.open(tmp_path / "run")
    r3 = lsplat.Run.open(tmp_path / "run", level=3)
    assert np.array_equal(r3.features, np.load(tmp_path / "run" / "level_3" / "features.npy"))
    assert r3.config["scene"]["level"] == 3
