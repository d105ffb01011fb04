"""`preprocess` and `text_embeddings` against `lsplat-engine preprocess` and `embed`
(the same files, bit for bit), with the synthetic SAM graphs of scripts/sam_onnx.py and
a tiny random CLIP (scripts/clip_onnx.py): no weights exist on the test machines."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, Callable, List, Optional, Tuple

import numpy as np
import pytest

import lsplat

REPO = Path(__file__).resolve().parents[2]
SETTINGS = {"preprocess.points_per_side": 4, "preprocess.crop_n_layers": 0}


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> Tuple[Path, Path]:
    """A synthetic SAM folder and a tiny random CLIP folder."""
    for package in ("onnx", "onnxruntime"):
        try:
            __import__(package)
        except ImportError:
            if os.environ.get("LSPLAT_REQUIRE_ORT") == "1":
                pytest.fail(f"{package} is not installed (LSPLAT_REQUIRE_ORT=1)")
            pytest.skip(f"SKIPPED ({package} is not installed)")
    d = tmp_path_factory.mktemp("models")
    for args in (["sam_onnx.py", d / "sam"], ["clip_onnx.py", "make", d / "clip"]):
        p = subprocess.run([sys.executable, str(REPO / "scripts" / str(args[0])), *map(str, args[1:])], capture_output=True, text=True)
        assert p.returncode == 0, p.stderr
    return d / "sam", d / "clip"


@pytest.fixture()
def images(tmp_path: Path, data_dir: Path) -> Path:
    """Two of fern's photos (504×378)."""
    d = tmp_path / "images"
    d.mkdir()
    for src in sorted((data_dir / "fern_llff" / "images_8").glob("*.png"))[:2]:
        shutil.copy(src, d / src.name)
    return d


def _arrays(out: Path) -> List[Tuple[str, bytes]]:
    lf = out / "language_features"
    return [(p.name, p.read_bytes()) for p in sorted(lf.glob("*.npy"))]


def test_preprocess_equals_the_cli(models: Tuple[Path, Path], images: Path, tmp_path: Path, run_cli: Callable[..., str]) -> None:
    sam, clip = models
    r = lsplat.preprocess(images, tmp_path / "py", sam=sam, clip=clip, dataset=tmp_path / "ds", config=SETTINGS, progress=False)
    assert (r["images"], r["processed"], r["stopped"]) == (2, 2, False)
    assert len(r["masks"]) == 4 and r["masks"][0] > 0
    assert r["features_dir"] == tmp_path / "py" / "language_features"
    assert r["dataset"] == tmp_path / "ds" and (tmp_path / "ds" / "features.parquet").is_file()
    assert r["work"]["prompts"] == 2 * 16 and r["seconds"]["total"] > 0
    sets = [a for k, v in SETTINGS.items() for a in ("--set", f"{k}={v}")]
    run_cli("preprocess", "--images", images, "--sam", sam, "--clip", clip, "--out", tmp_path / "cli", *sets)
    got, want = _arrays(tmp_path / "py"), _arrays(tmp_path / "cli")
    assert [n for n, _ in got] == [n for n, _ in want] and len(got) == 4
    assert got == want, "the package's files differ from the CLI's"
    seg = np.load(tmp_path / "py" / "language_features" / (sorted(images.iterdir())[0].stem + "_s.npy"))
    assert seg.shape == (4, 378, 504) and seg.max() >= 0


def test_a_callback_stops_and_a_second_call_resumes(models: Tuple[Path, Path], images: Path, tmp_path: Path) -> None:
    sam, clip = models
    seen: List[Tuple[int, int, Optional[str]]] = []

    def stop_after_one(done: int, total: int, image: Optional[str]) -> bool:
        seen.append((done, total, image))
        return False

    r = lsplat.preprocess(images, tmp_path / "o", sam=sam, clip=clip, config=SETTINGS, callback=stop_after_one)
    first = sorted(images.iterdir())[0].stem
    assert (r["processed"], r["stopped"], r["dataset"]) == (1, True, None)
    assert seen == [(1, 2, first)]
    names = [n for n, _ in _arrays(tmp_path / "o")]
    assert names == [f"{first}_f.npy", f"{first}_s.npy"]
    calls: List[Any] = []
    r = lsplat.preprocess(images, tmp_path / "o", sam=sam, clip=clip, config=SETTINGS, callback=lambda *a: calls.append(a))
    assert (r["processed"], r["stopped"]) == (1, False) and len(calls) == 1
    assert len(_arrays(tmp_path / "o")) == 4
    # An exception in the callback stops the run and comes back as it was raised.
    shutil.rmtree(tmp_path / "o")

    def fail(done: int, total: int, image: Optional[str]) -> None:
        raise KeyError("from the callback")

    with pytest.raises(KeyError, match="from the callback"):
        lsplat.preprocess(images, tmp_path / "o", sam=sam, clip=clip, config=SETTINGS, callback=fail)
    assert len(_arrays(tmp_path / "o")) == 2


