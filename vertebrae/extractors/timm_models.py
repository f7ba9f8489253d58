"""TimmExtractor: image embeddings from a timm model (timm and torch are imported on first use only).

The model is named by ``model`` (a timm name, optionally with its pretrained tag, e.g.
``vit_small_patch14_dinov2.lvd142m``) with ``pretrained: true`` (weights from the hub, downloaded by timm only
because the user named them; ``HF_HUB_OFFLINE=1`` is honoured), or its weights come from ``checkpoint``: a local
file (``.safetensors`` or a torch state dict, loaded strictly into ``model`` built with ``model_args``) or a
folder saved by ``timm.models.save_for_hf`` (``config.json`` + weights; ``model`` then defaults to the folder's
architecture). ``pretrained: false`` without a checkpoint would be random weights and is refused.

Preprocessing is the model's own: ``timm.data.resolve_model_data_config`` + ``create_transform`` in eval mode;
``preprocess`` overrides its keys (input_size, interpolation, mean, std, crop_pct, crop_mode).
``pooling``: ``pre_logits`` (default: ``forward_head(forward_features(x), pre_logits=True)``, the features the
classifier sees), ``tokens_mean`` (mean of the patch tokens / spatial positions, prefix tokens left out) or
``cls`` (the first prefix token of a ViT). ``hidden_layer`` takes one layer in vertebrae's numbering
(``vertebrae.extractors.layers``: 0 = the input of the first block, i = the output of block i, -1 =
``forward_features``, after the final norm; a block is an entry of the model's ``feature_info``: a ViT's blocks, a
CNN's stem and stages as timm lists them), pooled with tokens_mean (the default) or cls. The layers are read by
hooks on one ``forward_features`` pass, stopped after the deepest block asked for unless -1 is asked.

Everything is checked when the extractor is built (at plan time), on the model built on torch's meta device (no
memory, no weights): an unknown name (the closest names are suggested), a checkpoint whose tensors do not fit the
architecture, a layer beyond the model's depth, cls on a model without prefix tokens. What the meta model tells
(architecture, data config, depth, prefix tokens, the weights fit) is decided by the declaration, the checkpoint's
bytes and the timm / torch / safetensors versions; inside ``vertebrae.core.check_records.remembered_in`` (the
workflow's planning and its plan jobs) it is recorded once and recalled after, so a process that plans a timm
candidate imports neither timm nor torch (4-6 s a process). A hub name (``hf-hub:``) is never recalled: the hub
decides its config.

Recipe: model name and model_args, the weights (SHA-256 of the checkpoint's files, or the hub id and revision
of a pretrained model), the resolved data config, pooling, hidden layer, normalisation and the timm version.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from vertebrae.core import check_records
from vertebrae.core.errors import ConfigError, ValidationError
from vertebrae.core.fingerprint import to_json_value
from vertebrae.extractors.base import Extractor
from vertebrae.extractors.checkpoints import misfit as checkpoint_misfit
from vertebrae.extractors.layers import NUMBERING, check_layer_range, hidden_state_index
from vertebrae.extractors.model_names import require
from vertebrae.extractors.torch_runtime import ModelExtractor, file_sha256, folder_digest, model_options

POOLING = ("pre_logits", "tokens_mean", "cls")
#: The final features pooled in the model's own layout (a Swin's NHWC map by its spatial mean; before, its last two
#: axes were averaged, width and channels): recipes pooled with tokens_mean / cls carry it, so their embeddings rerun.
FINAL_POOLING = "vertebrae.timm_final_pooling/v2"
DATA_KEYS = ("input_size", "interpolation", "mean", "std", "crop_pct", "crop_mode")
_META_CHECK = "timm-meta-model"  # check_records: what the meta model of a declaration told
_DECIDING = ("timm", "torch", "safetensors")  # the packages whose versions decide it
_FOUND = {"architecture", "hf_hub_id", "data_config", "depth", "prefix_tokens", "intermediates"}


def _unknown_name(name: str, where: str) -> ConfigError:
    import timm

    arch = name.partition(".")[0]
    close = difflib.get_close_matches(arch, timm.list_models(), n=5, cutoff=0.6)
    hint = f"; closest timm names: {', '.join(close)}" if close else ""
    return ConfigError(f"{where}.model: {name!r} is not a timm model (timm {timm.__version__}){hint}")


def _checkpoint_shapes(path: Path, where: str) -> dict[str, tuple[int, ...]]:
    """{tensor name: shape} of a weights file, read without loading a safetensors file's data; a file that cannot be
    read (truncated, corrupt, not a checkpoint) is refused naming the key and the file."""
    import pickle

    from safetensors import SafetensorError

    try:
        if path.suffix == ".safetensors":
            from safetensors import safe_open

            with safe_open(str(path), framework="pt") as handle:
                return {key: tuple(handle.get_slice(key).get_shape()) for key in handle.keys()}
        from timm.models import load_state_dict

        return {key: tuple(value.shape) for key, value in load_state_dict(str(path)).items() if hasattr(value, "shape")}
    except (SafetensorError, RuntimeError, OSError, EOFError, ValueError, pickle.UnpicklingError) as exc:
        raise ConfigError(f"{where}.checkpoint: {path} is not a readable weights file (truncated or corrupt?): "
                          f"{exc}") from None


class TimmExtractor(ModelExtractor, Extractor):
    """Image embeddings of a timm model: pre-logits features, mean of tokens, CLS, or a hidden layer."""

    kind = "timm"
    branch_modality = {None: "image"}

    def __init__(self, name: str, model: str | None = None, *, pretrained: bool = False,
                 checkpoint: str | Path | None = None, model_args: Mapping[str, Any] | None = None,
                 revision: str | None = None, pooling: str | None = None, hidden_layer: int | None = None,
                 preprocess: Mapping[str, Any] | None = None, normalize: bool = False, device: str = "auto",
                 dtype: str | None = None, batch_size: int = 32, num_workers: int = 0, progress: bool = False,
                 where: str | None = None) -> None:
        where = where or f"extractor {name!r}"
        self.name, self._where = name, where
        require("timm", where)  # timm, torch and safetensors installed, else the pip command that brings them
        if not isinstance(pretrained, bool):
            raise ConfigError(f"{where}.pretrained: must be true or false, got {pretrained!r}")
        if pretrained and checkpoint is not None:
            raise ConfigError(f"{where}: declare pretrained: true (hub weights) or checkpoint (local weights), not both")
        if not pretrained and checkpoint is None:
            raise ConfigError(f"{where}: pretrained: false without a checkpoint would embed with random weights; "
                              "declare pretrained: true or checkpoint: a local weights file or folder")
        if hidden_layer is not None and (isinstance(hidden_layer, bool) or not isinstance(hidden_layer, int)):
            raise ConfigError(f"{where}.hidden_layer: must be an integer or null, got {hidden_layer!r}")
        pooling = pooling if pooling is not None else ("pre_logits" if hidden_layer is None else "tokens_mean")
        if pooling not in POOLING:
            raise ConfigError(f"{where}.pooling: must be one of {POOLING}, got {pooling!r}")
        if pooling == "pre_logits" and hidden_layer is not None:
            raise ConfigError(f"{where}.pooling: pre_logits is the final head's input; a hidden_layer is pooled "
                              "with tokens_mean or cls")
        preprocess = dict(preprocess or {})
        unknown = sorted(set(preprocess) - set(DATA_KEYS))
        if unknown:
            raise ConfigError(f"{where}.preprocess.{unknown[0]}: not a timm data config key; known: {DATA_KEYS}")
        self.model_args = dict(model_args or {})
        self.pooling, self.hidden_layer, self.normalize = pooling, hidden_layer, bool(normalize)
        self.pretrained, self.revision = pretrained, revision
        self._checkpoint: Path | None = None
        self._folder = False
        if checkpoint is not None:
            path = Path(checkpoint)
            if not path.exists():
                raise ConfigError(f"{where}.checkpoint: not found: {path}")
            self._checkpoint, self._folder = path, path.is_dir()
            if self._folder and not (path / "config.json").is_file():
                raise ConfigError(f"{where}.checkpoint: the folder {path} holds no config.json (a folder saved by "
                                  "timm.models.save_for_hf or downloaded from the hub); name a weights file instead")
        if model is None and not self._folder:
            raise ConfigError(f"{where}.model: a timm model name is required (e.g. vit_small_patch14_dinov2.lvd142m)")
        if model is not None and not isinstance(model, str):
            raise ConfigError(f"{where}.model: must be a timm model name, got {model!r}")
        self.model = model
        self._init_runtime(device=device, dtype=dtype, batch_size=batch_size, num_workers=num_workers,
                           progress=progress, where=where)
        self._check(preprocess)

    # -- plan-time checks on the meta-device model
    def _create_kwargs(self) -> tuple[str, dict[str, Any]]:
        """(the name create_model takes, its keywords but ``pretrained``)."""
        kwargs: dict[str, Any] = dict(self.model_args)
        if self._folder:
            return f"local-dir:{self._checkpoint}", kwargs
        hub_id = getattr(self, "_hf_hub_id", None)
        if self.pretrained and self.revision is not None and hub_id:
            kwargs["pretrained_cfg_overlay"] = {"hf_hub_id": f"{hub_id}@{self.revision}"}
        return self.model, kwargs  # type: ignore[return-value]

    def _model_file(self) -> Path:
        for name in ("model.safetensors", "pytorch_model.bin"):
            if (self._checkpoint / name).is_file():  # type: ignore[operator]
                return self._checkpoint / name  # type: ignore[operator]
        raise ConfigError(f"{self._where}.checkpoint: the folder {self._checkpoint} holds no model.safetensors or "
                          "pytorch_model.bin")

    def _check(self, preprocess: Mapping[str, Any]) -> None:
        where = self._where
        if self._checkpoint is None:
            weights: dict[str, Any] | None = None
        else:
            weights = ({"files": folder_digest(self._checkpoint)} if self._folder else
                       {"sha256": file_sha256(self._checkpoint)})
        declared = None if self.model is not None and self.model.startswith("hf-hub:") else {
            "model": self.model, "pretrained": self.pretrained, "revision": self.revision, "folder": self._folder,
            "weights": weights, "model_args": to_json_value(self.model_args, "model_args"),
            "preprocess": to_json_value(dict(preprocess), "preprocess")}
        found = check_records.recalled(_META_CHECK, declared, _DECIDING) if declared is not None else None
        if not _well_formed(found):
            found = self._meta_model_check(preprocess)
            if declared is not None:
                check_records.remember(_META_CHECK, declared, _DECIDING, found)
        self.architecture, self._hf_hub_id = found["architecture"], found["hf_hub_id"]
        self.data_config = {k: tuple(v) if isinstance(v, list) else v for k, v in found["data_config"].items()}
        self.depth, self.prefix_tokens = found["depth"], found["prefix_tokens"]
        self._intermediates = found["intermediates"]
        if self._folder and self.model is not None and self.model.partition(".")[0] != self.architecture:
            raise ConfigError(f"{where}.model: {self.model!r}, but the checkpoint folder {self._checkpoint} holds "
                              f"a {self.architecture!r} (its config.json); leave model out or name that")
        if self.pooling == "cls" and self.prefix_tokens < 1:
            raise ConfigError(f"{where}.pooling: cls needs a model with a class token; {self.architecture} has none "
                              "(use pre_logits or tokens_mean)")
        if self.hidden_layer is not None:
            self.check_layers([self.hidden_layer], key="hidden_layer")
        self._weights: dict[str, Any] = weights if weights is not None else {
            "hub": self.model, "hf_hub_id": self._hf_hub_id, "revision": self.revision or "main"}

    def _meta_model_check(self, preprocess: Mapping[str, Any]) -> dict[str, Any]:
        """What the model built on the meta device tells (JSON values, the keys of ``_FOUND``); ConfigError for an
        unknown name, a model timm cannot build, or a checkpoint whose tensors do not fit it."""
        import timm
        from timm.data import resolve_model_data_config

        where = self._where
        if self.model is not None and not self.model.startswith("hf-hub:") and not timm.is_model(self.model):
            raise _unknown_name(self.model, where)
        name, kwargs = self._create_kwargs()
        try:
            with _meta():
                meta = timm.create_model(name, pretrained=False, **kwargs)
        except (RuntimeError, TypeError, ValueError, FileNotFoundError) as exc:
            if "Unknown model" in str(exc):
                raise _unknown_name(str(self.model), where) from None
            raise ConfigError(f"{where}: timm cannot build {name!r} with model_args {self.model_args}: {exc}") from None
        architecture = meta.pretrained_cfg.get("architecture") or type(meta).__name__
        data = dict(resolve_model_data_config(meta))
        for key, value in preprocess.items():
            data[key] = tuple(value) if isinstance(value, list) else value
        depth = len(getattr(meta, "feature_info", []) or [])
        if self._checkpoint is not None:
            file = self._model_file() if self._folder else self._checkpoint
            shapes = _checkpoint_shapes(file, where)
            misfit = checkpoint_misfit({k: tuple(v.shape) for k, v in meta.state_dict().items()}, shapes, "model")
            if misfit:
                raise ConfigError(f"{where}.checkpoint: {file} does not fit {architecture}: {misfit}")
        return {"architecture": architecture, "hf_hub_id": meta.pretrained_cfg.get("hf_hub_id"),
                "data_config": to_json_value(data, "data_config"), "depth": depth,
                "prefix_tokens": int(getattr(meta, "num_prefix_tokens", 0) or 0),
                "intermediates": hasattr(meta, "forward_intermediates") and bool(depth)}

    def check_layers(self, layers: Sequence[int], *, key: str = "hidden_layers") -> None:
        """Layers in vertebrae's numbering (``vertebrae.extractors.layers``), within the model's depth: -depth..depth,
        a block being an entry of its ``feature_info`` (checked on the meta device when the extractor is built, so
        at plan time)."""
        where = f"{self._where}.{key}"
        if not self._intermediates:
            raise ConfigError(f"{where}: {self.architecture} has no timm intermediate-feature API")
        if self.pooling == "pre_logits":
            raise ConfigError(f"{where}: pooling pre_logits is the final head's input; a hidden layer is pooled with "
                              "tokens_mean or cls")
        check_layer_range(layers, self.depth, where=where, model=self.architecture)

    # -- the contract
    def weight_files(self) -> list[Path] | None:
        return [self._checkpoint] if self._checkpoint is not None else None

    def recipe(self) -> dict[str, Any]:
        from importlib.metadata import version

        return {"type": "timm", "model": self.model if self.model is not None else self.architecture,
                "model_args": to_json_value(self.model_args, "model_args"), "weights": self._weights,
                "data_config": to_json_value(self.data_config, "data_config"), "pooling": self.pooling,
                "hidden_layer": self.hidden_layer, "normalize": self.normalize, "timm_version": version("timm"),
                **({"layer_numbering": NUMBERING} if self.hidden_layer is not None else {}),
                **({"final_pooling": FINAL_POOLING} if self.hidden_layer is None and self.pooling != "pre_logits"
                   else {}), **self.runtime_recipe()}

    def _load(self) -> Any:
        import timm
        from timm.data import create_transform

        name, kwargs = self._create_kwargs()
        if self._checkpoint is not None and not self._folder:
            module = timm.create_model(name, pretrained=False, checkpoint_path=str(self._checkpoint), **kwargs)
        else:
            module = timm.create_model(name, pretrained=True, **kwargs)
        module = module.to(self.torch_device()).eval()
        return SimpleNamespace(module=module, transform=create_transform(**self.data_config, is_training=False))

    def _image_transform(self, branch: str | None) -> Any:
        return self.loaded().transform

    def _collate(self, branch: str | None, items: list[Any]) -> Any:
        import torch

        return torch.stack(items)

    def _forward(self, branch: str | None, batch: Any) -> Any:
        if self.hidden_layer is not None:
            return self._forward_layers(branch, batch, [self.hidden_layer])[0]
        module = self.loaded().module
        features = module.forward_features(batch.to(self.torch_device()))
        if self.pooling == "pre_logits":
            return self._finish(module.forward_head(features, pre_logits=True))
        return self._finish(self._pool_final(features))

    def _pool_final(self, features: Any) -> Any:
        """``forward_features``' output pooled as a block's (``_pool_block``): a CNN's feature map by its spatial
        mean in the model's layout (NHWC for Swin and kin), tokens by cls or their mean."""
        return self._pool_block(features)

    def _pool_block(self, hidden: Any) -> Any:
        """A block's input or output pooled: tokens (B, N, D) by cls or the mean of the non-prefix tokens; a map by
        its spatial mean, in the layout the model's stages use (``output_fmt``: NHWC for Swin and kin)."""
        if isinstance(hidden, (tuple, list)):
            hidden = hidden[0]
        if hidden.dim() == 4:
            nhwc = str(getattr(self.loaded().module, "output_fmt", "NCHW")).endswith("NHWC")
            return hidden.mean(dim=(1, 2) if nhwc else (2, 3))
        if self.pooling == "cls":
            return hidden[:, 0]
        return hidden[:, self.prefix_tokens:].mean(dim=1)

    def _forward_layers(self, branch: str | None, batch: Any, layers: list[int]) -> list[Any]:
        """The pooled layers of ``layers`` (vertebrae's numbering) from ONE ``forward_features`` pass: hooks read the
        input of the first block (layer 0) and the output of each block asked for; -1 is ``forward_features``
        itself. Without -1 the pass stops after the deepest block asked for."""
        module = self.loaded().module
        blocks = [hidden_state_index(layer, self.depth) for layer in layers]
        wanted = sorted({b for b in blocks if b is not None})
        final = None in blocks
        deepest = wanted[-1] if wanted and not final else None
        names = [info["module"] for info in module.feature_info]
        modules = [module.get_submodule(name) for name in names]
        pooled: dict[int | None, Any] = {}

        def keep(index: int) -> Any:
            def hook(_module: Any, args: Any, output: Any = None) -> None:
                pooled[index] = self._pool_block(args[0] if index == 0 else output)  # pooled now: a later
                if index == deepest:                                                 # in-place op cannot change it
                    raise _Stop
            return hook

        handles = [modules[0].register_forward_pre_hook(keep(0))] if 0 in wanted else []
        handles += [modules[b - 1].register_forward_hook(keep(b)) for b in wanted if b > 0]
        try:
            features = module.forward_features(batch.to(self.torch_device()))
            if final:
                pooled[None] = self._pool_final(features)
        except _Stop:
            pass
        finally:
            for handle in handles:
                handle.remove()
        missed = [b for b in blocks if b not in pooled]
        if missed:  # a feature_info module forward_features never ran
            raise ValidationError(f"extractor {self.name!r}: {self.architecture}'s forward_features did not run "
                                  f"{names[max(missed[0], 1) - 1]!r} (feature_info), so layer "
                                  f"{layers[blocks.index(missed[0])]} cannot be read")
        return [self._finish(pooled[b]) for b in blocks]

    def _finish(self, features: Any) -> Any:
        if self.normalize:
            import torch

            features = torch.nn.functional.normalize(features.float(), dim=-1)
        return features


