"""LangSplat language features on frozen 3D Gaussian splats, from Python.

A thin, typed layer over the lsplat-engine crates (no second implementation): scenes
load as ``lsplat-engine`` loads them, ``solve`` and ``train`` run the engine's session,
``render`` the renderer of ``lsplat-engine render``, ``relevancy`` LangSplat's scoring
of ``lsplat-engine query``, ``preprocess`` and ``text_embeddings`` SAM and CLIP through
ONNX Runtime as ``lsplat-engine preprocess`` and ``embed`` run them; on the CPU the
results are the command-line tool's, bit for bit. NumPy arrays go in and come out
(float32, C-contiguous; objects with ``__dlpack__`` such as CPU torch tensors are read
without a copy). The GIL is released while the engine works.

Five lines::

    import lsplat
    scene = lsplat.Scene.demo()                   # or Scene.from_toml("scene.toml")
    x = lsplat.solve(scene, method="lsq")         # [N, C] per-Gaussian features
    img = lsplat.render(x, scene, 0)              # [H, W, C] image of camera 0
    W = lsplat.operator(scene, 0)                 # scipy.sparse CSR [H*W, N]: W @ x == img

Configuration: every function takes ``config={"key": value}`` overrides, the keys of
``lsplat-engine --set key=value`` (``crates/lsplat-core/src/config.rs`` documents
them all), e.g. ``config={"train.lr": 1e-3, "render.tile_size": 8}``.
"""

from __future__ import annotations

import importlib.util
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union, overload

import numpy as np
import numpy.typing as npt

from . import _lsplat
from .errors import ConfigError, DataError, DeviceError, DivergedError, Interrupted, LsplatError

if TYPE_CHECKING:  # pragma: no cover
    import scipy.sparse

__all__ = [
    "Camera",
    "Scene",
    "Run",
    "Trained",
    "solve",
    "train",
    "render",
    "operator",
    "relevancy",
    "preprocess",
    "text_embeddings",
    "LsplatError",
    "ConfigError",
    "DataError",
    "DeviceError",
    "DivergedError",
    "Interrupted",
    "__version__",
]

__version__: str = _lsplat.__version__

Camera = _lsplat.Camera
"""A pinhole camera: ``Camera(name, width, height, fx, fy, cx, cy, world_to_camera)``.

``world_to_camera`` is a 4×4 (or 3×4) float matrix with OpenCV axes (x right, y down,
z forward), as COLMAP and gsplat's ``viewmats`` store it. A ``Camera`` renders a scene
from any viewpoint: pass it wherever a camera index or name is accepted."""

PathLike = Union[str, "os.PathLike[str]"]
"""A file or folder path."""
CameraRef = Union[int, str, "_lsplat.Camera"]
"""A camera: its index in the scene, its name, or a :class:`Camera`."""
Config = Optional[Mapping[str, Any]]
"""Configuration overrides ``{"section.key": value}`` (``--set section.key=value``)."""
FloatArray = npt.NDArray[np.float32]


def _toml(key: str, value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        return repr(float(value))
    if isinstance(value, (str, os.PathLike)):
        return json.dumps(os.fspath(value))
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml(key, v) for v in value) + "]"
    raise TypeError(f"config[{key!r}]: a {type(value).__name__} is not a configuration value")


def _sets(config: Config) -> List[str]:
    if config is None:
        return []
    if not isinstance(config, Mapping):
        raise TypeError(
            "config: expected a dict {key: value}, e.g. {'train.lr': 1e-3}, "
            f"got {type(config).__name__}"
        )
    return [f"{k}={_toml(k, v)}" for k, v in config.items()]


def _array(name: str, x: Any) -> Any:
    """NumPy arrays as they are; other objects with ``__dlpack__`` (torch tensors,
    JAX or CuPy arrays) through :func:`numpy.from_dlpack`, which shares their memory."""
    if isinstance(x, np.ndarray) or not hasattr(x, "__dlpack__"):
        return x
    try:
        return np.from_dlpack(x)
    except (BufferError, RuntimeError, TypeError, ValueError) as e:
        raise ValueError(
            f"{name}: cannot read it through DLPack ({e}); give a CPU array "
            "(e.g. tensor.detach().cpu())"
        ) from e


def _path(x: Any) -> Any:
    return os.fspath(x) if isinstance(x, os.PathLike) else x


