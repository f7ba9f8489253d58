"""OnnxExtractor: embeddings from an ONNX model file run by onnxruntime (onnx / onnxruntime imported on first use).

``path`` names the ``.onnx`` file. Its graph is read when the extractor is built (at ``vertebrae validate`` / plan
time, with ``onnx.load(..., load_external_data=False)``; inside ``vertebrae.core.check_records.remembered_in`` the
finding is recorded per file digest, so later plan processes import nothing): its inputs, outputs and their
shapes, and the external data files its weights live in (beside the ``.onnx``, as ``onnx.save_model(...,
save_as_external_data=True)`` writes them). So these are refused before any job, naming the key and the value:
a file that is missing or not an ONNX model (truncated, corrupt), an external data file that is missing or lies
outside the model's folder, several inputs (or outputs) and no ``input_name`` (``output_name``), a name the graph
does not have, an output that is not 2-D after ``pooling``, and ``device: cuda`` where onnxruntime has no
CUDAExecutionProvider.

Rows by ``modality``:

- ``features``: numeric rows, fed as one ``(batch, dims)`` array to the model's input.
- ``image``: image paths (or PIL images) decoded to RGB and passed through ``image_transform`` (an importable
  ``module:function`` returning a CHW tensor or array, as for ``type: torch``), stacked into one batch.
- ``text``: texts tokenized by the local tokenizer folder ``tokenizer`` (transformers ``AutoTokenizer``, offline,
  padded per batch, truncated at ``max_length``); the model's inputs are fed by name from the tokenizer's output
  (``input_ids``, ``attention_mask``, ``token_type_ids``; zeros where a tokenizer gives no token types).

A 3-D output (rows x tokens x dims) is pooled: ``mean`` (over the attention mask for text; over every token
otherwise) or ``cls`` (the first token); ``normalize`` L2-normalises the rows. ``device``: ``cpu`` (default,
CPUExecutionProvider), ``cuda`` / ``cuda:N`` (CUDAExecutionProvider on that GPU, refused when onnxruntime lacks it),
or ``auto`` (CUDA when onnxruntime has it, else the CPU). The session's intra-op threads follow ``OMP_NUM_THREADS``
when it is set (Snakemake sets it from a rule's ``threads``; onnxruntime itself ignores it).

Recipe: the SHA-256 of the model file and of each external data file (by its name in the graph), the input /
output names, pooling, normalisation, modality, the image transform's import path or the tokenizer folder's file
digests and ``max_length``, and the onnxruntime and vertebrae versions. Never the path: moving the file keeps the
fingerprint, changing a byte of it changes it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from vertebrae.core import check_records
from vertebrae.core.errors import ConfigError, ValidationError
from vertebrae.extractors.base import Extractor

MODALITIES = ("features", "image", "text")
POOLING = ("mean", "cls")
TOKEN_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "spiece.model", "sentencepiece.bpe.model")
ORT_DISTRIBUTIONS = ("onnxruntime", "onnxruntime-gpu", "onnxruntime-directml", "onnxruntime-openvino",
                     "onnxruntime-silicon")
_GRAPH_CHECK = "onnx-graph"  # check_records: what the graph of a model file (by its digest) holds
_DECIDING = ("onnx",)
_FOUND = {"inputs", "outputs", "external"}


def ort_version() -> str | None:
    """The installed onnxruntime's version (whichever of its distributions provides it), read from package
    metadata so no import is needed; None when none is installed."""
    from importlib import metadata

    for dist in ORT_DISTRIBUTIONS:
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return None


def _require(where: str) -> None:
    from importlib.util import find_spec

    from vertebrae.extractors.model_names import EXTRA

    missing = [name for name, found in (("onnxruntime", ort_version() is not None and find_spec("onnxruntime")),
                                        ("onnx", find_spec("onnx"))) if not found]
    if missing:
        raise ConfigError(f"{where}: type onnx needs {', '.join(missing)}, not installed here; install the models "
                          f"extra: {EXTRA}")


def _digest(path: Path) -> str:
    """SHA-256 of a file through the run's digest cache (``OUT/.vertebrae/digests.json``) while a run is planned and
    its state folder exists here, else (a job: it reads no cache) computed in this process
    (``vertebrae.core.file_digests``)."""
    from vertebrae.core.file_digests import CACHE_FILE, FileDigests
    from vertebrae.core.out_folder import planning_out

    state = None if planning_out() is None else Path(planning_out()) / CACHE_FILE
    digests = FileDigests(state if state is not None and state.parent.is_dir() else None)
    digest = digests.digest(path)
    digests.save()
    return digest


def _dims(value_info: Any) -> list[int | str | None] | None:
    """A graph value's shape: ints for fixed dims, names for symbolic ones, None for unknown; None when its rank
    is unknown."""
    tensor = value_info.type.tensor_type
    if not tensor.HasField("shape"):
        return None
    return [d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in tensor.shape.dim]


def read_graph(path: Path, where: str) -> dict[str, Any]:
    """``{inputs: [{name, dtype, shape, optional}], outputs: [{name, dtype, shape}], external: [file names]}`` of
    an ONNX file, read without its external data; ConfigError naming ``where.path`` for a file that is no model."""
    import onnx
    from onnx import external_data_helper as external

    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception as exc:  # noqa: BLE001 - protobuf's DecodeError and whatever onnx raises on bad bytes
        raise ConfigError(f"{where}.path: {path} is not a readable ONNX model (truncated or corrupt?): "
                          f"{type(exc).__name__}: {exc}") from None
    if model.ir_version <= 0 or not model.graph.output:
        raise ConfigError(f"{where}.path: {path} is not an ONNX model (no IR version or no graph outputs; truncated "
                          "or not an .onnx file?)")

    def dtype(info: Any) -> str | None:
        elem = info.type.tensor_type.elem_type
        try:
            return str(onnx.helper.tensor_dtype_to_np_dtype(elem)) if elem else None
        except (KeyError, ValueError, TypeError):
            return onnx.TensorProto.DataType.Name(elem).lower()

    defaults = {init.name for init in model.graph.initializer}
    inputs = [{"name": i.name, "dtype": dtype(i), "shape": _dims(i), "optional": i.name in defaults}
              for i in model.graph.input]
    outputs = [{"name": o.name, "dtype": dtype(o), "shape": _dims(o)} for o in model.graph.output]
    files: list[str] = []
    for tensor in external._get_all_tensors(model):
        if external.uses_external_data(tensor):
            location = {entry.key: entry.value for entry in tensor.external_data}.get("location", "")
            if location not in files:
                files.append(location)
    return {"inputs": inputs, "outputs": outputs, "external": sorted(files)}


def _well_formed(found: Any) -> bool:
    return (isinstance(found, dict) and set(found) == _FOUND
            and all(isinstance(found[k], list) for k in _FOUND))


def _pick(names: list[str], given: str | None, key: str, what: str, path: Path) -> str:
    if given is not None:
        if not isinstance(given, str) or given not in names:
            raise ConfigError(f"{key}: {given!r} is not an {what} of {path}; its {what}s: {names}")
        return given
    if len(names) != 1:
        raise ConfigError(f"{key}: {path} has {len(names)} {what}s ({', '.join(map(repr, names))}); name the one to "
                          f"use with {key.rpartition('.')[2]}")
    return names[0]


class OnnxExtractor(Extractor):
    """Embeddings of an ONNX model run by onnxruntime, in batches of ``batch_size``, in input order."""

    kind = "onnx"

    def __init__(self, name: str, path: str | os.PathLike, *, modality: str | None = None,
                 input_name: str | None = None, output_name: str | None = None,
                 image_transform: str | Callable[[Any], Any] | None = None, tokenizer: str | os.PathLike | None = None,
                 max_length: int | None = 256, pooling: str | None = None, normalize: bool = False,
                 device: str = "cpu", batch_size: int = 32, num_workers: int = 0, progress: bool = False,
                 base_dir: str | os.PathLike = ".", where: str | None = None) -> None:
        where = where or f"extractor {name!r}"
        self.name, self._where = name, where
        _require(where)
        modality = self._modality(modality, image_transform, tokenizer)
        self.modality, self.branch_modality = modality, {None: modality}
        if pooling is not None and pooling not in POOLING:
            raise ConfigError(f"{where}.pooling: must be one of {POOLING} (for a 3-D output), got {pooling!r}")
        if not isinstance(normalize, bool):
            raise ConfigError(f"{where}.normalize: must be true or false, got {normalize!r}")
        for key, value, low in (("batch_size", batch_size, 1), ("num_workers", num_workers, 0)):
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ConfigError(f"{where}.{key}: must be an integer >= {low}, got {value!r}")
        if max_length is not None and (isinstance(max_length, bool) or not isinstance(max_length, int) or max_length < 1):
            raise ConfigError(f"{where}.max_length: must be a positive integer or null, got {max_length!r}")
        self.pooling, self.normalize, self.max_length = pooling, normalize, max_length
        self.batch_size, self.num_workers, self.progress = batch_size, num_workers, bool(progress)
        self.device = self._check_device(device)
        self.path = self._model_path(path, base_dir)
        self._sha256 = _digest(self.path)
        graph = self._graph()
        self._external = self._external_digests(graph["external"])
        self._check_io(graph, input_name, output_name)
        self.image_transform, self._transform_path = self._transform(image_transform)
        self.tokenizer_dir, self._tokenizer_files = self._tokenizer(tokenizer, base_dir)
        self._state: Any = None

    # -- checks when built (validate / plan time)
    def _modality(self, modality: str | None, image_transform: Any, tokenizer: Any) -> str:
        where = self._where
        if modality is None:
            modality = "text" if tokenizer is not None else "image" if image_transform is not None else "features"
        if modality not in MODALITIES:
            raise ConfigError(f"{where}.modality: must be one of {MODALITIES}, got {modality!r}")
        if modality == "text" and tokenizer is None:
            raise ConfigError(f"{where}.tokenizer: modality text needs a local tokenizer folder (save_pretrained output)")
        if modality == "image" and image_transform is None:
            raise ConfigError(f"{where}.image_transform: modality image needs an importable 'module:function' turning an "
                              "RGB PIL image into the model's input (a CHW tensor or array)")
        if tokenizer is not None and modality != "text":
            raise ConfigError(f"{where}.tokenizer: only for modality text, not {modality!r}")
        if image_transform is not None and modality != "image":
            raise ConfigError(f"{where}.image_transform: only for modality image, not {modality!r}")
        return modality

    def _check_device(self, device: Any) -> str:
        key = f"{self._where}.device"
        if not isinstance(device, str) or not (device in ("cpu", "auto", "cuda")
                                               or (device.startswith("cuda:") and device[5:].isdigit())):
            raise ConfigError(f"{key}: must be cpu, cuda, cuda:N or auto for type onnx, got {device!r}")
        if device.startswith("cuda"):
            import onnxruntime

            providers = onnxruntime.get_available_providers()
            if "CUDAExecutionProvider" not in providers:
                raise ConfigError(f"{key} is {device!r}, but this onnxruntime ({ort_version()}) has no "
                                  f"CUDAExecutionProvider (it has {', '.join(providers)}): install onnxruntime-gpu "
                                  f"where an NVIDIA GPU is, or set {key} to 'cpu' or 'auto'")
        return device

    def _model_path(self, path: Any, base_dir: Any) -> Path:
        key = f"{self._where}.path"
        if not isinstance(path, (str, os.PathLike)) or not os.fspath(path):
            raise ConfigError(f"{key}: an .onnx model file is required, got {path!r}")
        full = Path(path) if Path(path).is_absolute() else Path(base_dir) / path
        if full.is_dir():
            raise ConfigError(f"{key}: {full} is a folder; name the .onnx file in it")
        if not full.is_file():
            raise ConfigError(f"{key}: file not found: {full}")
        return full

    def _graph(self) -> dict[str, Any]:
        declared = {"sha256": self._sha256}
        found = check_records.recalled(_GRAPH_CHECK, declared, _DECIDING)
        if not _well_formed(found):
            found = read_graph(self.path, self._where)
            check_records.remember(_GRAPH_CHECK, declared, _DECIDING, found)
        return found

    def _external_digests(self, files: list[str]) -> dict[str, str]:
        """``{location: sha256}`` of the external data files the graph names, each inside the model's folder."""
        key, folder, out = f"{self._where}.path", self.path.parent.resolve(), {}
        for location in files:
            full = (folder / location).resolve()
            if not location or Path(location).is_absolute() or not full.is_relative_to(folder):
                raise ConfigError(f"{key}: {self.path} names external data {location!r} outside its folder; "
                                  "onnxruntime reads external data only beside the model")
            if not full.is_file():
                raise ConfigError(f"{key}: {self.path} keeps weights in the external data file {location!r}, not "
                                  f"found beside it ({full}); copy it next to the .onnx file")
            out[location] = _digest(full)
        return out

    def _check_io(self, graph: Mapping[str, Any], input_name: str | None, output_name: str | None) -> None:
        where, path = self._where, self.path
        inputs = {i["name"]: i for i in graph["inputs"]}
        required = [i["name"] for i in graph["inputs"] if not i["optional"]]
        if self.modality == "text":
            if input_name is not None:
                raise ConfigError(f"{where}.input_name: a text model's inputs are fed by name from the tokenizer "
                                  f"({', '.join(TOKEN_INPUTS)}); leave input_name out")
            unknown = [n for n in required if n not in TOKEN_INPUTS]
            if "input_ids" not in inputs or unknown:
                raise ConfigError(f"{where}.path: {path} takes inputs {list(inputs)}; a text model is fed "
                                  f"{', '.join(TOKEN_INPUTS)} by name (input_ids required), so "
                                  f"{unknown or ['input_ids']} cannot be fed")
            self.input_names = [n for n in inputs if n in TOKEN_INPUTS]
        else:
            chosen = _pick(required or list(inputs), input_name, f"{where}.input_name", "input", path)
            unfed = [n for n in required if n != chosen]
            if unfed:
                raise ConfigError(f"{where}.input_name: {path} also needs input(s) {unfed}, which {self.modality} rows "
                                  f"cannot feed; type onnx feeds one input ({chosen!r})")
            self.input_names = [chosen]
        self.input_dtypes = {n: inputs[n]["dtype"] for n in self.input_names}
        output = _pick([o["name"] for o in graph["outputs"]], output_name, f"{where}.output_name", "output", path)
        self.input_name = self.input_names[0] if self.modality != "text" else None
        self.output_name = output
        shape = next(o["shape"] for o in graph["outputs"] if o["name"] == output)
        self.output_shape = shape
        if shape is not None:
            self._check_rank(len(shape), shape)

    def _check_rank(self, rank: int, shape: Any) -> None:
        where, output = self._where, self.output_name
        if rank == 2 and self.pooling is not None:
            raise ConfigError(f"{where}.pooling: output {output!r} of {self.path} is already 2-D (shape {shape}); "
                              "leave pooling out")
        if rank == 3 and self.pooling is None:
            raise ConfigError(f"{where}.pooling: output {output!r} of {self.path} is 3-D (shape {shape}: rows x "
                              f"tokens x dims); declare pooling: {' or '.join(POOLING)} to make it 2-D")
        if rank not in (2, 3):
            raise ConfigError(f"{where}.output_name: output {output!r} of {self.path} has shape {shape} ({rank}-D), "
                              "not 2-D (rows x dims) after pooling, which takes a 3-D output (rows x tokens x dims) "
                              "to 2-D; name another output")

    def _transform(self, image_transform: Any) -> tuple[Callable[[Any], Any] | None, str | None]:
        if image_transform is None:
            return None, None
        from vertebrae.core.callables import callable_path, import_object

        key = f"{self._where}.image_transform"
        if isinstance(image_transform, str):
            return import_object(image_transform, where=key), image_transform
        path = callable_path(image_transform) if callable(image_transform) else None
        if path is None:
            raise ConfigError(f"{key}: must be an importable top-level function or a 'module:function' path (it is "
                              f"part of the recipe), got {image_transform!r}")
        return image_transform, path

    def _tokenizer(self, tokenizer: Any, base_dir: Any) -> tuple[Path | None, dict[str, str] | None]:
        if tokenizer is None:
            return None, None
        from vertebrae.extractors.torch_runtime import model_files

        key = f"{self._where}.tokenizer"
        if not isinstance(tokenizer, (str, os.PathLike)):
            raise ConfigError(f"{key}: must be a local tokenizer folder, got {tokenizer!r}")
        folder = Path(tokenizer) if Path(tokenizer).is_absolute() else Path(base_dir) / tokenizer
        if not folder.is_dir():
            raise ConfigError(f"{key}: folder not found: {folder}")
        if not any((folder / name).is_file() for name in TOKENIZER_FILES):
            raise ConfigError(f"{key}: the folder {folder} holds no tokenizer ({', '.join(TOKENIZER_FILES)}); name a "
                              "folder written by a tokenizer's save_pretrained")
        return folder, {p.relative_to(folder).as_posix(): _digest(p) for p in model_files(folder)}

    # -- the contract
    def weight_files(self) -> list[Path]:
        return [self.path, *(self.path.parent / name for name in self._external)]

    def recipe(self) -> dict[str, Any]:
        from vertebrae.extractors.torch_runtime import vertebrae_version

        return {"type": "onnx", "modality": self.modality,
                "model": {"sha256": self._sha256, "external_data": dict(sorted(self._external.items()))},
                "inputs": list(self.input_names), "output_name": self.output_name, "pooling": self.pooling,
                "normalize": self.normalize, "image_transform": self._transform_path,
                "tokenizer": None if self._tokenizer_files is None else {"files": self._tokenizer_files},
                "max_length": self.max_length if self.modality == "text" else None,
                "onnxruntime_version": ort_version(), "vertebrae_version": vertebrae_version()}

    def check_branch(self, branch: str | None) -> None:
        if branch is not None and branch not in self.branch_modality:
            raise ValidationError(f"extractor {self.name!r} has no branches, got {branch!r}")

    def providers(self) -> list[Any]:
        """The onnxruntime execution providers ``device`` asks for (``auto``: CUDA when onnxruntime has it)."""
        import onnxruntime

        cuda = "CUDAExecutionProvider" in onnxruntime.get_available_providers()
        if self.device == "cpu" or (self.device == "auto" and not cuda):
            return ["CPUExecutionProvider"]
        index = int(self.device.partition(":")[2] or 0)
        return [("CUDAExecutionProvider", {"device_id": index}), "CPUExecutionProvider"]

    def session(self) -> Any:
        """The onnxruntime InferenceSession (made on first use; the tokenizer with it)."""
        if self._state is None:
            import onnxruntime

            options = onnxruntime.SessionOptions()
            threads = os.environ.get("OMP_NUM_THREADS", "")
            if threads.isdigit() and int(threads) > 0:  # a workflow job's threads (onnxruntime ignores the variable)
                options.intra_op_num_threads = int(threads)
            try:
                session = onnxruntime.InferenceSession(str(self.path), sess_options=options, providers=self.providers())
            except Exception as exc:  # noqa: BLE001 - onnxruntime's own error types (Fail, InvalidGraph, ...)
                raise ValidationError(f"extractor {self.name!r}: onnxruntime cannot load {self.path}: {exc}") from None
            if self.device.startswith("cuda") and "CUDAExecutionProvider" not in session.get_providers():
                raise ConfigError(f"{self._where}.device is {self.device!r}, but onnxruntime could not start CUDA here "
                                  "(no GPU or CUDA libraries); set it to 'cpu' or 'auto'")
            tokenizer = None
            if self.tokenizer_dir is not None:
                from transformers import AutoTokenizer

                tokenizer = AutoTokenizer.from_pretrained(str(self.tokenizer_dir), local_files_only=True)
            self._state = (session, tokenizer)
        return self._state[0]

    def transform(self, inputs: Any, *, branch: str | None = None) -> Any:
        import numpy as np

        self.check_branch(branch)
        session = self.session()
        outs = [self._finish(session.run([self.output_name], feed)[0], mask) for feed, mask in self.feeds(inputs)]
        if not outs:
            raise ValidationError(f"extractor {self.name!r}: no rows to encode")
        return np.concatenate(outs, axis=0)

    def feeds(self, inputs: Any) -> Iterator[tuple[dict[str, Any], Any]]:
        """``(feed, attention mask or None)`` per batch of ``batch_size`` rows, in order: the arrays
        ``session.run`` takes, by input name, in the dtypes the graph declares."""
        import numpy as np

        from vertebrae.extractors.torch_runtime import _as_items, _ImageRows, batches

        if self.modality == "features":
            rows = inputs.toarray() if hasattr(inputs, "toarray") else np.asarray(inputs)
            if rows.ndim != 2 or not np.issubdtype(rows.dtype, np.number):
                raise ValidationError(f"extractor {self.name!r}: modality features takes a 2-D numeric array, got "
                                      f"{rows.dtype} of shape {list(rows.shape)}")
            for a in range(0, len(rows), self.batch_size):
                yield {self.input_names[0]: self._cast(self.input_names[0], rows[a:a + self.batch_size])}, None
            return
        items, ids = _as_items(inputs, self.modality, name=self.name, branch=None)
        if self.modality == "image":
            load, workers = _ImageRows(items, ids, self.image_transform), self.num_workers
            collate: Callable[[list[Any]], Any] = _stack
        else:
            load, workers, collate = None, 0, self._tokenize
        for batch in batches(items, batch_size=self.batch_size, collate=collate, load=load, num_workers=workers,
                             progress=self.progress, desc=self.name):
            if self.modality == "image":
                yield {self.input_names[0]: self._cast(self.input_names[0], batch)}, None
            else:
                yield batch

    def _tokenize(self, texts: list[str]) -> tuple[dict[str, Any], Any]:
        import numpy as np

        self.session()
        tokens = self._state[1](list(texts), padding=True, truncation=self.max_length is not None,
                                max_length=self.max_length, return_tensors="np")
        ids = np.asarray(tokens["input_ids"])
        absent = {"attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)}  # a tokenizer without
        feed = {name: self._cast(name, tokens[name] if name in tokens else absent.get(name, ids))  # them: no padding
                for name in self.input_names}
        mask = tokens["attention_mask"] if "attention_mask" in tokens else None
        return feed, mask

    def _cast(self, name: str, array: Any) -> Any:
        import numpy as np

        dtype = self.input_dtypes.get(name) or "float32"
        return np.ascontiguousarray(np.asarray(array), dtype=np.dtype(dtype))

    def _finish(self, output: Any, mask: Any) -> Any:
        """The model output as float32 rows: a 3-D output pooled, then optionally L2-normalised."""
        import numpy as np

        output = np.asarray(output)
        if output.ndim == 3 and self.pooling is not None:
            if self.pooling == "cls":
                output = output[:, 0]
            elif mask is not None:  # a text batch: the mean over the attended tokens
                weights = np.asarray(mask, dtype=np.float32)[:, :, None]
                output = (output * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
            else:
                output = output.mean(axis=1)
        if output.ndim != 2:
            raise ValidationError(f"extractor {self.name!r}: output {self.output_name!r} of {self.path} is "
                                  f"{output.ndim}-D (shape {list(output.shape)}) after pooling {self.pooling!r}, not "
                                  "rows x dims")
        output = output.astype(np.float32, copy=False)
        if self.normalize:
            output = output / np.clip(np.linalg.norm(output, axis=1, keepdims=True), 1e-12, None)
        return output


def _stack(items: list[Any]) -> Any:
    """Transformed images (tensors or arrays, one shape) as one batch array."""
    import numpy as np

    return np.stack([item.numpy() if hasattr(item, "numpy") else np.asarray(item) for item in items])


def from_decl(name: str, decl: Mapping[str, Any], where: str) -> OnnxExtractor:
    """``{type: onnx, path:, input_name:, output_name:, modality:, image_transform:, tokenizer:, max_length:,
    pooling:, normalize:, device:, batch_size:, num_workers:, progress:}``."""
    from vertebrae.extractors.torch_runtime import model_options

    opts = model_options(decl, where=where)
    if "path" not in opts:
        raise ConfigError(f"{where}.path: an .onnx model file is required")
    try:
        return OnnxExtractor(name, opts.pop("path"), where=where, **opts)
    except TypeError as exc:
        raise ConfigError(f"{where}: {exc}") from None


__all__ = ["MODALITIES", "POOLING", "OnnxExtractor", "from_decl", "ort_version", "read_graph"]
