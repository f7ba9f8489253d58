"""OpenCLIPExtractor: any open_clip model (CLIP, SigLIP, ...) through open_clip's own loading code.

``model`` is an open_clip model name (``ViT-B-32``, ``ViT-B-16-SigLIP``, ``hf-hub:org/repo``) with ``pretrained``
a tag of open_clip's registry or a local weights file; or ``local-dir:FOLDER`` (a folder holding
``open_clip_config.json`` and ``open_clip_model.safetensors``, loaded exactly like a hub model). A hub model is
downloaded by open_clip only because the user named it; nothing else is fetched at run time.

Branches: ``image_branch`` (the default, used when a protocol names no branch, e.g. the labelled protocol) and
``text_branch`` (open_clip's tokenizer and text tower), always both available for retrieval and zero-shot.

The name is resolved when the extractor is built, before any job (``vertebrae.extractors.model_names``): a
model name and pretrained tag in open_clip's own registry (the closest names suggested), a ``local-dir:`` folder
holding its config, an ``hf-hub:`` id in the local cache (or, online, on the hub); offline, a tag's weights and a
model's hub tokenizer must be cached. A registry name is checked without importing open_clip (its model_configs
folder); a tag imports it once, and inside ``vertebrae.core.check_records.remembered_in`` (the workflow's planning)
what the registry said is recorded and recalled after.

The recipe pins the output: a local folder by the SHA-256 of its files (weights and the model / preprocessing
config), a local weights file by its SHA-256, a registry tag by name, tag and the open_clip version; plus the
preprocessing overrides, normalisation, autocast dtype and the vertebrae version.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from vertebrae.core import check_records
from vertebrae.core.errors import ConfigError
from vertebrae.extractors import model_names
from vertebrae.extractors.base import Extractor
from vertebrae.extractors.torch_runtime import ModelExtractor, file_sha256, folder_digest, model_options

LOCAL_DIR = "local-dir:"
HF_HUB = "hf-hub:"
PREPROCESS_KEYS = ("image_mean", "image_std", "image_interpolation", "image_resize_mode")
_REGISTRY_CHECK = "open_clip-registry"  # check_records: what open_clip's registry says of a name and tag
_HF_WEIGHTS, _HF_SAFE_WEIGHTS = "open_clip_pytorch_model.bin", "open_clip_model.safetensors"  # open_clip.constants


def _builtin_configs() -> dict[str, Path] | None:
    """open_clip's built-in model configs ({name: file}), read from its model_configs folder without importing it;
    None once open_clip is imported (its registry may then hold configs added at run time: ask it)."""
    if "open_clip" in sys.modules:
        return None
    from importlib.util import find_spec

    spec = find_spec("open_clip")
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations))) / "model_configs"
    return {path.stem: path for path in folder.glob("*.json")} or None


def _tokenizer_of(model_cfg: Any) -> str | None:
    text = model_cfg.get("text_cfg") if isinstance(model_cfg, dict) else None
    name = text.get("hf_tokenizer_name") if isinstance(text, dict) else None
    return name if isinstance(name, str) and name else None


def _unknown_model(model: str, name: str, known: Sequence[str], where: str) -> ConfigError:
    near = model_names.closest(name, known)
    hint = f"; closest open_clip names: {', '.join(near)}" if near else ""
    return ConfigError(f"{where}.model: {model!r} is not an open_clip model (open_clip {_open_clip_version()}){hint}; "
                      "or name local-dir:FOLDER or hf-hub:ORG/REPO")


def _registry_lookup(model: str, tag: str | None, where: str) -> dict[str, Any]:
    """What open_clip's registry says of ``model`` (a built-in name) and ``tag``: {"weights": the hub id and file
    names of the tag's weights, or None; "tokenizer": the model's hub tokenizer, or None}; ConfigError (the closest
    names, the model's tags) when it knows neither."""
    name = model.replace("/", "-")  # as open_clip reads a built-in name
    configs = _builtin_configs()
    if configs is not None and (name not in configs or tag is None):  # decided without importing open_clip
        if name in configs:
            return {"weights": None, "tokenizer": _tokenizer_of(model_names.read_json(configs[name], where))}
        raise _unknown_model(model, name, sorted(configs), where)
    import open_clip
    from open_clip.pretrained import get_pretrained_cfg, list_pretrained_tags_by_model

    if name not in open_clip.list_models():
        raise _unknown_model(model, name, open_clip.list_models(), where)
    tokenizer = _tokenizer_of(open_clip.get_model_config(name))
    if tag is None:
        return {"weights": None, "tokenizer": tokenizer}
    cfg = get_pretrained_cfg(name, tag)
    if not cfg or not cfg.get("hf_hub"):
        tags = list_pretrained_tags_by_model(name)
        near = model_names.closest(tag, tags)
        listed = f"; its tags: {', '.join(tags)}" if tags else "; it has no pretrained tag (leave pretrained unset)"
        hint = f"; closest: {', '.join(near)}" if near else ""
        raise ConfigError(f"{where}.pretrained: {tag!r} is not a pretrained tag of open_clip model {name} (open_clip "
                          f"{_open_clip_version()}){hint}{listed}; or name a local weights file")
    repo, _, filename = cfg["hf_hub"].rpartition("/")
    filename = filename or _HF_WEIGHTS
    files = [filename]
    if filename == _HF_WEIGHTS:  # open_clip prefers a safetensors file when the repo has one
        files.insert(0, _HF_SAFE_WEIGHTS)
    elif filename.endswith((".bin", ".pth")):
        files.insert(0, filename[:-4] + ".safetensors")
    return {"weights": {"repo": repo, "files": files}, "tokenizer": tokenizer}


def _registry_entry(model: str, tag: str | None, where: str) -> dict[str, Any]:
    """``_registry_lookup``, recalled where a workflow has recorded it under the same open_clip version."""
    declared = {"model": model, "pretrained": tag}
    found = check_records.recalled(_REGISTRY_CHECK, declared, ("open_clip_torch",))
    if not (isinstance(found, dict) and set(found) == {"weights", "tokenizer"}):
        found = _registry_lookup(model, tag, where)
        check_records.remember(_REGISTRY_CHECK, declared, ("open_clip_torch",), found)
    return found


def _check_cached(entry: Mapping[str, Any], where: str) -> None:
    """Offline: a tag's weights and the model's hub tokenizer are in the local cache (online open_clip fetches them)."""
    weights = entry.get("weights")
    if isinstance(weights, dict):
        model_names.check_weights_cached(weights["repo"], weights["files"], f"{where}.pretrained",
                                         what="the tag's weights")
    tokenizer = entry.get("tokenizer")
    if isinstance(tokenizer, str) and model_names.hub_offline():
        cache = model_names.hub_cache_dir()
        if model_names.cached_snapshot(cache, tokenizer, None) is None:
            raise ConfigError(f"{where}.model: the model's tokenizer {tokenizer!r} is not in the local cache ({cache}) "
                              f"and HF_HUB_OFFLINE is set; {model_names.download_hint(tokenizer, None)}")


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
        model_names.require("open_clip", where)
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
            if not folder.is_dir():
                raise ConfigError(f"{where}.model: folder not found: {folder}")
            model_names.check_folder(folder, "open_clip", f"{where}.model")
            if pretrained is not None:
                raise ConfigError(f"{where}.pretrained: a local-dir model carries its weights; leave pretrained unset")
            self._model_name = LOCAL_DIR + str(folder)
            return {"local_dir": folder_digest(folder)}
        recipe: dict[str, Any] = {"name": model, "open_clip": _open_clip_version()}
        if model.startswith(HF_HUB):
            if pretrained is not None:
                raise ConfigError(f"{where}.pretrained: an hf-hub model carries its weights; leave pretrained unset")
            snapshot = model_names.check_hub_id(model[len(HF_HUB):], None, "open_clip", f"{where}.model")
            if snapshot is not None:  # its tokenizer, as its config names it
                config = model_names.read_json(snapshot / "open_clip_config.json", f"{where}.model")
                _check_cached({"tokenizer": _tokenizer_of(config.get("model_cfg"))}, where)
            recipe["pretrained"] = None
            return recipe
        tag = None
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
                recipe["pretrained"] = tag = pretrained
        else:
            recipe["pretrained"] = None  # random weights: only meaningful for tests, still deterministic by seed
        _check_cached(_registry_entry(model, tag, where), where)
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
