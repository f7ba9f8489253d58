"""A local Hugging Face cache built offline, laid out as huggingface_hub lays out its downloads
(``models--ORG--NAME/refs/REVISION`` naming a commit, ``snapshots/COMMIT/`` holding the files), so that a hub id
resolves without a network, as after ``hf download``. vertebrae checks a hub id against this cache when an extractor
is built (``vertebrae/extractors/model_names.py``).

- ``cache_entry(cache, repo_id, files)``: one repo at one revision; ``files`` maps a name to bytes or to a file to
  link (a model folder's files stay where they are).
- ``folder_entry(cache, repo_id, folder)``: every file of a model folder (the packaged all-MiniLM-L6-v2's, say).
- ``tiny_entry(cache, repo_id)``: a transformers config and an empty weights file: enough for the checks, not to load.
- ``use_cache(monkeypatch, cache, offline=True)``: in this process, the cache and offline mode huggingface_hub
  reports (read once, at its import, in a fresh process: give a subprocess ``HF_HUB_CACHE`` / ``HF_HUB_OFFLINE``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path

TINY_CONFIG = {"architectures": ["BertModel"], "model_type": "bert", "num_hidden_layers": 2, "hidden_size": 8}


def cache_entry(cache: Path, repo_id: str, files: Mapping[str, bytes | Path], *, revision: str = "main",
                commit: str | None = None) -> Path:
    """The snapshot folder of ``repo_id`` at ``revision`` in ``cache``, holding ``files``."""
    repo = Path(cache) / ("models--" + repo_id.replace("/", "--"))
    commit = commit or hashlib.sha1(f"{repo_id}@{revision}".encode()).hexdigest()
    snapshot = repo / "snapshots" / commit
    snapshot.mkdir(parents=True, exist_ok=True)
    (repo / "refs").mkdir(exist_ok=True)
    (repo / "refs" / revision).write_text(commit)
    for name, content in files.items():
        path = snapshot / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, Path):
            path.symlink_to(content.resolve())
        else:
            path.write_bytes(content)
    return snapshot


def folder_entry(cache: Path, repo_id: str, folder: Path, **kwargs) -> Path:
    folder = Path(folder)
    files = {p.relative_to(folder).as_posix(): p for p in sorted(folder.rglob("*")) if p.is_file()}
    return cache_entry(cache, repo_id, files, **kwargs)


def tiny_entry(cache: Path, repo_id: str, **kwargs) -> Path:
    return cache_entry(cache, repo_id, {"config.json": json.dumps(TINY_CONFIG).encode(), "model.safetensors": b""},
                       **kwargs)


def use_cache(monkeypatch, cache: Path, *, offline: bool = True) -> Path:
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", offline)
    monkeypatch.delenv("SENTENCE_TRANSFORMERS_HOME", raising=False)
    return Path(cache)
