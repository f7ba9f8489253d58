"""What a sentence-transformers model folder says about its own use: pooling, normalisation, token limit.

A folder saved by sentence-transformers holds ``modules.json`` (the module pipeline: Transformer, Pooling,
optional Dense / Normalize ...), the Pooling module's ``config.json`` (``1_Pooling/config.json``: which
``pooling_mode_*`` is on, and ``include_prompt``) and ``sentence_bert_config.json`` (``max_seq_length``).
``read_folder(folder)`` returns those choices (None for a folder without ``modules.json``); nothing is imported
from sentence-transformers. ``hf_text`` uses them as its defaults.

``SentenceTransformerExtractor`` (``type: sentence_transformers``, in ``sentence_transformer_model``) runs the
model itself.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vertebrae.core.errors import ConfigError

# pooling_mode_* flag -> hf_text pooling name (sentence-transformers' order, used when it concatenates several)
POOLING_MODES = {
    "pooling_mode_cls_token": "cls",
    "pooling_mode_max_tokens": "max",
    "pooling_mode_mean_tokens": "mean",
    "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len",
    "pooling_mode_weightedmean_tokens": "weightedmean",
    "pooling_mode_lasttoken": "lasttoken",
}
# modules hf_text applies itself (the Transformer runs through transformers.AutoModel)
APPLIED = ("Transformer", "Pooling", "Normalize")


@dataclass(frozen=True)
class FolderSettings:
    """The folder's own choices: ``pooling`` (an hf_text name, or a '+'-joined list of several modes),
    ``normalize``, ``max_length`` (None when not given), ``include_prompt`` and the module types hf_text does not
    apply (``skipped``: e.g. Dense)."""

    folder: str
    pooling: str | None
    normalize: bool
    max_length: int | None
    include_prompt: bool
    skipped: tuple[str, ...]


def _read_json(path: Path, where: str) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{where}: cannot read {path}: {exc}") from None


def read_folder(folder: str | Path, *, where: str = "extractor") -> FolderSettings | None:
    """The sentence-transformers settings of a local model folder, or None if it holds no ``modules.json``."""
    folder = Path(folder)
    modules_file = folder / "modules.json"
    if not modules_file.is_file():
        return None
    modules = _read_json(modules_file, where)
    if not isinstance(modules, list):
        raise ConfigError(f"{where}: {modules_file} must hold a list of modules")
    pooling, include_prompt, normalize, skipped = None, True, False, []
    for entry in modules:
        kind = str(entry.get("type", "")) if isinstance(entry, dict) else ""
        short = kind.rpartition(".")[2]
        if short == "Pooling":
            config = _read_json(folder / str(entry.get("path", "")) / "config.json", where)
            modes = [name for flag, name in POOLING_MODES.items() if config.get(flag)]
            if not modes and isinstance(config.get("pooling_mode"), str):
                modes = [config["pooling_mode"].replace("mean_sqrt_len_tokens", "mean_sqrt_len")
                         .replace("_tokens", "").replace("_token", "")]
            pooling = "+".join(modes) if modes else None
            include_prompt = bool(config.get("include_prompt", True))
        elif short == "Normalize":
            normalize = True
        elif short not in APPLIED:
            skipped.append(f"{kind} ({entry.get('path') or entry.get('name')})" if isinstance(entry, dict) else repr(entry))
    max_length = None
    bert_config = folder / "sentence_bert_config.json"
    if bert_config.is_file():
        value = _read_json(bert_config, where).get("max_seq_length")
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            max_length = value
    return FolderSettings(str(folder), pooling, normalize, max_length, include_prompt, tuple(skipped))


__all__ = ["APPLIED", "POOLING_MODES", "FolderSettings", "read_folder"]
