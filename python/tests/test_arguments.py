"""Arrays of the wrong dtype, shape or strides raise ValueError naming the argument;
objects with __dlpack__ are read without a copy."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import lsplat


@pytest.fixture(scope="module")
def scene(demo_toml: Path) -> lsplat.Scene:
    return lsplat.Scene.from_toml(demo_toml)


def test_render_checks_its_features(scene: lsplat.Scene) -> None:
    n = scene.num_gaussians
    ok = np.zeros((n, 4), np.float32)
    cases: list[tuple[Any, str]] = [
        (ok.astype(np.float64), "features: dtype float64, expected float32"),
        (np.zeros((n + 1, 4), np.float32), rf"features: shape \({n + 1}, 4\), expected \({n}, B\) \({n} Gaussians\)"),
        (np.zeros(n, np.float32), "features: shape"),
        (np.zeros((n, 8), np.float32)[:, ::2], "features: the array is not C-contiguous"),
        (np.asfortranarray(np.zeros((n, 4), np.float32)), "not C-contiguous"),
        (ok.astype(">f4"), "features: dtype >f4"),
    ]
    for bad, msg in cases:
        with pytest.raises(ValueError, match=msg):
            lsplat.render(bad, scene, 0)
    with pytest.raises(TypeError, match="features: expected a numpy.ndarray"):
        lsplat.render([[0.0] * 4] * n, scene, 0)
    with pytest.raises(ValueError, match="cameras\\[0\\]: no camera \"nope\""):
        lsplat.render(ok, scene, "nope")
    with pytest.raises(ValueError, match="index 9 is out of range"):
        lsplat.render(ok, scene, 9)


def test_arrays_of_a_scene_are_checked(scene: lsplat.Scene) -> None:
    s = scene.splats()
    bad = dict(s, log_scales=s["log_scales"][:, :2].copy())
    with pytest.raises(ValueError, match=r"splats\['log_scales'\]: shape \(1500, 2\)"):
        lsplat.Scene(splats=bad, cameras=scene.cameras)
    with pytest.raises(ValueError, match=r"splats\['means'\]: dtype float64"):
        lsplat.Scene(splats=dict(s, means=s["means"].astype(np.float64)), cameras=scene.cameras)
    with pytest.raises(ValueError, match='unknown key "colors"'):
        lsplat.Scene(splats=dict(s, colors=s["means"]), cameras=scene.cameras)
    nan = dict(s, means=s["means"].copy())
    nan["means"][7, 1] = np.nan
    with pytest.raises(lsplat.DataError, match="`means` of gaussian 7 is not finite"):
        lsplat.Scene(splats=nan, cameras=scene.cameras)
    labels = [scene.labels(i) for i in range(len(scene.cameras))]
    labels[1] = dict(labels[1], segmentation=labels[1]["segmentation"].astype(np.int64))
    with pytest.raises(ValueError, match=r"dataset\[1\]\['segmentation'\]: dtype int64, expected int32"):
        lsplat.Scene(splats=s, cameras=scene.cameras, dataset=labels)
    with pytest.raises(ValueError, match="world_to_camera: shape"):
        lsplat.Camera("c", 10, 10, 5.0, 5.0, 5.0, 5.0, np.eye(3))
    with pytest.raises(lsplat.DataError, match="not orthonormal"):
        lsplat.Camera("c", 10, 10, 5.0, 5.0, 5.0, 5.0, 2 * np.eye(4)[:3])


def test_relevancy_checks_its_features() -> None:
    text = {p: np.eye(4, dtype=np.float32)[i] for i, p in enumerate(["object", "things", "stuff", "texture"])}
    text["mug"] = np.ones(4, np.float32)
    with pytest.raises(ValueError, match=r"features: shape \[5, 3\], expected \(\.\.\., 4\)"):
        lsplat.relevancy(np.zeros((5, 3), np.float32), text)
    with pytest.raises(ValueError, match="features: dtype float64"):
        lsplat.relevancy(np.zeros((5, 4)), text)
    with pytest.raises(lsplat.DataError, match='no embedding for "cup"'):
        lsplat.relevancy(np.ones((5, 4), np.float32), text, ["cup"])


class OnlyDlpack:
    """An array-like that numpy can read only through DLPack (as a CPU torch tensor)."""

    def __init__(self, a: np.ndarray) -> None:
        self._a = a

    def __dlpack__(self, **kw: Any) -> Any:
        return self._a.__dlpack__(**kw)

    def __dlpack_device__(self) -> Any:
        return self._a.__dlpack_device__()


def test_dlpack_objects_are_read_in_place(scene: lsplat.Scene) -> None:
    x = np.random.default_rng(0).standard_normal((scene.num_gaussians, 3)).astype(np.float32)
    assert np.shares_memory(np.from_dlpack(OnlyDlpack(x)), x)
    assert np.array_equal(lsplat.render(OnlyDlpack(x), scene, 1), lsplat.render(x, scene, 1))
    with pytest.raises(ValueError, match="not C-contiguous"):
        lsplat.render(OnlyDlpack(np.zeros((scene.num_gaussians, 6), np.float32)[:, ::2]), scene, 1)
