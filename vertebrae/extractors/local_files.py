"""The local files a model extractor's declaration names: its weights, checkpoint, model folder or tokenizer.

An embedding job (and the plan job that checks its spec, which builds the extractor and hashes its weights) reads
them, so the workflow declares them as its inputs (``vertebrae.planning.job_files``): a job run where only its
declared inputs are (object storage, a node without the shared disk) gets them. ``local_model_files`` lists them as
the declaration spells them (relative to the working folder, or absolute), a folder as its files in the order the
extractors hash them (``torch_runtime.model_files``: hidden files and folders are no part of a model).

Not listed: what is not a local path of the declaration. A hub id (``model: org/name``, ``hf-hub:...``, an
open_clip tag) is read from the Hugging Face / open_clip cache, which is the environment's, as the Python packages
are; so is a ``model_path_from`` function's folder (code decides it, at run time). Imports nothing heavy.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from typing import Any

#: Per extractor type, the keys whose value may name a local file or folder (``local-dir:FOLDER`` for open_clip).
LOCAL_KEYS: dict[str, tuple[str, ...]] = {
    "open_clip": ("model", "pretrained"), "hf_text": ("model",), "hf_vision": ("model",), "hf_multimodal": ("model",),
    "sentence_transformers": ("model",), "timm": ("checkpoint",), "torch": ("weights",), "onnx": ("path", "tokenizer"),
}
LOCAL_DIR = "local-dir:"  # open_clip's prefix of a model folder (vertebrae.extractors.open_clip.LOCAL_DIR)


def _folder_files(folder: str) -> Iterator[str]:
    """The files of a model folder as ``torch_runtime.model_files`` walks them, spelled under ``folder``."""
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        rel = os.path.relpath(root, folder)
        for name in sorted(files):
            if not name.startswith("."):
                yield os.path.normpath(os.path.join(folder, rel, name))


def _onnx_external(path: str, base_dir: str) -> list[str]:
    """The external data files an ONNX model names (beside it), spelled as ``path`` is; [] when it names none or
    cannot be read here (the extractor refuses such a model itself, naming it)."""
    try:
        from vertebrae.extractors.onnx_model import read_graph

        graph = read_graph(os.path.join(base_dir, path), "onnx")
    except Exception:  # noqa: BLE001 - onnx missing, or not a model: the extractor names the problem
        return []
    folder = os.path.dirname(path)
    return [os.path.normpath(os.path.join(folder, name)) for name in graph.get("external") or ()]


def local_model_files(decl: Any, base_dir: str = ".") -> list[str]:
    """The local files ``decl`` (an extractor declaration) names, in order, without repeats: a file key's file, a
    folder key's files; [] for a declaration without one (a hub id, a precomputed / sklearn / callable
    extractor). A value that names nothing under ``base_dir`` is left out (a hub id or tag)."""
    if not isinstance(decl, Mapping):
        return []
    kind = decl.get("type")
    found: list[str] = []
    for key in LOCAL_KEYS.get(kind, ()):
        value = decl.get(key)
        if not isinstance(value, str) or not value:
            continue
        if kind == "open_clip" and key == "model":
            if not value.startswith(LOCAL_DIR):
                continue
            value = value[len(LOCAL_DIR):]
        full = os.path.join(base_dir, value)
        if os.path.isdir(full):
            prefix = len(os.path.normpath(full)) + 1
            found.extend(os.path.normpath(os.path.join(value, name[prefix:])) for name in _folder_files(full))
        elif os.path.isfile(full):
            found.append(value)
            if kind == "onnx" and key == "path":
                found.extend(_onnx_external(value, base_dir))
    return list(dict.fromkeys(found))


__all__ = ["LOCAL_KEYS", "local_model_files"]