def _progress(total: int, unit: str, show: Optional[bool]) -> Any:
    """A tqdm bar when tqdm is installed (and ``show`` is not False), else None."""
    if show is False:
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:
        if show:
            raise ImportError("progress=True needs tqdm: pip install tqdm") from None
        return None
    return tqdm(total=total, unit=unit, leave=False)


class Scene:
    """Splats, cameras and per-image labels, and the configuration calls start from.

    Made from a scene file (:meth:`from_toml`), the embedded demo (:meth:`demo`) or
    arrays::

        Scene(splats, cameras, dataset=None, *, level=1, config=None)

    - ``splats``: a 3DGS PLY path, or a dict of float32 arrays ``means`` [N, 3],
      ``log_scales`` [N, 3], ``rotations`` [N, 4] (w, x, y, z; rows not of unit
      length are normalised)
      and ``opacity_logits`` [N].
    - ``cameras``: a path (COLMAP sparse folder, Inria ``cameras.json``, nerfstudio
      ``transforms.json``; sorted by name) or a list of :class:`Camera`.
    - ``dataset``: None (the scene renders but cannot be fitted), a dataset folder
      (``lsplat-engine import langsplat`` writes one), or a list of dicts
      ``{"name": str, "segmentation": int32 [H, W] (-1 = no mask), "features":
      float32 [M, C]}``, one per camera (matched by name).
    - ``level``: the LangSplat level of the labels (1, 2, 3).
    """

    __slots__ = ("_inner",)

    def __init__(
        self,
        splats: Union[PathLike, Mapping[str, Any]],
        cameras: Union[PathLike, Sequence[_lsplat.Camera]],
        dataset: Union[None, PathLike, Sequence[Mapping[str, Any]]] = None,
        *,
        level: int = 1,
        config: Config = None,
    ) -> None:
        if isinstance(splats, Mapping):
            splats = {k: _array(f"splats[{k!r}]", v) for k, v in splats.items()}
        if dataset is not None and not isinstance(dataset, (str, os.PathLike)):
            dataset = [
                {k: _array(f"dataset[{i}][{k!r}]", v) for k, v in item.items()}
                if isinstance(item, Mapping)
                else item
                for i, item in enumerate(dataset)
            ]
        self._inner = _lsplat.Scene(
            _path(splats), _path(cameras), _path(dataset), level, _sets(config)
        )

    @classmethod
    def _wrap(cls, inner: _lsplat.Scene) -> Scene:
        scene = cls.__new__(cls)
        scene._inner = inner
        return scene

    @classmethod
    def from_toml(cls, path: PathLike, *, config: Config = None) -> Scene:
        """The scene a scene file names (``lsplat-engine train --scene PATH``), its
        paths relative to the file; ``config`` overrides keys as ``--set`` does."""
        return cls._wrap(_lsplat.Scene.from_toml(os.fspath(path), _sets(config)))

    @classmethod
    def demo(cls, *, config: Config = None) -> Scene:
        """The embedded synthetic demo (``lsplat-engine train`` without a scene): 4 000
        Gaussians, 24 cameras of 192×144, 3-D features with a known answer.
        ``config={"demo.gaussians": 1000, ...}`` changes it."""
        return cls._wrap(_lsplat.Scene.demo(_sets(config)))

    @property
    def config(self) -> Dict[str, Any]:
        """The resolved configuration, ``{section: {key: value}}``."""
        out: Dict[str, Any] = json.loads(self._inner.config_json)
        return out

    @property
    def config_toml(self) -> str:
        """The resolved configuration as TOML (what a run's ``config.toml`` holds)."""
        return self._inner.config_toml

    @property
    def num_gaussians(self) -> int:
        """Number of Gaussians N."""
        return self._inner.num_gaussians

    @property
    def channels(self) -> Optional[int]:
        """Feature channels C of the labels (None for a scene without labels)."""
        return self._inner.channels

    @property
    def level(self) -> int:
        """The LangSplat level of the labels (1 subpart, 2 part, 3 whole)."""
        return self._inner.level

    @property
    def cameras(self) -> List[_lsplat.Camera]:
        """The cameras in the scene's order (file scenes: sorted by name)."""
        return self._inner.cameras

    @property
    def camera_names(self) -> List[str]:
        """The cameras' names, in order."""
        return [c.name for c in self._inner.cameras]

    def splats(self) -> Dict[str, FloatArray]:
        """The splats as float32 arrays: ``means`` [N, 3], ``log_scales`` [N, 3],
        ``rotations`` [N, 4] (unit, w x y z), ``opacity_logits`` [N]."""
        return self._inner.splats()

    def labels(self, camera: CameraRef) -> Dict[str, Any]:
        """One camera's labels at the scene's level: ``segmentation`` int32 [H, W] (a
        row of ``features``, -1 where no mask covers the pixel) and ``features``
        float32 [M, C] — the targets the solvers and training fit."""
        return self._inner.labels(camera)

    def __repr__(self) -> str:
        return self._inner.__repr__()


