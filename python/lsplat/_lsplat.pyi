"""Types of the native module (``python/src``); the documented API is :mod:`lsplat`."""

from os import PathLike
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union, final

import numpy as np
import numpy.typing as npt

__all__ = [
    "Camera",
    "Scene",
    "Run",
    "solve",
    "train",
    "render",
    "operator",
    "relevancy",
    "preprocess",
    "text_embeddings",
    "__version__",
    "DEMO_SCENE",
]

__version__: str
DEMO_SCENE: str

_F32 = npt.NDArray[np.float32]
_Path = Union[str, PathLike[str]]

@final
class Camera:
    def __new__(
        cls,
        name: str,
        width: int,
        height: int,
        fx: float,
        fy: float,
        cx: float,
        cy: float,
        world_to_camera: npt.NDArray[Any],
    ) -> Camera: ...
    @property
    def name(self) -> str: ...
    @property
    def width(self) -> int: ...
    @property
    def height(self) -> int: ...
    @property
    def intrinsics(self) -> Tuple[float, float, float, float]: ...
    @property
    def world_to_camera(self) -> _F32: ...

_CameraRef = Union[int, str, Camera]

@final
class Scene:
    def __new__(
        cls,
        splats: Any,
        cameras: Any,
        dataset: Any = None,
        level: int = 1,
        config: Sequence[str] = ...,
    ) -> Scene: ...
    @staticmethod
    def from_toml(path: _Path, config: Sequence[str] = ...) -> Scene: ...
    @staticmethod
    def demo(config: Sequence[str] = ...) -> Scene: ...
    @property
    def config_toml(self) -> str: ...
    @property
    def config_json(self) -> str: ...
    @property
    def num_gaussians(self) -> int: ...
    @property
    def channels(self) -> Optional[int]: ...
    @property
    def level(self) -> int: ...
    @property
    def cameras(self) -> List[Camera]: ...
    def splats(self) -> Dict[str, _F32]: ...
    def labels(self, camera: _CameraRef) -> Dict[str, Any]: ...

@final
class Run:
    @staticmethod
    def open(path: _Path, level: Optional[int] = None) -> Run: ...
    @property
    def path(self) -> Path: ...
    @property
    def config_toml(self) -> str: ...
    @property
    def config_json(self) -> str: ...
    @property
    def channels(self) -> int: ...
    @property
    def features(self) -> _F32: ...
    @property
    def decoder(self) -> Optional[_F32]: ...
    @property
    def scene(self) -> Scene: ...
    @property
    def summary_json(self) -> str: ...
    def losses(self) -> Tuple[npt.NDArray[np.uint64], _F32]: ...
    def checkpoints(self) -> List[Tuple[int, Path]]: ...

def solve(
    scene: Scene,
    method: str,
    levels: Optional[Sequence[int]] = None,
    config: Sequence[str] = ...,
) -> _F32: ...
def train(
    scene: Scene,
    iterations: Optional[int] = None,
    callback: Optional[Callable[[int, float], Any]] = None,
    config: Sequence[str] = ...,
) -> Dict[str, Any]: ...
def render(
    features: Any,
    scene: Scene,
    cameras: Sequence[_CameraRef],
    config: Sequence[str] = ...,
    on_camera: Optional[Callable[[int], Any]] = None,
) -> List[Tuple[_F32, _F32]]: ...
def operator(
    scene: Scene, camera: _CameraRef, config: Sequence[str] = ...
) -> Tuple[_F32, npt.NDArray[Any], npt.NDArray[Any], Tuple[int, int]]: ...
def relevancy(
    features: Any,
    text_embeddings: Any,
    queries: Optional[Sequence[str]] = None,
) -> Tuple[_F32, List[str]]: ...
def preprocess(
    images: _Path,
    out: _Path,
    sam: _Path,
    clip: _Path,
    resolution: int = ...,
    dataset: Optional[_Path] = None,
    config: Sequence[str] = ...,
    callback: Optional[Callable[[int, int, Optional[str]], Any]] = None,
) -> Dict[str, Any]: ...
def text_embeddings(
    clip: _Path, phrases: Sequence[str], config: Sequence[str] = ...
) -> Tuple[List[str], _F32]: ...