def test_ctrl_c_stops_between_images_and_a_second_call_resumes(models: Tuple[Path, Path], data_dir: Path, tmp_path: Path) -> None:
    """A SIGINT that arrives while the engine works (the GIL released) is raised as
    KeyboardInterrupt once the image in progress is written whole."""
    sam, clip = models
    images = tmp_path / "images"
    images.mkdir()
    for src in sorted((data_dir / "fern_llff" / "images_8").glob("*.png"))[:8]:
        shutil.copy(src, images / src.name)
    timers: List[threading.Timer] = []

    def interrupt_soon(done: int, total: int, image: Optional[str]) -> None:
        if not timers:  # after the first image: Ctrl-C while the second one runs
            timers.append(threading.Timer(0.02, os.kill, (os.getpid(), signal.SIGINT)))
            timers[0].start()

    out = tmp_path / "o"
    # A shell that starts a job in the background has it ignore SIGINT (Python then
    # keeps SIG_IGN); an interactive session has Python's default handler.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            lsplat.preprocess(images, out, sam=sam, clip=clip, config=SETTINGS, callback=interrupt_soon)
        timers[0].join()
    finally:
        signal.signal(signal.SIGINT, previous)
    written = [n for n, _ in _arrays(out)]
    assert len(written) % 2 == 0 and 4 <= len(written) <= 14, written
    for n in written:  # every file written is whole
        assert np.load(out / "language_features" / n).size > 0
    r = lsplat.preprocess(images, out, sam=sam, clip=clip, config=SETTINGS, progress=False)
    assert (r["processed"], r["stopped"]) == (8 - len(written) // 2, False)
    assert len(_arrays(out)) == 16


def test_onnx_runtime_is_found_in_the_installed_package(models: Tuple[Path, Path], images: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ORT_DYLIB_PATH", raising=False)
    sam, clip = models
    r = lsplat.preprocess(images, tmp_path / "o", sam=sam, clip=clip, config=SETTINGS, progress=False)
    assert r["processed"] == 2


def test_bad_input_raises_one_clear_error(models: Tuple[Path, Path], images: Path, tmp_path: Path) -> None:
    sam, clip = models
    out = tmp_path / "o"
    with pytest.raises(lsplat.DataError, match="no_sam"):
        lsplat.preprocess(images, out, sam=tmp_path / "no_sam", clip=clip, config=SETTINGS)
    with pytest.raises(lsplat.DataError, match="image.int8.onnx"):
        lsplat.preprocess(images, out, sam=sam, clip=clip, config={**SETTINGS, "preprocess.clip_image_file": "image.int8.onnx"})
    with pytest.raises(ValueError, match="resolution 3"):
        lsplat.preprocess(images, out, sam=sam, clip=clip, resolution=3)
    with pytest.raises(lsplat.ConfigError, match="points_per_sid"):
        lsplat.preprocess(images, out, sam=sam, clip=clip, config={"preprocess.points_per_sid": 4})
    with pytest.raises(TypeError, match="config: expected a dict"):
        lsplat.preprocess(images, out, sam=sam, clip=clip, config=["preprocess.points_per_side=4"])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="callback"):
        lsplat.preprocess(images, out, sam=sam, clip=clip, callback=3)  # type: ignore[arg-type]
    first = sorted(images.iterdir())[0]
    first.write_bytes(first.read_bytes()[:500])
    with pytest.raises(lsplat.DataError, match=first.name):
        lsplat.preprocess(images, out, sam=sam, clip=clip, config=SETTINGS)
    assert not list((out / "language_features").glob("*.npy")) if (out / "language_features").exists() else True


def test_text_embeddings_equal_the_cli(models: Tuple[Path, Path], tmp_path: Path, run_cli: Callable[..., str]) -> None:
    _, clip = models
    text = lsplat.text_embeddings(clip, ["red chair", "object"])
    assert list(text) == ["object", "things", "stuff", "texture", "red chair"]
    rows = np.stack(list(text.values()))
    assert rows.dtype == np.float32 and np.allclose(np.linalg.norm(rows, axis=1), 1, atol=1e-5)
    run_cli("embed", "--clip", clip, "--text", "red chair", "--out", tmp_path / "text.parquet")
    feats = np.random.default_rng(1).standard_normal((5, 7, rows.shape[1])).astype(np.float32)
    a = lsplat.relevancy(feats, text, ["red chair"])
    b = lsplat.relevancy(feats, tmp_path / "text.parquet", ["red chair"])
    assert np.array_equal(a, b)
    with pytest.raises(TypeError, match="list of phrases"):
        lsplat.text_embeddings(clip, "red chair")
    with pytest.raises(ValueError, match="empty phrase"):
        lsplat.text_embeddings(clip, [" "])
    with pytest.raises(lsplat.DataError, match="nowhere"):
        lsplat.text_embeddings(tmp_path / "nowhere", ["red"])