@dataclass(frozen=True)
class Trained:
    """What :func:`train` produced.

    ``features`` [N, C] are what the renderer composites (unit rows under LangSplat's
    normalisation); ``parameters`` [N, C] the raw trained values. ``loss_steps`` and
    ``losses`` hold every step's loss (0-based steps, as ``metrics.jsonl``).
    """

    features: FloatArray
    parameters: FloatArray
    loss_steps: npt.NDArray[np.uint64]
    losses: FloatArray
    steps: int
    seconds: float
    stopped: bool
    """True when the callback returned False."""
    config_toml: str
    quality: List[Dict[str, Any]] = field(default_factory=list)
    """Per level: mean cosine and masked L1 on the fitted (and held-out) cameras
    (``log.eval``; empty when interrupted)."""


class Run:
    """A finished run directory (``lsplat-engine train`` / ``solve`` wrote it), read
    as ``lsplat-engine render`` reads it; open with :meth:`Run.open`."""

    __slots__ = ("_inner",)

    def __init__(self, inner: _lsplat.Run) -> None:
        self._inner = inner

    @classmethod
    def open(cls, path: PathLike, level: Optional[int] = None) -> Run:
        """Opens the run in ``path``; for a run of several levels (``solve --levels``)
        ``level`` picks its ``level_<l>`` folder. A LangSplatV2 run's features are its
        code weights and :attr:`decoder` its codebook."""
        return cls(_lsplat.Run.open(os.fspath(path), level))

    @property
    def path(self) -> Path:
        """The run directory."""
        return Path(self._inner.path)

    @property
    def config(self) -> Dict[str, Any]:
        """The run's resolved configuration (``config.toml``), ``{section: {key: value}}``."""
        out: Dict[str, Any] = json.loads(self._inner.config_json)
        return out

    @property
    def config_toml(self) -> str:
        """The run's ``config.toml``."""
        return self._inner.config_toml

    @property
    def features(self) -> FloatArray:
        """The per-Gaussian features [N, C], exactly as composited."""
        return self._inner.features

    @property
    def channels(self) -> int:
        """Feature channels C."""
        return self._inner.channels

    @property
    def decoder(self) -> Optional[FloatArray]:
        """A LangSplatV2 run's codebook [C, D] (pixel feature = codebookᵀ · weights),
        else None."""
        return self._inner.decoder

    @property
    def scene(self) -> Scene:
        """The scene the run was fitted on (splats and cameras, at training size; no
        labels), with the run's configuration."""
        return Scene._wrap(self._inner.scene)

    @property
    def summary(self) -> Dict[str, Any]:
        """``summary.json``: steps, losses, timing, quality on fitted and held-out cameras."""
        out: Dict[str, Any] = json.loads(self._inner.summary_json)
        return out

    def losses(self) -> Tuple[npt.NDArray[np.uint64], FloatArray]:
        """``(steps, losses)`` of every step in ``metrics.jsonl`` (empty for a level
        folder of a solved run)."""
        return self._inner.losses()

    def checkpoints(self) -> List[Tuple[int, Path]]:
        """``(step, path)`` of the checkpoints kept, oldest first (safetensors files)."""
        return [(s, Path(p)) for s, p in self._inner.checkpoints()]

    def __repr__(self) -> str:
        return self._inner.__repr__()


