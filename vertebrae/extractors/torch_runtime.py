"""Inference plumbing shared by the PyTorch-based extractors (torch is imported only inside the functions).

- ``resolve_device("auto" | "cpu" | "cuda" | "cuda:1" | "mps")``: auto picks cuda, then mps, then cpu; an explicit
  device this machine lacks (no CUDA GPU, too few GPUs, no MPS) is a ConfigError naming the extractor and the
  ``device`` key, raised before any weights load, instead of torch's own error deep in a forward pass.
- ``inference(module, device, dtype)``: a context with the module in eval mode (each submodule's training flag
  restored afterwards), ``torch.inference_mode`` and, on a GPU with ``dtype`` float16 / bfloat16, autocast.
- ``batches(...)``: a DataLoader over a Python sequence, in order (no shuffling), with worker processes for
  decoding, a collate function and an optional tqdm progress bar.
- ``load_image(path, row_id)``: an RGB PIL image; a missing or undecodable file raises ValidationError naming
  the row and the path.
- ``file_sha256`` / ``folder_digest``: content hashes of weight and preprocessing files for recipes; a
  ``.safetensors`` file's header is checked first (``check_safetensors``: a truncated file is refused naming it).
  Memoised in the process; a job hashes what it names, only planning keeps large files' digests in the run's cache
  (``vertebrae.core.file_digests.file_digest``).
"""

from __future__ import annotations

import contextlib
import io
import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from vertebrae.core.errors import ConfigError, ValidationError
from vertebrae.core.file_digests import file_digest
from vertebrae.core.image_refs import describe, is_ref, read_image_bytes

AUTOCAST_DTYPES = ("float16", "bfloat16")
DEVICES = ("auto", "cpu", "cuda", "mps")
_CHECKED: set[tuple[str, int, int]] = set()  # safetensors files whose header passed its check


def vertebrae_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("vertebrae")
    except PackageNotFoundError:  # a source checkout that is not installed
        return "0+unknown"


def check_device(device: str, *, where: str) -> str:
    if not isinstance(device, str) or device.split(":")[0] not in DEVICES:
        raise ConfigError(f"{where}.device: must be one of {DEVICES} (or cuda:N), got {device!r}")
    return device


def check_dtype(dtype: str | None, *, where: str) -> str | None:
    if dtype is not None and dtype not in AUTOCAST_DTYPES:
        raise ConfigError(f"{where}.dtype: autocast dtype must be null or one of {AUTOCAST_DTYPES}, got {dtype!r}")
    return dtype


def _missing_device(device: str) -> str | None:
    """Why this machine cannot run on ``device`` (cuda, cuda:N, mps), or None when it can."""
    import torch

    kind, _, index = device.partition(":")
    if kind == "cuda":
        if torch.version.cuda is None:
            return f"this torch build (torch {torch.__version__}) has no CUDA support"
        if not torch.cuda.is_available():
            visible = os.environ.get("CUDA_VISIBLE_DEVICES")
            return ("torch finds no CUDA GPU on this machine (torch.cuda.is_available() is False: no GPU, no NVIDIA "
                    "driver" + (f", or CUDA_VISIBLE_DEVICES={visible!r} hides them" if visible is not None else "") + ")")
        count = torch.cuda.device_count()
        if index and (not index.isdigit() or int(index) >= count):
            return f"torch sees {count} CUDA GPU(s) on this machine (cuda:0 to cuda:{count - 1})"
    elif kind == "mps":
        mps = getattr(torch.backends, "mps", None)
        if mps is None or not mps.is_available():
            return "Apple's MPS backend is not available on this machine"
    return None


def resolve_device(device: str = "auto", *, extractor: str | None = None, where: str | None = None) -> Any:
    """The torch device for ``device``; ConfigError naming ``extractor`` and the ``where.device`` key when this
    machine does not have it (``auto`` always resolves: cuda, then mps, then cpu)."""
    import torch

    if device != "auto":
        why = _missing_device(device)
        if why is not None:
            key = "device" if where is None or where.startswith("extractor ") else f"{where}.device"
            who = f"extractor {extractor!r}" if extractor is not None else "an extractor"
            raise ConfigError(f"{who}: {key} is {device!r}, but {why}. Run it where that device is (on SLURM, the "
                              f"embedding job asks for a GPU because of device: cuda), or set {key} to 'auto' (a GPU "
                              "when there is one, else the CPU) or 'cpu'")
        return torch.device(device)
    if torch.cuda.is_available():
        return torch.device("cuda")
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


