"""The notebook-style example runs."""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "quickstart.py"


def test_quickstart_runs(capsys: pytest.CaptureFixture[str]) -> None:
    runpy.run_path(str(EXAMPLE), run_name="__main__")
    out = capsys.readouterr().out
    assert "relevancy" in out and "operator" in out, out