def solve(
    scene: Scene,
    method: str = "lsq",
    levels: Optional[Sequence[int]] = None,
    *,
    config: Config = None,
) -> FloatArray:
    """Fits the per-Gaussian features without training (``lsplat-engine solve``).

    Geometry is frozen, so what a camera renders is linear in the features, and two
    solvers use that:

    - ``method="average"``: each Gaussian's α·T-weighted mean of the valid pixels'
      features over every camera (one pass per camera; LUDVIG's rule);
    - ``method="lsq"``: least squares over the cameras, Σ‖M(W·x − f)‖² + λ‖x − x_avg‖²,
      by conjugate gradient from the average (``solve.tol``, ``solve.max_iters``,
      ``solve.lambda``).

    ``levels=[1, 2, 3]`` solves several LangSplat levels in the same passes (default:
    the scene's level). Returns float32 ``[N, L·C]``: for each Gaussian the features
    of each level in turn (``x[:, l*C:(l+1)*C]`` is level ``levels[l]``). The features
    are what the renderer composites (no normalisation); on the CPU they equal the
    ``features.npy`` of ``lsplat-engine solve`` bit for bit. Raises
    :class:`ConfigError` for a scene without labels or settings that make no sense.
    """
    return _lsplat.solve(
        scene._inner, method, None if levels is None else [int(l) for l in levels], _sets(config)
    )


def train(
    scene: Scene,
    iterations: Optional[int] = None,
    callback: Optional[Callable[[int, float], Any]] = None,
    *,
    config: Config = None,
    progress: Optional[bool] = None,
) -> Trained:
    """Trains LangSplat's per-Gaussian features by Adam steps (``lsplat-engine train``).

    ``iterations`` sets ``train.iterations`` (LangSplat's default is 30 000).
    ``callback(step, loss)`` is called after each logging window (``log.every``
    steps, 100 by default) with the window's last 0-based step and its mean loss;
    returning ``False`` stops training there. A progress bar is drawn when tqdm is
    installed (``progress=False`` hides it, ``True`` requires it).

    Ctrl-C stops cleanly at the end of the current window: :class:`Interrupted` (a
    ``KeyboardInterrupt``) is raised with ``.result``, the :class:`Trained` state
    after that window. A loss that turns NaN raises :class:`DivergedError`. On the
    CPU the result equals ``lsplat-engine train``'s bit for bit (same seed).
    """
    total = iterations
    if total is None:
        over = dict(config or {})
        total = int(over.get("train.iterations", scene.config["train"]["iterations"]))
    bar = _progress(total, "step", progress)

    def on_window(step: int, loss: float) -> Any:
        if bar is not None:
            bar.update(step + 1 - bar.n)
            bar.set_postfix(loss=f"{loss:.6f}")
        return callback(step, loss) if callback is not None else None

    try:
        raw = _lsplat.train(
            scene._inner,
            iterations,
            on_window if (bar is not None or callback is not None) else None,
            _sets(config),
        )
    finally:
        if bar is not None:
            bar.close()
    result = Trained(
        features=raw["features"],
        parameters=raw["parameters"],
        loss_steps=raw["loss_steps"],
        losses=raw["losses"],
        steps=int(raw["steps"]),
        seconds=float(raw["seconds"]),
        stopped=bool(raw["stopped"]),
        config_toml=str(raw["config_toml"]),
        quality=list(raw["quality"]),
    )
    if raw["interrupted"]:
        raise Interrupted(result)
    return result


Source = Union[Run, Trained, FloatArray, Any]
"""What :func:`render` composites: a :class:`Run`, a :class:`Trained`, or features [N, C]."""
Cameras = Union[List[CameraRef], Tuple[CameraRef, ...], None]


def _features(source: Source) -> Any:
    if isinstance(source, (Run, Trained)):
        return source.features
    return _array("features", source)


@overload
def render(
    source: Source,
    scene: Optional[Scene],
    cameras: CameraRef,
    *,
    alpha: bool = ...,
    config: Config = ...,
    progress: Optional[bool] = ...,
) -> FloatArray: ...


@overload
def render(
    source: Source,
    scene: Optional[Scene] = ...,
    cameras: Cameras = ...,
    *,
    alpha: bool = ...,
    config: Config = ...,
    progress: Optional[bool] = ...,
) -> List[FloatArray]: ...