@contextlib.contextmanager
def eval_mode(module: Any) -> Iterator[Any]:
    """The module in eval mode; every submodule's training flag is restored on exit."""
    flags = [(m, m.training) for m in module.modules()]
    module.eval()
    try:
        yield module
    finally:
        for m, flag in flags:
            m.training = flag


@contextlib.contextmanager
def inference(module: Any, device: Any, dtype: str | None = None) -> Iterator[None]:
    """Eval mode + inference_mode (+ autocast to ``dtype`` on cuda / mps; on cpu ``dtype`` is ignored)."""
    import torch

    with contextlib.ExitStack() as stack:
        stack.enter_context(eval_mode(module))
        stack.enter_context(torch.inference_mode())
        if dtype is not None and device.type in ("cuda", "mps"):
            stack.enter_context(torch.autocast(device.type, dtype=getattr(torch, dtype)))
        yield


_FLOAT32: Any = None  # torch.float32, bound on first use (torch is imported lazily)


def host_rows(output: Any) -> Any:
    """A model output tensor as float32 numpy rows; no-op conversions are skipped (each costs ~1 us per batch,
    which shows on small models)."""
    global _FLOAT32
    if _FLOAT32 is None:
        import torch

        _FLOAT32 = torch.float32
    if output.dtype is not _FLOAT32:
        output = output.float()
    if not output.is_cpu:
        output = output.cpu()
    return output.numpy()


def batches(items: Sequence[Any], *, batch_size: int, collate: Callable[[list[Any]], Any],
            load: Callable[[int], Any] | None = None, num_workers: int = 0, progress: bool = False,
            desc: str = "embedding") -> Iterator[Any]:
    """Collated batches of ``load(i)`` (default ``items[i]``) over ``items``, in order.

    ``num_workers > 0`` decodes in worker processes (torch DataLoader); exceptions raised there reach the caller
    with their message.
    """
    n = len(items)
    if num_workers > 0:
        from torch.utils.data import DataLoader

        loader: Any = DataLoader(_Indexed(items, load), batch_size=batch_size, shuffle=False,
                                 num_workers=num_workers, collate_fn=collate)
    elif load is None:  # slices keep numeric rows contiguous (no per-row copies)
        loader = (collate(items[a:a + batch_size]) for a in range(0, n, batch_size))
    else:
        loader = (collate([load(i) for i in range(a, min(a + batch_size, n))]) for a in range(0, n, batch_size))
    if progress:
        from tqdm.auto import tqdm

        loader = tqdm(loader, total=(n + batch_size - 1) // batch_size, desc=desc, unit="batch")
    yield from loader


class _Indexed:
    """A map-style dataset over a sequence (``load(i)`` or ``items[i]``)."""

    def __init__(self, items: Sequence[Any], load: Callable[[int], Any] | None) -> None:
        self.items, self.load = items, load

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, i: int) -> Any:
        return self.load(i) if self.load is not None else self.items[i]


def load_image(path: str, row_id: Any) -> Any:
    """The image at ``path`` as RGB; ValidationError naming the row and path when missing or undecodable."""
    import warnings

    from PIL import Image, UnidentifiedImageError

    try:
        with warnings.catch_warnings():  # PIL only warns up to twice its limit: refused, not left in a job's log
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(read_image_bytes(path)) if is_ref(path) else path) as image:
                return image.convert("RGB")
    except FileNotFoundError:
        raise ValidationError(f"row {row_id!r}: image file not found: {describe(path)}") from None
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
        raise ValidationError(f"row {row_id!r}: image {describe(path)} is refused as a possible decompression bomb: "
                              f"{exc} (PIL.Image.MAX_IMAGE_PIXELS = {Image.MAX_IMAGE_PIXELS}); resize it below "
                              "that") from None
    except (UnidentifiedImageError, OSError, ValueError) as exc:
        raise ValidationError(f"row {row_id!r}: cannot decode image {describe(path)}: {exc}") from None


def file_sha256(path: str | Path) -> str:
    """SHA-256 of a weights or preprocessing file's bytes (``vertebrae.core.file_digests.file_digest``: memoised in
    the process; a large file's digest kept in the run's cache while a config is planned, never read by a job). A
    ``.safetensors`` file's header is checked first, once per path, size and modification time in the process."""
    path = Path(path)
    if path.suffix == ".safetensors":
        stat = path.stat()
        key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
        if key not in _CHECKED:
            check_safetensors(path)
            _CHECKED.add(key)
    return file_digest(path)


