"""The exceptions of :mod:`lsplat`.

Every error the engine reports becomes one of these, carrying the engine's message
(which names the file, the key or the step concerned). Arguments of the wrong type,
dtype, shape or layout raise the built-in :class:`TypeError` / :class:`ValueError`,
naming the argument.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "LsplatError",
    "ConfigError",
    "DataError",
    "DeviceError",
    "DivergedError",
    "Interrupted",
]


class LsplatError(Exception):
    """An error reported by the engine; ``str(error)`` is its message."""


class ConfigError(LsplatError, ValueError):
    """A configuration value (or combination) that makes no sense for this scene."""


class DataError(LsplatError):
    """An input file or array that cannot be used: missing, truncated, garbled, NaN,
    or inconsistent with the rest of the scene."""


class DeviceError(LsplatError, RuntimeError):
    """The device failed or is not available (a backend not compiled in, no GPU, out
    of memory)."""


class DivergedError(LsplatError, ArithmeticError):
    """Training diverged: a loss or parameter became NaN or infinite.

    ``step`` is the 0-based step at which it was found.
    """

    step: int = -1


class Interrupted(KeyboardInterrupt):
    """Training stopped by Ctrl-C (KeyboardInterrupt) at the end of a logging window.

    ``result`` holds what was trained until then (a :class:`lsplat.Trained`), so a
    notebook keeps it::

        try:
            trained = lsplat.train(scene, iterations=30_000)
        except lsplat.Interrupted as stop:
            trained = stop.result
    """

    def __init__(self, result: Any) -> None:
        super().__init__(
            f"training interrupted after {result.steps} steps; the state at that step is in .result"
        )
        self.result = result