def render(
    source: Source,
    scene: Optional[Scene] = None,
    cameras: Union[CameraRef, Cameras] = None,
    *,
    alpha: bool = False,
    config: Config = None,
    progress: Optional[bool] = None,
) -> Union[FloatArray, List[FloatArray]]:
    """Renders per-Gaussian features at whole images (``lsplat-engine render``).

    ``source`` is a :class:`Run`, a :class:`Trained` or float32 features [N, C] (e.g.
    a slice of :func:`solve`'s result); ``scene`` defaults to a run's own scene.
    ``cameras`` is one camera (an index, a name or a :class:`Camera`: returns one
    float32 array [H, W, C]) or a list of them (or None, every camera: returns a
    list). ``alpha=True`` appends each pixel's opacity Σ αᵢTᵢ as a last channel
    ([H, W, C + 1]). Rendered on the scene's ``device.backend`` (the CPU by default),
    where images equal the ``.npy`` files of ``lsplat-engine render`` bit for bit.
    """
    if scene is None:
        if not isinstance(source, Run):
            raise TypeError("scene: required unless source is a Run")
        scene = source.scene
    one = not isinstance(cameras, (list, tuple)) and cameras is not None
    refs: List[CameraRef]
    if cameras is None:
        refs = list(range(len(scene.cameras)))
    elif isinstance(cameras, (list, tuple)):
        refs = list(cameras)
    else:
        refs = [cameras]
    bar = _progress(len(refs), "camera", progress) if len(refs) > 1 else None
    try:
        pairs = _lsplat.render(
            _features(source),
            scene._inner,
            refs,
            _sets(config),
            (lambda i: bar.update(1)) if bar is not None else None,
        )
    finally:
        if bar is not None:
            bar.close()
    images = [np.concatenate([img, a[..., None]], axis=2) if alpha else img for img, a in pairs]
    return images[0] if one else images


def operator(scene: Scene, camera: CameraRef, *, config: Config = None) -> "scipy.sparse.csr_matrix":
    """A camera's blending weights as a ``scipy.sparse.csr_matrix`` [H·W, N].

    Row ``y*W + x`` (row-major pixels) holds the weight αᵢTᵢ of every Gaussian i that
    pixel (x, y) composites, in compositing (front-to-back) order; columns are the
    Gaussians. So ``(W @ x).reshape(H, W, C)`` is :func:`render` of features ``x``
    (float32; within float rounding: the renderer sums each pixel's terms in the same
    order, SciPy may not). This is the operator the engine caches per camera, built
    on the CPU (weights rounded to ``render.operator_precision`` as the cache's are): the pieces
    to build your own solver, with :meth:`Scene.labels` as targets. Needs SciPy.
    """
    try:
        import scipy.sparse
    except ImportError:
        raise ImportError("lsplat.operator returns a SciPy matrix: pip install scipy") from None
    data, indices, indptr, shape = _lsplat.operator(scene._inner, camera, _sets(config))
    return scipy.sparse.csr_matrix((data, indices, indptr), shape=shape)


def relevancy(
    features: Any,
    text_embeddings: Union[PathLike, Mapping[str, Any]],
    queries: Optional[Sequence[str]] = None,
) -> FloatArray:
    """LangSplat's relevancy of features for text queries (``lsplat-engine query``).

    ``features`` [..., D] float32 (e.g. a rendered image [H, W, D] of features in the
    text space, such as a 512-D solve) are normalised per pixel and scored against
    each query embedding t and the canonical phrases n ("object", "things", "stuff",
    "texture"): ``min_n softmax(10·[φ·t, φ·n])₀``. ``text_embeddings`` is a file
    (``.parquet`` with name/embedding columns, or ``.npy`` with a ``.txt`` of names)
    or a dict ``{phrase: vector}``; it must hold the canonical phrases. ``queries``
    defaults to every other phrase. Returns float32 [..., Q] in ``queries`` order.
    """
    if isinstance(text_embeddings, Mapping):
        names = [str(k) for k in text_embeddings]
        rows = [np.asarray(_array(f"text_embeddings[{k!r}]", v), dtype=np.float32) for k, v in text_embeddings.items()]
        text: Any = (names, np.ascontiguousarray(np.stack(rows)) if rows else np.zeros((0, 0), np.float32))
    else:
        text = os.fspath(text_embeddings)
    out, _ = _lsplat.relevancy(
        _array("features", features), text, None if queries is None else [str(q) for q in queries]
    )
    return out


