"""TorchExtractor: a user's ``torch.nn.Module`` with a collate function and an output function.

``collate(rows) -> batch`` turns a list of input rows (texts, image paths / PIL images, or numeric rows) into
what the module takes (default: a float32 tensor stacked from numeric rows); ``output(module_output, batch) ->
tensor`` picks the embedding (default: the module output itself). With ``image_transform`` the rows are
image paths (or PIL images) decoded to RGB, passed through it (in DataLoader workers when ``num_workers > 0``),
and the transformed images collated.

Identity: a module built from config (``factory`` import path + ``params``, optional ``weights`` file) is pinned by
its declaration and the weights' SHA-256; a live module is pinned only by an explicit ``cache_identity``.
Without one its embeddings are never cached or reused (``reusable`` False, with a warning), since nothing
says which weights produced them.
"""

from __future__ import annotations

import uuid
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from vertebrae.core.callables import callable_path
from vertebrae.core.errors import ConfigError, ValidationError, VertebraeWarning
from vertebrae.core.fingerprint import to_json_value
from vertebrae.extractors.base import Extractor
from vertebrae.extractors.torch_runtime import ModelExtractor, file_sha256, model_options

MODALITIES = ("features", "text", "image")


def default_collate(rows: list[Any]) -> Any:
    """Numeric rows (or image tensors) stacked into one float32 tensor."""
    import numpy as np
    import torch

    if isinstance(rows, np.ndarray):
        return torch.from_numpy(np.ascontiguousarray(rows, dtype=np.float32))
    if len(rows) and isinstance(rows[0], torch.Tensor):
        return torch.stack(rows).float()
    return torch.as_tensor(np.asarray(rows, dtype=np.float32))


def default_output(output: Any, batch: Any) -> Any:
    return output


