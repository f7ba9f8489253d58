"""Extractors declared in a workflow config, by ``type``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from vertebrae.core.errors import ConfigError
from vertebrae.extractors import precomputed
from vertebrae.extractors.base import Extractor
from vertebrae.extractors.sklearn import SklearnExtractor


def _precomputed(name: str, decl: Mapping[str, Any], where: str) -> Extractor:
    """The dataset's own rows (no ``path`` / ``files``), else rows of embedding files aligned by row id."""
    return precomputed.from_decl(name, decl, where)


def _sklearn(name: str, decl: Mapping[str, Any], where: str) -> Extractor:
    return SklearnExtractor.from_steps(
        name, decl.get("steps") or [], random_state=decl.get("random_state", 0),
        allow_sparse=decl.get("allow_sparse", True), where=where, trusted_modules=decl.get("trusted_modules"),
    )


def _callable(name: str, decl: Mapping[str, Any], where: str) -> Extractor:
    from vertebrae.extractors.branches import CallableBranchExtractor

    return CallableBranchExtractor(name, decl.get("branches") or {}, cache_identity=decl.get("cache_identity"), where=where)


def _model(module: str, attr: str | None = None):
    """A builder for a model adapter, imported only when a config declares one (the adapters import torch lazily)."""

    def build(name: str, decl: Mapping[str, Any], where: str) -> Extractor:
        import importlib

        mod = importlib.import_module(f"vertebrae.extractors.{module}")
        if attr is None:
            return mod.from_decl(name, decl, where)
        return mod.from_decl(getattr(mod, attr), name, decl, where)

    return build


BUILDERS = {"precomputed": _precomputed, "sklearn": _sklearn, "callable": _callable,
            "open_clip": _model("open_clip"), "hf_text": _model("huggingface", "HFTextExtractor"),
            "hf_vision": _model("huggingface", "HFVisionExtractor"),
            "hf_multimodal": _model("huggingface", "HFMultimodalExtractor"), "torch": _model("torch_module"),
            "timm": _model("timm_models"), "sentence_transformers": _model("sentence_transformer_model"),
            "onnx": _model("onnx_model")}


_MODEL = ("device", "dtype", "batch_size", "num_workers", "progress")
_HF = ("model", "model_path_from", "revision", "normalize", *_MODEL)
#: The keys each extractor type takes besides ``type`` (the schema lists their union).
EXTRACTOR_KEYS: dict[str, tuple[str, ...]] = {
    "precomputed": (*precomputed.FILE_KEYS, "files"),
    "sklearn": ("steps", "random_state", "allow_sparse", "trusted_modules"),
    "callable": ("branches", "cache_identity"),
    "open_clip": ("model", "pretrained", "normalize", "preprocess", *_MODEL),
    "hf_text": (*_HF, "pooling", "max_length", "prefix", "prefixes", "hidden_layer", "hidden_layers"),
    "hf_vision": (*_HF, "pooling", "hidden_layer", "hidden_layers"),
    "hf_multimodal": (*_HF, "text_padding", "max_length"),
    "timm": ("model", "pretrained", "checkpoint", "model_args", "revision", "pooling", "hidden_layer", "hidden_layers",
             "preprocess", "normalize", *_MODEL),
    "sentence_transformers": ("model", "model_path_from", "revision", "prompt_name", "prompt", "truncate_dim",
                              "cache_identity", *_MODEL),
    "torch": ("factory", "params", "weights", "collate", "output", "image_transform", "modality", "cache_identity",
              *_MODEL),
    "onnx": ("path", "input_name", "output_name", "modality", "image_transform", "tokenizer", "max_length", "pooling",
             "normalize", "device", "batch_size", "num_workers", "progress"),
}
for _kind in ("torch", "timm", "hf_text", "hf_vision", "hf_multimodal", "sentence_transformers", "open_clip"):
    EXTRACTOR_KEYS[_kind] += ("checkpoints", "step_from")  # a checkpoint sweep (vertebrae.extractors.checkpoints)
_SCHEMA_DEFAULTS = {"random_state": 0, "allow_sparse": True}  # filled into every extractor by the schema