def _with_runtime(config: Config) -> Dict[str, Any]:
    """``config`` with ``onnx.runtime`` set to the ``onnxruntime`` package's library
    folder when neither the configuration nor ``ORT_DYLIB_PATH`` names a library and
    that package is installed (found without importing it)."""
    _sets(config)  # the same TypeError as elsewhere for a config that is not a dict
    over = dict(config or {})
    if "onnx.runtime" in over or os.environ.get("ORT_DYLIB_PATH"):
        return over
    try:
        spec = importlib.util.find_spec("onnxruntime")
    except (ImportError, ValueError):
        spec = None
    for place in (spec.submodule_search_locations or []) if spec else []:
        capi = Path(place) / "capi"
        if any(capi.glob("*onnxruntime.so*")) or any(capi.glob("*onnxruntime*.dylib")) or any(capi.glob("onnxruntime.dll")):
            over["onnx.runtime"] = capi
            break
    return over


def preprocess(
    images: PathLike,
    out: PathLike,
    *,
    sam: PathLike,
    clip: PathLike,
    resolution: int = -1,
    dataset: Optional[PathLike] = None,
    config: Config = None,
    progress: Optional[bool] = None,
    callback: Optional[Callable[[int, int, Optional[str]], Any]] = None,
) -> Dict[str, Any]:
    """Images to LangSplat's language features (``lsplat-engine preprocess``).

    Every PNG or JPEG in ``images`` (one size) goes through SAM's automatic mask
    generator with LangSplat's settings, LangSplat's mask NMS and CLIP's image tower,
    into ``out/language_features/<image>_f.npy`` and ``_s.npy`` (LangSplat's layout);
    ``dataset`` also imports them as an engine dataset. ``sam`` is a folder with
    ``encoder.onnx`` and ``decoder.onnx`` (SAM ViT-H/L/B, MobileSAM; EfficientSAM's
    also holds ``sam.json``), ``clip`` a CLIP folder (docs/formats.md;
    ``scripts/export_sam.py`` and ``scripts/export_clip.py`` make them from your
    weights). ``resolution``: -1 is LangSplat's rule (taller than 1080 → height 1080),
    1, 2, 4, 8 divide, any other N is a width.

    Each image is written whole or not at all, so a call that stops (an error, Ctrl-C,
    ``callback`` returning ``False`` after an image) is resumed by calling again: the
    images already done are skipped. ONNX Runtime is the ``onnxruntime`` package's
    when installed (``pip install onnxruntime``; ``onnxruntime-gpu`` with
    ``config={"device.backend": "cuda"}``), unless ``config["onnx.runtime"]`` or
    ``ORT_DYLIB_PATH`` names a library. A tqdm bar counts images when tqdm is installed
    (``progress=False`` hides it).

    Returns a dict: ``images``, ``processed`` (by this call), ``stopped``, ``masks``
    per level (default, s, m, l), ``features_dir``, ``dataset`` (or None),
    ``seconds`` per step and ``work`` (encoder runs, prompts, CLIP crops).
    """
    if callback is not None and not callable(callback):
        raise TypeError("callback: expected a callable (done, total, image)")
    bar: Any = None

    def on_image(done: int, total: int, image: Optional[str]) -> Any:
        nonlocal bar
        if bar is None:
            bar = _progress(total, "image", progress)
            if bar is not None:
                bar.update(done)
        elif bar is not None:
            bar.update(done - bar.n)
        return True if callback is None or image is None else callback(done, total, image)

    try:
        r: Dict[str, Any] = _lsplat.preprocess(
            _path(images),
            _path(out),
            _path(sam),
            _path(clip),
            int(resolution),
            None if dataset is None else _path(dataset),
            _sets(_with_runtime(config)),
            on_image,
        )
    finally:
        if bar is not None:
            bar.close()
    r["features_dir"] = Path(r["features_dir"])
    if r["dataset"] is not None:
        r["dataset"] = Path(r["dataset"])
    return r


def text_embeddings(
    clip: PathLike, phrases: Sequence[str], *, config: Config = None
) -> Dict[str, FloatArray]:
    """CLIP text embeddings (unit float32 vectors) of ``phrases`` and of LangSplat's
    canonical phrases ("object", "things", "stuff", "texture"), as a dict ``{phrase:
    vector}`` that :func:`relevancy` takes (``lsplat-engine embed``). ``clip`` is a
    CLIP folder with ``text.onnx`` and its vocabulary (docs/formats.md). ONNX Runtime
    is found as in :func:`preprocess`."""
    if isinstance(phrases, str):
        raise TypeError("phrases: expected a list of phrases, got one string")
    names, rows = _lsplat.text_embeddings(_path(clip), [str(p) for p in phrases], _sets(_with_runtime(config)))
    return {n: rows[i] for i, n in enumerate(names)}