class TorchExtractor(ModelExtractor, Extractor):
    """Embeddings ``output(module(collate(rows)), batch)`` in batches, under eval mode and inference_mode."""

    def __init__(self, name: str, module: Any, *, collate: Callable[[list[Any]], Any] | None = None,
                 output: Callable[[Any, Any], Any] | None = None, modality: str = "features",
                 image_transform: Callable[[Any], Any] | None = None, cache_identity: Any = None,
                 device: str = "auto", dtype: str | None = None, batch_size: int = 32, num_workers: int = 0,
                 progress: bool = False, where: str | None = None) -> None:
        where = where or f"extractor {name!r}"
        if modality not in MODALITIES:
            raise ConfigError(f"{where}.modality: must be one of {MODALITIES}, got {modality!r}")
        if image_transform is not None and modality != "image":
            raise ConfigError(f"{where}.image_transform: only for modality 'image'")
        for role, fn in (("module", module), ("collate", collate), ("output", output), ("image_transform", image_transform)):
            if fn is not None and not callable(fn):
                raise ValidationError(f"extractor {name!r}: {role} must be callable, got {type(fn).__name__}")
        self.name, self.modality = name, modality
        self.module = module
        self.collate_fn = collate or default_collate
        self.output_fn = output or default_output
        self.image_transform = image_transform
        self.branch_modality = {None: modality}
        self._declaration: dict[str, Any] | None = None
        if cache_identity is not None:
            self._identity: dict[str, Any] = {"cache_identity": to_json_value(cache_identity, "cache_identity")}
        else:
            warnings.warn(f"extractor {name!r}: a live torch module without cache_identity; its embeddings will not be "
                          "cached or reused", VertebraeWarning, stacklevel=2)
            self._identity = {"unsafe_session": uuid.uuid4().hex}
        self._reusable = cache_identity is not None
        self._init_runtime(device=device, dtype=dtype, batch_size=batch_size, num_workers=num_workers,
                           progress=progress, where=where)

    @classmethod
    def from_factory(cls, name: str, factory: str, *, params: Mapping[str, Any] | None = None,
                     weights: str | None = None, collate: str | None = None, output: str | None = None,
                     image_transform: str | None = None, base_dir: str | Path = ".", where: str | None = None,
                     **kwargs: Any) -> TorchExtractor:
        """A module built by the importable ``factory(**params)`` (weights loaded lazily from a safetensors or
        torch state-dict file); collate / output / image_transform are importable ``module:function`` paths."""
        from vertebrae.core.callables import import_object

        where = where or f"extractor {name!r}"
        params = dict(params or {})
        functions = {}
        for key, path in (("factory", factory), ("collate", collate), ("output", output), ("image_transform", image_transform)):
            if path is not None:
                if not isinstance(path, str):
                    raise ConfigError(f"{where}.{key}: must be an import path 'module:function', got {path!r}")
                functions[key] = import_object(path, where=f"{where}.{key}")
        declaration: dict[str, Any] = {"factory": factory, "params": to_json_value(params, "params"),
                                       "collate": collate, "output": output, "image_transform": image_transform}
        weights_path = None
        if weights is not None:
            weights_path = Path(weights) if Path(weights).is_absolute() else Path(base_dir) / weights
            if not weights_path.is_file():
                raise ConfigError(f"{where}.weights: file not found: {weights_path}")
            declaration["weights_sha256"] = file_sha256(weights_path)
        extractor = cls(name, None, collate=functions.get("collate"), output=functions.get("output"),
                        image_transform=functions.get("image_transform"), cache_identity="declared", where=where, **kwargs)
        extractor._identity = {"declaration": declaration}
        extractor._factory = (functions["factory"], params, weights_path, where)
        return extractor

    @property
    def reusable(self) -> bool:
        return self._reusable

    def recipe(self) -> dict[str, Any]:
        paths = {role: callable_path(fn) for role, fn in (("collate", self.collate_fn), ("output", self.output_fn))}
        return {"type": "torch", "modality": self.modality, **self._identity, "functions": paths, **self.runtime_recipe()}

    def _load(self) -> Any:
        module = self.module
        if module is None:
            if not hasattr(self, "_factory"):
                raise ValidationError(f"extractor {self.name!r}: no module (pass one, or use TorchExtractor.from_factory)")
            factory, params, weights, where = self._factory
            try:
                module = factory(**params)
            except TypeError as exc:
                raise ConfigError(f"{where}.params: {exc}") from None
            if weights is not None:
                module.load_state_dict(_state_dict(weights, where))
        return SimpleNamespace(module=module.to(self.torch_device()))

    def _image_transform(self, branch: str | None) -> Any:
        return self.image_transform

    def transform(self, inputs: Any, *, branch: str | None = None) -> Any:
        if self.modality == "features":
            return self._transform_features(inputs)
        return super().transform(inputs, branch=branch)

    def _transform_features(self, inputs: Any) -> Any:
        import numpy as np

        from vertebrae.extractors.torch_runtime import batches, host_rows, inference

        rows = inputs.toarray() if hasattr(inputs, "toarray") else np.asarray(inputs)
        module, device, output = self.loaded().module, self.torch_device(), self.output_fn
        move = device.type != "cpu"  # a cpu tensor's .to("cpu") is itself: skip the call per batch
        outs = []
        with inference(module, device, self.dtype):
            for batch in batches(rows, batch_size=self.batch_size, collate=self.collate_fn, progress=self.progress,
                                 desc=self.name):
                if move and hasattr(batch, "to"):
                    batch = batch.to(device)
                outs.append(host_rows(output(module(batch), batch)))
        return np.concatenate(outs, axis=0)

    def _collate(self, branch: str | None, items: list[Any]) -> Any:
        return self.collate_fn(items)

    def _forward(self, branch: str | None, batch: Any) -> Any:
        device = self.torch_device()
        moved = batch.to(device) if hasattr(batch, "to") else batch
        return self.output_fn(self.loaded().module(moved), moved)


def _state_dict(path: Path, where: str) -> Any:
    """The tensors of a weights file; one that cannot be read (truncated, corrupt, not a checkpoint) is refused
    naming the key and the file."""
    import pickle

    try:
        if path.suffix == ".safetensors":
            from safetensors import SafetensorError
            from safetensors.torch import load_file

            try:
                return load_file(str(path))
            except SafetensorError as exc:
                raise ValueError(str(exc)) from None
        import torch

        return torch.load(path, map_location="cpu", weights_only=True)
    except (RuntimeError, OSError, EOFError, ValueError, pickle.UnpicklingError) as exc:
        raise ConfigError(f"{where}.weights: {path} is not a readable weights file (truncated or corrupt?): "
                          f"{exc}") from None


def from_decl(name: str, decl: Mapping[str, Any], where: str) -> TorchExtractor:
    """``{type: torch, factory: "pkg.mod:build", params: {...}, weights: path, collate:, output:, image_transform:,
    modality:, device:, dtype:, batch_size:, num_workers:}``."""
    from vertebrae.extractors.model_names import require

    require("torch", where)
    opts = model_options(decl, where=where)
    if not isinstance(opts.get("factory"), str):
        raise ConfigError(f"{where}.factory: an import path 'module:function' building the module is required")
    try:
        return TorchExtractor.from_factory(name, opts.pop("factory"), where=where, **opts)
    except TypeError as exc:
        raise ConfigError(f"{where}: {exc}") from None