def check_safetensors(path: Path) -> None:
    """ValidationError naming ``path`` unless its safetensors header reads and covers the file (a truncated or
    corrupt download is refused when the extractor is built, at plan time, not inside the library that loads it).
    Reads the header only; imports no framework."""
    try:
        from safetensors import SafetensorError, safe_open
    except ImportError:  # no safetensors: the library that loads the file says what it needs
        return
    try:
        with safe_open(str(path), framework="numpy"):
            pass
    except (SafetensorError, OSError, ValueError) as exc:
        raise ValidationError(f"weights file {path} is not a readable safetensors file (truncated or corrupt?): "
                              f"{exc}") from None


def model_files(folder: str | Path) -> Iterator[Path]:
    """The files of a model folder, walked in sorted order; hidden files and folders (``.cache``, ``.git``)
    are not part of a model."""
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        yield from (Path(root) / name for name in sorted(files) if not name.startswith("."))


def folder_digest(folder: str | Path) -> dict[str, str]:
    """``{relative path: sha256}`` of every file in a model folder (``model_files``)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ConfigError(f"model folder not found: {folder}")
    out = {path.relative_to(folder).as_posix(): file_sha256(path) for path in model_files(folder)}
    if not out:
        raise ConfigError(f"model folder {folder} holds no files")
    return out


# --------------------------------------------------------------------------------------------------------
# the shared base of model extractors


def _as_items(inputs: Any, modality: str, *, name: str, branch: str | None) -> tuple[list[Any], list[Any]]:
    """(items, row ids for messages) from RawInputs, a list of texts, or a list of image paths / PIL images / arrays."""
    from vertebrae.core.inputs import RawInputs

    if isinstance(inputs, RawInputs):
        if inputs.kind != modality:
            raise ValidationError(f"extractor {name!r} (branch {branch!r}) encodes {modality} rows, got {inputs.kind} "
                                  f"rows (first row id {inputs.ids[0]!r})" if len(inputs) else f"extractor {name!r}: no rows")
        return list(inputs.values), list(inputs.ids)
    items = list(inputs.tolist() if hasattr(inputs, "tolist") and modality == "text" else inputs)
    if modality == "text":
        for i, item in enumerate(items):
            if not isinstance(item, str):
                raise ValidationError(f"extractor {name!r} (branch {branch!r}) encodes texts; row {i} is "
                                      f"{type(item).__name__}")
    return items, list(range(len(items)))


class _ImageRows:
    """Picklable per-row image loader for DataLoader workers: path -> RGB image -> ``transform``."""

    def __init__(self, items: Sequence[Any], ids: Sequence[Any], transform: Callable[[Any], Any] | None) -> None:
        self.items, self.ids, self.transform = items, ids, transform

    def __call__(self, i: int) -> Any:
        item = self.items[i]
        if isinstance(item, (str, os.PathLike)):
            item = load_image(os.fspath(item), self.ids[i])
        elif not hasattr(item, "convert"):  # a HxWxC uint8 array
            import numpy as np
            from PIL import Image

            item = Image.fromarray(np.asarray(item))
        else:
            item = item.convert("RGB")
        return item if self.transform is None else self.transform(item)


class ModelExtractor:
    """Mixin for extractors that run a PyTorch model lazily loaded on first use.

    Subclasses define ``branch_modality`` ({branch: "text" | "image"}), ``default_branch`` (used when a protocol
    names no branch), ``_load()`` (returns the loaded state, with a ``module`` attribute), ``_image_transform``,
    ``_collate(branch, items)`` and ``_forward(branch, batch) -> torch.Tensor``. ``transform`` streams rows in
    batches of ``batch_size`` and returns float32 numpy rows in input order.
    """

    branch_modality: dict[str | None, str]
    default_branch: str | None = None

    def _init_runtime(self, *, device: str = "auto", dtype: str | None = None, batch_size: int = 32,
                      num_workers: int = 0, progress: bool = False, where: str = "extractor") -> None:
        self.device = check_device(device, where=where)
        self.dtype = check_dtype(dtype, where=where)
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ConfigError(f"{where}.batch_size: must be a positive integer, got {batch_size!r}")
        if isinstance(num_workers, bool) or not isinstance(num_workers, int) or num_workers < 0:
            raise ConfigError(f"{where}.num_workers: must be a non-negative integer, got {num_workers!r}")
        self.batch_size, self.num_workers, self.progress = batch_size, num_workers, bool(progress)
        self._where = where
        self._state: Any = None

    def runtime_recipe(self) -> dict[str, Any]:
        return {"dtype": self.dtype, "vertebrae_version": vertebrae_version()}

    def check_branch(self, branch: str | None) -> None:
        if branch is None or branch in self.branch_modality:
            return
        raise ValidationError(f"extractor {self.name!r} encodes through branches "  # type: ignore[attr-defined]
                              f"{[b for b in self.branch_modality if b is not None]}, got {branch!r}")

    def loaded(self) -> Any:
        if self._state is None:
            self.torch_device()  # a device this machine lacks is refused before any weights load
            self._state = self._load()
        return self._state

    def torch_device(self) -> Any:
        if getattr(self, "_torch_device", None) is None:  # resolved once: probing cuda per batch costs time
            self._torch_device = resolve_device(self.device, extractor=self.name,  # type: ignore[attr-defined]
                                                where=getattr(self, "_where", None))
        return self._torch_device

    def _image_transform(self, branch: str | None) -> Callable[[Any], Any] | None:
        return None

    def transform(self, inputs: Any, *, branch: str | None = None) -> Any:
        import numpy as np

        outs = [host_rows(out) for out in self._run(inputs, branch, self._forward)]
        return np.concatenate(outs, axis=0)

    def transform_layers(self, inputs: Any, layers: Sequence[int], *, branch: str | None = None) -> dict[int, Any]:
        """``{layer: rows}``: the embeddings ``hidden_layer: layer`` gives, for every layer of ``layers``, from ONE
        forward pass per batch (a layer sweep; extractors with ``_forward_layers``). Each equals the single-layer
        extractor's ``transform`` bit for bit: it is the same forward pass, pooled the same way."""
        import numpy as np

        layers = [int(layer) for layer in layers]
        self.check_layers(layers)
        per_layer: dict[int, list[Any]] = {layer: [] for layer in layers}
        for outs in self._run(inputs, branch, lambda b, batch: self._forward_layers(b, batch, layers)):
            for layer, out in zip(layers, outs):
                per_layer[layer].append(host_rows(out))
        return {layer: np.concatenate(outs, axis=0) for layer, outs in per_layer.items()}

    def check_layers(self, layers: Sequence[int], *, key: str = "hidden_layers") -> None:
        """Refuse layer indices this model does not have (subclasses that sweep layers check their depth)."""
        if not hasattr(self, "_forward_layers"):
            raise ConfigError(f"extractor {self.name!r} has no hidden layers to sweep")  # type: ignore[attr-defined]

    def _run(self, inputs: Any, branch: str | None, forward: Callable[[str | None, Any], Any]) -> Iterator[Any]:
        """``forward(branch, batch)`` over the rows in batches of ``batch_size``, in eval + inference mode."""
        self.check_branch(branch)
        branch = branch if branch is not None else self.default_branch
        modality = self.branch_modality[branch]
        items, ids = _as_items(inputs, modality, name=self.name, branch=branch)  # type: ignore[attr-defined]
        if not items:
            raise ValidationError(f"extractor {self.name!r}: no rows to encode")  # type: ignore[attr-defined]
        state = self.loaded()
        device = self.torch_device()
        load = _ImageRows(items, ids, self._image_transform(branch)) if modality == "image" else None
        workers = self.num_workers if modality == "image" else 0
        with inference(state.module, device, self.dtype):
            for batch in batches(items, batch_size=self.batch_size, collate=lambda b: self._collate(branch, b),
                                 load=load, num_workers=workers, progress=self.progress,
                                 desc=f"{self.name}:{branch or modality}"):  # type: ignore[attr-defined]
                yield forward(branch, batch)

    def weight_files(self) -> list[Path] | None:
        """The local files or folders its weights load from (a job's memory is sized from their size); None when
        unknown before loading (a hub id, a named open_clip checkpoint, a module built by a callable)."""
        return None

    # subclass hooks
    def _load(self) -> Any:
        raise NotImplementedError

    def _collate(self, branch: str | None, items: list[Any]) -> Any:
        raise NotImplementedError

    def _forward(self, branch: str | None, batch: Any) -> Any:
        raise NotImplementedError


_SKLEARN_DEFAULTS = {"random_state": 0, "allow_sparse": True}  # schema defaults filled into every extractor


def model_options(decl: Any, *, where: str) -> dict[str, Any]:
    """A model adapter's constructor keywords from its config declaration (``type`` and untouched sklearn-only
    defaults dropped; a sklearn-only key set to anything else is an error naming it)."""
    opts = {k: v for k, v in decl.items() if k != "type"}
    for key, default in _SKLEARN_DEFAULTS.items():
        if key in opts:
            if opts[key] != default:
                raise ConfigError(f"{where}.{key}: applies to type sklearn only")
            del opts[key]
    return opts
