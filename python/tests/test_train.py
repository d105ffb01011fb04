"""`train` equals `lsplat-engine train` bit for bit on the CPU; the per-window callback,
early stop, Ctrl-C between windows and divergence."""

from __future__ import annotations

import json
import os
import signal
import threading
from pathlib import Path
from typing import Callable, List, Tuple

import numpy as np
import pytest

import lsplat


def test_train_equals_the_cli(demo_toml: Path, run_cli: Callable[..., str], tmp_path: Path) -> None:
    scene = lsplat.Scene.from_toml(demo_toml)
    calls: List[Tuple[int, float]] = []
    t = lsplat.train(scene, iterations=200, callback=lambda s, l: calls.append((s, l)), progress=False)
    run_cli("train", "--scene", demo_toml, "--set", "train.iterations=200", "--out", tmp_path / "run")
    want = np.load(tmp_path / "run" / "features.npy")
    assert t.features.shape == want.shape == (1500, 3)
    assert np.array_equal(t.features, want)
    lines = [json.loads(l) for l in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert t.loss_steps.tolist() == [l["step"] for l in lines] == list(range(200))
    assert np.array_equal(t.losses, np.array([l["loss"] for l in lines], dtype=np.float32))
    # One call per logging window (log.every = 50): its last step and mean loss.
    assert [s for s, _ in calls] == [49, 99, 149, 199]
    assert calls[-1][1] == pytest.approx(float(np.mean(t.losses[150:].astype(np.float64))), rel=1e-12)
    assert t.losses[-10:].mean() < 0.5 * t.losses[:10].mean()
    assert t.steps == 200 and not t.stopped
    # Features are the normalised parameters (LangSplat's x/|x|).
    norm = t.parameters / (np.linalg.norm(t.parameters, axis=1, keepdims=True) + 1e-9)
    np.testing.assert_allclose(t.features, norm, rtol=1e-6, atol=1e-7)
    assert t.quality and 0.0 < t.quality[0]["fitted"]["mean_cosine"] <= 1.0


def test_the_callback_stops_training(demo_toml: Path) -> None:
    scene = lsplat.Scene.from_toml(demo_toml)
    t = lsplat.train(scene, iterations=1000, callback=lambda s, l: s < 99, progress=False)
    assert t.stopped and t.steps == 100 and len(t.losses) == 100


def test_ctrl_c_stops_at_the_end_of_a_window(demo_toml: Path) -> None:
    scene = lsplat.Scene.from_toml(demo_toml)
    # Python installs its KeyboardInterrupt handler only when SIGINT is not ignored at
    # start, and a shell's background job starts with SIGINT ignored (`.ci/run &`
    # lost every Ctrl-C here): install it for this test whatever was inherited.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    timer = threading.Timer(0.5, lambda: os.kill(os.getpid(), signal.SIGINT))
    timer.start()
    try:
        with pytest.raises(lsplat.Interrupted) as info:
            lsplat.train(scene, iterations=1_000_000, progress=False)
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, previous)
    r = info.value.result
    assert isinstance(info.value, KeyboardInterrupt)
    assert 0 < r.steps < 1_000_000 and r.steps % 50 == 0, r.steps
    assert len(r.losses) == r.steps and np.isfinite(r.features).all()


def test_a_callback_interrupted_by_ctrl_c_stops_cleanly(demo_toml: Path) -> None:
    scene = lsplat.Scene.from_toml(demo_toml)

    def cb(step: int, loss: float) -> None:
        if step >= 99:
            raise KeyboardInterrupt

    with pytest.raises(lsplat.Interrupted) as info:
        lsplat.train(scene, iterations=400, callback=cb, progress=False)
    assert info.value.result.steps == 100


def test_a_callback_error_propagates(demo_toml: Path) -> None:
    scene = lsplat.Scene.from_toml(demo_toml)

    def cb(step: int, loss: float) -> None:
        raise RuntimeError("from the callback")

    with pytest.raises(RuntimeError, match="from the callback"):
        lsplat.train(scene, iterations=100, callback=cb, progress=False)


def test_divergence_raises_with_the_step(demo_toml: Path) -> None:
    scene = lsplat.Scene.from_toml(demo_toml)
    with pytest.raises(lsplat.DivergedError, match="not finite at step") as info:
        # train.lr is at most 1, so starting values near f32's largest are what can
        # still blow the loss up (as the CLI's runs test does).
        lsplat.train(scene, iterations=200, config={"train.init_std": 3e38, "train.normalize": False}, progress=False)
    assert 0 <= info.value.step < 200


def test_solvers_and_plugin_models_are_refused(demo_toml: Path) -> None:
    scene = lsplat.Scene.from_toml(demo_toml)
    with pytest.raises(lsplat.ConfigError, match="lsplat.solve"):
        lsplat.train(scene, config={"train.solver": "average"}, progress=False)
    with pytest.raises(lsplat.ConfigError, match="langsplat_v2"):
        lsplat.train(scene, config={"train.model": "langsplat_v2"}, progress=False)
    with pytest.raises(ValueError, match="iterations"):
        lsplat.train(scene, iterations=0, progress=False)
