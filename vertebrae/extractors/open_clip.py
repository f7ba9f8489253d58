"""OpenCLIPExtractor: any open_clip model (CLIP, SigLIP, ...) through open_clip's own loading code.

``model`` is an open_clip model name (``ViT-B-32``, ``ViT-B-16-SigLIP``, ``hf-hub:org/repo``) with ``pretrained``
a tag of open_clip's registry or a local weights file; or ``local-dir:FOLDER`` (a folder holding
``open_clip_config.json`` and ``open_clip_model.safetensors``, loaded exactly like a hub model). A hub model is
downloaded by open_clip only because the user named it; nothing else is fetched at run time.

Branches: ``image_branch`` (the default, used when a protocol names no branch, e.g. the labelled protocol) and
``text_branch`` (open_clip's tokenizer and text tower), always both available for retrieval and zero-shot.

The recipe pins the output: a local folder by the SHA-256 of its files (weights and the model / preprocessing
config), a local weights file by its SHA-256, a registry tag by name, tag and the open_clip version; plus the
preprocessing overrides, normalisation, autocast dtype and the vertebrae version.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from vertebrae.core.errors import ConfigError
from vertebrae.extractors.base import Extractor
from vertebrae.extractors.torch_runtime import ModelExtractor, file_sha256, folder_digest, model_options

LOCAL_DIR = "local-dir:"
PREPROCESS_KEYS = ("image_mean", "image_std", "image_interpolation", "image_resize_mode")


def _open_clip_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("open_clip_torch")
    except PackageNotFoundError:
        return "unknown"


class OpenCLIPExtractor(ModelExtractor, Extractor):
    """Image and text embeddings from an open_clip model (``encode_image`` / ``encode_text``)."""

    branches = ("image_branch", "text_branch")
    branch_modality = {None: "image", "image_branch": "image", "text_branch": "text"}
    default_branch = "image_branch"

    def __init__(self, name: str, model: str, *, pretrained: str | None = None, normalize: bool = True,
                 preprocess: Mapping[str, Any] | None = None, device: str = "auto", dtype: str | None = None,
                 batch_size: int = 32, num_workers: int = 0, progress: bool = False, base_dir: str | Path = ".",
                 where: str | None = None) -> None:
        where = where or f"extractor {name!r}"
        if not isinstance(model, str) or not model:
            raise ConfigError(f"{where}.model: an open_clip model name or local-dir:FOLDER is required, got {model!r}")
        preprocess = dict(preprocess or {})
        unknown = sorted(set(preprocess) - set(PREPROCESS_KEYS))
        if unknown:
            raise ConfigError(f"{where}.preprocess: unknown key(s) {unknown}; allowed: {list(PREPROCESS_KEYS)}")
        for key in ("image_mean", "image_std"):
            if key in preprocess:
                value = preprocess[key]
                if not isinstance(value, Sequence) or len(value) != 3 or not all(isinstance(v, (int, float)) for v in value):
                    raise ConfigError(f"{where}.preprocess.{key}: must be three numbers, got {value!r}")
                preprocess[key] = tuple(float(v) for v in value)
        self.name, self.normalize, self.preprocess = name, bool(normalize), preprocess
        self._model_name, self._pretrained = model, pretrained
        self._model_recipe = self._resolve(model, pretrained, Path(base_dir), where)
        self._init_runtime(device=device, dtype=dtype, batch_size=batch_size, num_workers=num_workers,
                           progress=progress, where=where)

    def _resolve(self, model: str, pretrained: str | None, base_dir: Path, where: str) -> dict[str, Any]:
        if model.startswith(LOCAL_DIR):
            folder = Path(model[len(LOCAL_DIR):])
            if not folder.is_absolute():
                folder = base_dir / folder
            if not (folder / "open_clip_config.json").is_file():
                raise ConfigError(f"{where}.model: {folder} holds no open_clip_config.json")
            if pretrained is not None:
                raise ConfigError(f"{where}.pretrained: a local-dir model carries its weights; leave pretrained unset")
            self._model_name = LOCAL_DIR + str(folder)
            return {"local_dir": folder_digest(folder)}
        recipe: dict[str, Any] = {"name": model, "open_clip": _open_clip_version()}
        if pretrained is not None:
            path = Path(pretrained)
            if not path.is_absolute():
                path = base_dir / path
            if path.is_file():
                self._pretrained = str(path)
                recipe["weights_sha256"] = file_sha256(path)
            elif "/" in pretrained or pretrained.endswith((".pt", ".bin", ".safetensors", ".pth")):
                raise ConfigError(f"{where}.pretrained: weights file not found: {path}")
            else:
                recipe["pretrained"] = pretrained
        else:
            recipe["pretrained"] = None  # random weights: only meaningful for tests, still deterministic by seed
        return recipe

    def weight_files(self) -> list[Path] | None:
        if self._model_name.startswith(LOCAL_DIR):
            return [Path(self._model_name[len(LOCAL_DIR):])]
        return [Path(self._pretrained)] if "weights_sha256" in self._model_recipe else None

    def recipe(self) -> dict[str, Any]:
        preprocess = {k: list(v) if isinstance(v, tuple) else v for k, v in sorted(self.preprocess.items())}
        return {"type": "open_clip", "model": self._model_recipe, "preprocess": preprocess, "normalize": self.normalize,
                **self.runtime_recipe()}

    def _load(self) -> Any:
        import open_clip

        device = self.torch_device()
        module, _, preprocess = open_clip.create_model_and_transforms(
            self._model_name, pretrained=self._pretrained, device=device, **self.preprocess)
        tokenizer = open_clip.get_tokenizer(self._model_name)
        return SimpleNamespace(module=module, preprocess=preprocess, tokenizer=tokenizer)

    def _image_transform(self, branch: str | None) -> Any:
        return self.loaded().preprocess

    def _collate(self, branch: str | None, items: list[Any]) -> Any:
        import torch

        if self.branch_modality[branch] == "image":
            return torch.stack(items)
        return self.loaded().tokenizer(items)

    def _forward(self, branch: str | None, batch: Any) -> Any:
        module, device = self.loaded().module, self.torch_device()
        if self.branch_modality[branch] == "image":
            return module.encode_image(batch.to(device), normalize=self.normalize)
        return module.encode_text(batch.to(device), normalize=self.normalize)


def from_decl(name: str, decl: Mapping[str, Any], where: str) -> OpenCLIPExtractor:
    opts = model_options(decl, where=where)
    try:
        return OpenCLIPExtractor(name, opts.pop("model", None), where=where, **opts)
    except TypeError as exc:
        raise ConfigError(f"{where}: {exc}") from None
