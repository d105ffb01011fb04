"""Fixtures: the `lsplat-engine` binary the results are compared with, the real test
data, and small scenes (a shrunken demo and a synth dataset on a real splat) that
both the CLI and the package load from the same files."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Callable, List

import pytest

REPO = Path(__file__).resolve().parents[2]

# A demo small enough for a debug build: 1 500 Gaussians, 6 cameras of 96×72.
SMALL_DEMO = """
[demo]
gaussians = 1500
objects = 4
cameras = 6
width = 96
height = 72
seed = 3

[scene]
level = 1

[train]
iterations = 200

[log]
every = 50
progress = false
"""


def _required(what: str) -> bool:
    return os.environ.get(what) == "1"


@pytest.fixture(scope="session")
def engine() -> Path:
    """The `lsplat-engine` binary (LSPLAT_ENGINE, else target/debug or target/release)."""
    given = os.environ.get("LSPLAT_ENGINE")
    candidates = [Path(given)] if given else [REPO / "target/debug/lsplat-engine", REPO / "target/release/lsplat-engine"]
    for c in candidates:
        if c.is_file():
            return c
    msg = f"no lsplat-engine binary at {', '.join(map(str, candidates))} (cargo build -p lsplat-cli)"
    if given or _required("LSPLAT_REQUIRE_DATA"):
        pytest.fail(msg)
    pytest.skip(msg)


@pytest.fixture(scope="session")
def run_cli(engine: Path) -> Callable[..., str]:
    """Runs the CLI with arguments; returns stdout, fails the test on a non-zero exit."""

    def run(*args: object) -> str:
        p = subprocess.run([str(engine), *map(str, args)], capture_output=True, text=True)
        assert p.returncode == 0, f"lsplat-engine {' '.join(map(str, args))}:\n{p.stderr}"
        return p.stdout

    return run


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """The real test data (LSPLAT_TEST_DATA, default ../shared/data beside the repo)."""
    d = Path(os.environ.get("LSPLAT_TEST_DATA", REPO.parent / "shared" / "data"))
    if not (d / "PROVENANCE.md").is_file():
        if _required("LSPLAT_REQUIRE_DATA"):
            pytest.fail(f"no test data in {d} (LSPLAT_REQUIRE_DATA=1)")
        pytest.skip(f"SKIPPED (no test data in {d})")
    return d


@pytest.fixture(scope="session")
def demo_toml(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A scene file asking for the small demo."""
    p = tmp_path_factory.mktemp("demo") / "demo.toml"
    p.write_text(SMALL_DEMO)
    return p


@pytest.fixture(scope="session")
def synth_toml(tmp_path_factory: pytest.TempPathFactory, data_dir: Path, run_cli: Callable[..., str]) -> Path:
    """A 16-D LangSplat-layout dataset on the real guitar splat (90 854 Gaussians),
    6 orbit cameras of 96×72, made and imported by the CLI."""
    d = tmp_path_factory.mktemp("synth")
    ply = data_dir / "splats" / "playcanvas_guitar.inria_sh0.ply"
    run_cli("synth", "--splats", ply, "--orbit", 6, "--width", 96, "--height", 72, "--dim", 16, "--objects", 4, "--out", d)
    run_cli("import", "langsplat", "--source", d / "language_features", "--out", d / "dataset")
    return d / "scene.toml"


def cli_sets(config: dict[str, object]) -> List[str]:
    """`--set key=value` arguments of a config dict."""
    out: List[str] = []
    for k, v in config.items():
        out += ["--set", f"{k}={str(v).lower() if isinstance(v, bool) else v}"]
    return out