def check_extractor_keys(decl: Mapping[str, Any], *, where: str) -> None:
    """Refuse a key that belongs to other extractor types (it would be ignored: ``path:`` on ``type: sklearn``),
    naming the key, the type and the types it belongs to. Schema defaults left untouched are not the user's."""
    kind = decl.get("type")
    allowed = EXTRACTOR_KEYS.get(kind)
    if allowed is None:
        return
    for key in decl:
        if key == "type" or key in allowed or (key in _SCHEMA_DEFAULTS and decl[key] == _SCHEMA_DEFAULTS[key]):
            continue
        owners = [t for t, keys in EXTRACTOR_KEYS.items() if key in keys]
        belongs = f"a key of extractor type(s) {', '.join(owners)}" if owners else "not a key of any extractor type"
        raise ConfigError(f"{where}.{key}: {belongs}, not of type {kind!r}, which would ignore it; type {kind!r} "
                          f"takes {', '.join(allowed)}")


def build_extractor(name: str, decl: Mapping[str, Any], *, where: str) -> Extractor:
    """The extractor a config declares under ``where`` (e.g. ``benchmarks.digits.extractors.pca``)."""
    if not isinstance(name, str):  # YAML reads `123:` as a number; a name is text in file names and reports
        raise ConfigError(f"{where}: extractor name {name!r} is not text (YAML reads it unquoted as a "
                          f"{'number' if isinstance(name, (int, float)) and not isinstance(name, bool) else type(name).__name__}); quote it: \"{name}\":")
    if not isinstance(decl, Mapping):
        raise ConfigError(f"{where}: an extractor is a mapping of settings with a type, got {type(decl).__name__}")
    kind = decl.get("type")
    if kind not in BUILDERS:
        raise ConfigError(f"{where}.type: unknown extractor type {kind!r}; known types: {sorted(BUILDERS)}")
    check_extractor_keys(decl, where=where)
    return BUILDERS[kind](name, decl, where)


#: Extractor types whose ``hidden_layers: [...]`` declares a layer sweep
SWEEPABLE = ("hf_vision", "hf_text", "timm")


def expand_layer_sweeps(extractors: Mapping[str, Any], *, where: str) -> dict[str, Any]:
    """The candidates of an ``extractors`` mapping with every layer sweep expanded: ``name: {hidden_layers: [4, 8]}``
    becomes ``name@4: {hidden_layer: 4}`` and ``name@8: {hidden_layer: 8}`` (the rest of the declaration kept),
    exactly the candidates a user would write one by one, so each layer's recipe and fingerprint are the
    single-layer candidate's. The workflow planner then embeds a sweep's layers in one forward pass per batch
    (``vertebrae.planning.sweeps``)."""
    out: dict[str, Any] = {}
    for name, decl in extractors.items():
        if not isinstance(decl, Mapping) or "hidden_layers" not in decl:
            if name in out:
                raise ConfigError(f"{where}.{name}: a layer sweep already makes a candidate of this name; rename one")
            out[name] = decl
            continue
        key = f"{where}.{name}.hidden_layers"
        kind, layers = decl.get("type"), decl["hidden_layers"]
        if kind not in SWEEPABLE:
            raise ConfigError(f"{key}: a layer sweep needs an extractor of type {', '.join(SWEEPABLE)}, not {kind!r}")
        if (not isinstance(layers, list) or not layers
                or any(isinstance(layer, bool) or not isinstance(layer, int) for layer in layers)):
            raise ConfigError(f"{key}: must be a non-empty list of layer indices (integers), got {layers!r}")
        if len(set(layers)) != len(layers):
            raise ConfigError(f"{key}: layer {next(x for x in layers if layers.count(x) > 1)} is listed twice")
        if decl.get("hidden_layer") is not None:
            raise ConfigError(f"{key}: declare hidden_layer (one layer) or hidden_layers (a sweep), not both")
        for layer in layers:
            layer_name = f"{name}@{layer}"
            if layer_name in extractors or layer_name in out:
                raise ConfigError(f"{key}: the sweep's candidate {layer_name!r} is also declared; rename one")
            out[layer_name] = {**{k: v for k, v in decl.items() if k not in ("hidden_layers", "hidden_layer")},
                               "hidden_layer": layer}
    return out