def _well_formed(found: Any) -> bool:
    """A recalled finding of ``_meta_model_check`` with every key, each of its type (else: check in full)."""
    return (isinstance(found, dict) and set(found) == _FOUND and isinstance(found["architecture"], str)
            and isinstance(found["hf_hub_id"], (str, type(None))) and isinstance(found["data_config"], dict)
            and all(isinstance(found[k], int) and not isinstance(found[k], bool) for k in ("depth", "prefix_tokens"))
            and isinstance(found["intermediates"], bool))


class _Stop(Exception):
    """Raised by the hook on the deepest block a layer read asks for: the rest of the pass is not needed."""


class _meta:
    """torch's meta device as the default while a model is built (no memory, no initialisation cost)."""

    def __enter__(self) -> None:
        import torch

        self._ctx = torch.device("meta")
        self._ctx.__enter__()

    def __exit__(self, *exc: Any) -> None:
        self._ctx.__exit__(*exc)


def from_decl(name: str, decl: Mapping[str, Any], where: str) -> TimmExtractor:
    """``{type: timm, model:, pretrained:, checkpoint:, model_args:, revision:, pooling:, hidden_layer:,
    preprocess:, normalize:, device:, dtype:, batch_size:, num_workers:}``."""
    opts = model_options(decl, where=where)
    try:
        return TimmExtractor(name, opts.pop("model", None), where=where, **opts)
    except TypeError as exc:
        raise ConfigError(f"{where}: {exc}") from None


__all__ = ["DATA_KEYS", "POOLING", "TimmExtractor", "from_decl"]
