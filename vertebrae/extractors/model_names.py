"""Model names resolved when an extractor is built (so at ``vertebrae validate`` and plan time), before any job.

Nothing here loads weights or imports torch; the checks read package metadata, small config files and folder
listings (one hub metadata call, only online and only for a hub id the local cache lacks):

- ``require(kind, where)``: the packages a model family runs on are installed (importable, with their metadata);
  else the error names them and the extra that brings them, ``pip install 'vertebrae[models]'``.
- ``check_folder(folder, kind, where)``: a local model folder holds the config its family loads: ``config.json``
  with a ``model_type`` (transformers), ``modules.json`` or such a ``config.json`` (sentence-transformers),
  ``open_clip_config.json`` with a ``model_cfg`` (open_clip).
- ``check_hub_id(repo_id, revision, kind, where)``: a hub id is in the local Hugging Face cache (its config and a
  weights file at that revision: a directory lookup, as ``huggingface_hub.try_to_load_from_cache`` does it). When
  it is not and ``HF_HUB_OFFLINE`` is set, it is refused with the command that downloads it and the closest cached
  names; online it must resolve on the hub (``hub_files``: one metadata call, the only network use).
- ``check_weights_cached(repo_id, filenames, where)``: weights a registry names (an open_clip tag) are cached when
  offline.
"""

from __future__ import annotations

import difflib
import json
import os
from collections.abc import Sequence
from importlib import metadata
from importlib.util import find_spec
from pathlib import Path
from typing import Any

from vertebrae.core.errors import ConfigError

EXTRA = "pip install 'vertebrae[models]'"
_TORCH, _HUB, _TRANSFORMERS = ("torch", "torch"), ("huggingface_hub", "huggingface-hub"), ("transformers", "transformers")
#: family -> the (import name, distribution) pairs it runs on, all in the ``models`` extra
PACKAGES: dict[str, tuple[tuple[str, str], ...]] = {
    "hf_text": (_TRANSFORMERS, _TORCH, _HUB),
    "hf_vision": (_TRANSFORMERS, _TORCH, _HUB),
    "hf_multimodal": (_TRANSFORMERS, _TORCH, _HUB),
    "sentence_transformers": (("sentence_transformers", "sentence-transformers"), _TRANSFORMERS, _TORCH, _HUB),
    "open_clip": (("open_clip", "open_clip_torch"), _TORCH, _HUB),
    "timm": (("timm", "timm"), _TORCH, ("safetensors", "safetensors")),
    "torch": (_TORCH,),
}
#: family -> the config files (any one) a model folder or a cached hub snapshot must hold
CONFIG_FILES: dict[str, tuple[str, ...]] = {
    "hf_text": ("config.json",), "hf_vision": ("config.json",), "hf_multimodal": ("config.json",),
    "sentence_transformers": ("modules.json", "config.json"), "open_clip": ("open_clip_config.json",),
}
_SAVED_BY = {"hf_text": "a transformers folder (save_pretrained output)",
             "hf_vision": "a transformers folder (save_pretrained output)",
             "hf_multimodal": "a transformers folder (save_pretrained output)",
             "sentence_transformers": "a sentence-transformers folder (SentenceTransformer.save output) or a "
                                      "transformers one (save_pretrained output)",
             "open_clip": "an open_clip folder (open_clip_config.json + open_clip_model.safetensors)"}
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".onnx", ".msgpack", ".h5", ".ckpt")


# -- packages
def missing_packages(kind: str) -> list[str]:
    """The distributions of ``PACKAGES[kind]`` that are not installed (no importable module or no metadata)."""
    missing = []
    for module, dist in PACKAGES.get(kind, ()):
        try:
            found = find_spec(module) is not None
        except (ImportError, ValueError):  # a parent that fails to import; a module whose __spec__ is None
            found = False
        if found:
            try:
                metadata.version(dist)
            except metadata.PackageNotFoundError:
                found = False
        if not found:
            missing.append(dist)
    return missing


def require(kind: str, where: str) -> None:
    """Refuse a model family whose packages are not installed, naming them and the pip command that brings them."""
    missing = missing_packages(kind)
    if missing:
        raise ConfigError(f"{where}: type {kind} needs {', '.join(missing)}, not installed here; install the models "
                          f"extra: {EXTRA}")


# -- local folders
def read_json(path: Path, where: str) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{where}: cannot read {path}: {exc}") from None


def _config_problem(path: Path, where: str) -> str | None:
    """What makes a config file unloadable by its library (None: loadable as far as a read can tell)."""
    config = read_json(path, where)
    if path.name == "modules.json":
        return None if isinstance(config, list) else "is not a list of modules"
    if path.name == "open_clip_config.json":
        return None if isinstance(config, dict) and isinstance(config.get("model_cfg"), dict) else "has no model_cfg"
    if not isinstance(config, dict):
        return "is not a JSON object"
    return None if isinstance(config.get("model_type"), str) else "has no model_type (transformers cannot tell the model)"


def check_folder(folder: str | Path, kind: str, where: str) -> None:
    """A local model folder holds a config its family loads (``CONFIG_FILES[kind]``, readable, with the keys the
    library needs first); else ConfigError naming ``where`` and the folder."""
    folder = Path(folder)
    names = CONFIG_FILES[kind]
    present = [folder / name for name in names if (folder / name).is_file()]
    if not present:
        raise ConfigError(f"{where}: the folder {folder} holds no {' or '.join(names)}; name {_SAVED_BY[kind]}")
    problem = _config_problem(present[0], where)
    if problem:
        raise ConfigError(f"{where}: {present[0]} {problem}; name {_SAVED_BY[kind]}")


# -- the Hugging Face cache
def hub_cache_dir(kind: str | None = None) -> Path:
    """The cache the family's library reads: ``SENTENCE_TRANSFORMERS_HOME`` for sentence-transformers when set,
    else huggingface_hub's (``HF_HUB_CACHE`` / ``HF_HOME``, as the libraries read it at import)."""
    if kind == "sentence_transformers" and os.environ.get("SENTENCE_TRANSFORMERS_HOME"):
        return Path(os.environ["SENTENCE_TRANSFORMERS_HOME"])
    from huggingface_hub import constants

    return Path(constants.HF_HUB_CACHE)


def hub_offline() -> bool:
    """Whether the libraries will stay off the network (``HF_HUB_OFFLINE`` / ``TRANSFORMERS_OFFLINE``)."""
    from huggingface_hub import constants

    return bool(constants.HF_HUB_OFFLINE)


def _repo_dir(cache: Path, repo_id: str) -> Path:
    return cache / ("models--" + repo_id.replace("/", "--"))


def cached_snapshot(cache: Path, repo_id: str, revision: str | None) -> Path | None:
    """The snapshot folder of ``repo_id`` at ``revision`` (a branch, tag or commit; default main) in ``cache``."""
    repo = _repo_dir(cache, repo_id)
    revision = revision or "main"
    ref = repo / "refs" / revision
    try:
        commit = ref.read_text(encoding="utf-8").strip() if ref.is_file() else revision
    except OSError:
        return None
    snapshot = repo / "snapshots" / commit
    return snapshot if snapshot.is_dir() else None


def has_weights(folder: Path) -> bool:
    """Whether a folder (a snapshot: links into the blobs) holds a readable weights file, at any depth."""
    return any(path.suffix in WEIGHT_SUFFIXES and path.is_file() for path in folder.rglob("*"))


def cached_names(cache: Path) -> list[str]:
    """The model repos in a cache, as hub ids."""
    try:
        entries = os.listdir(cache)
    except OSError:
        return []
    return sorted(e[len("models--"):].replace("--", "/") for e in entries if e.startswith("models--"))


def closest(name: str, names: Sequence[str], n: int = 5) -> list[str]:
    """The names most like ``name`` (difflib, case ignored), best first."""
    lower: dict[str, str] = {}
    for candidate in names:
        lower.setdefault(candidate.lower(), candidate)
    return [lower[m] for m in difflib.get_close_matches(name.lower(), list(lower), n=n, cutoff=0.6)]


def download_hint(repo_id: str, revision: str | None) -> str:
    rev = f" --revision {revision}" if revision not in (None, "main") else ""
    return (f"download it with `hf download {repo_id}{rev}` (or `huggingface-cli download {repo_id}{rev}`) on a "
            "machine with network, or name a local folder")


def _closest_clause(repo_id: str, cache: Path) -> str:
    near = [n for n in closest(repo_id, cached_names(cache)) if n != repo_id]
    return f"; closest cached names: {', '.join(near)}" if near else ""


def _other_revisions(cache: Path, repo_id: str) -> str:
    refs = _repo_dir(cache, repo_id) / "refs"
    names = sorted(p.name for p in refs.iterdir() if p.is_file()) if refs.is_dir() else []
    return f" (the cache holds it at {', '.join(names)})" if names else ""


def _cached(cache: Path, repo_ids: Sequence[str], revision: str | None, configs: Sequence[str]) -> tuple[Path | None, str]:
    """(the snapshot of the first of ``repo_ids`` cached whole: a config of ``configs`` and a weights file; else
    None, and what is missing: "" when nothing is cached)."""
    why = ""
    for repo_id in repo_ids:
        snapshot = cached_snapshot(cache, repo_id, revision)
        if snapshot is None:
            continue
        if configs and not any((snapshot / name).is_file() for name in configs):
            why = why or f"{snapshot} holds no {' or '.join(configs)}"
        elif not has_weights(snapshot):
            why = why or f"{snapshot} holds no weights file"
        else:
            return snapshot, ""
    return None, why


def check_hub_id(repo_id: str, revision: str | None, kind: str, where: str, *,
                 also: Sequence[str] = ()) -> Path | None:
    """Resolve a hub id before any job: its cached snapshot folder (config and weights at ``revision``), or None
    when the cache lacks it but the hub, online, has it. Refused (ConfigError naming ``where``) when the cache lacks
    it and HF_HUB_OFFLINE is set (the download command, the closest cached names), or when online the hub does not
    have it. ``also``: other ids the library would try for the same name (sentence-transformers' own org)."""
    cache = hub_cache_dir(kind)
    ids = (repo_id, *also)
    configs = CONFIG_FILES.get(kind, ())
    snapshot, partly = _cached(cache, ids, revision, configs)
    if snapshot is not None:
        return snapshot
    at = f" at revision {revision!r}" if revision not in (None, "main") else ""
    if hub_offline():
        state = (f"is only partly in the local cache ({partly})" if partly else
                 f"is not in the local cache ({cache}){_other_revisions(cache, repo_id)}")
        raise ConfigError(f"{where}: model {repo_id!r}{at} {state} and HF_HUB_OFFLINE is set; "
                          f"{download_hint(repo_id, revision)}{_closest_clause(repo_id, cache)}")
    check_online(ids, revision, configs, where, cache)
    return None


# -- online: the hub itself
class HubMiss(LookupError):
    """Why ``hub_files`` found nothing: ``reason`` is "missing" (no such repo, or private), "revision" (no such
    revision), "invalid" (not a hub id) or "unreachable" (the hub did not answer); ``detail`` the library's words."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason, self.detail = reason, detail


def hub_files(repo_id: str, revision: str | None, *, timeout: float = 10.0) -> list[str]:
    """The file names of model repo ``repo_id`` at ``revision`` on the Hugging Face hub: ONE metadata call
    (``HfApi.model_info``, no file contents); HubMiss when it cannot be resolved."""
    from huggingface_hub import HfApi

    try:
        from huggingface_hub.errors import (HFValidationError, RepositoryNotFoundError,
                                            RevisionNotFoundError)
    except ImportError:  # huggingface_hub before 0.24
        from huggingface_hub.utils import (HFValidationError, RepositoryNotFoundError,  # type: ignore[no-redef]
                                           RevisionNotFoundError)
    try:
        info = HfApi().model_info(repo_id, revision=revision, timeout=timeout)
    except RevisionNotFoundError as exc:  # before RepositoryNotFoundError, in case one derives from the other
        raise HubMiss("revision", str(exc).splitlines()[0]) from None
    except RepositoryNotFoundError as exc:
        raise HubMiss("missing", str(exc).splitlines()[0]) from None
    except HFValidationError as exc:
        raise HubMiss("invalid", str(exc).splitlines()[0]) from None
    except Exception as exc:  # noqa: BLE001 - whatever the HTTP layer raises when the hub does not answer
        raise HubMiss("unreachable", f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}") from None
    return [sibling.rfilename for sibling in (info.siblings or [])]


def check_online(repo_ids: Sequence[str], revision: str | None, configs: Sequence[str], where: str,
                 cache: Path) -> None:
    """Online: the first of ``repo_ids`` the hub has, holding one of ``configs``; else ConfigError naming
    ``where``, the id and why."""
    repo_id, miss = repo_ids[0], None
    for candidate in repo_ids:
        try:
            files = hub_files(candidate, revision)
        except HubMiss as exc:
            miss = miss or exc
            continue
        if configs and not any(name in files for name in configs):
            raise ConfigError(f"{where}: the hub repo {candidate!r} holds no {' or '.join(configs)}; is it a model "
                              "of this type?")
        return
    assert miss is not None
    near = _closest_clause(repo_id, cache)
    if miss.reason == "revision":
        raise ConfigError(f"{where}: the hub has no revision {revision!r} of model {repo_id!r} ({miss.detail})")
    if miss.reason == "unreachable":
        raise ConfigError(f"{where}: model {repo_id!r} is not in the local cache ({cache}) and the hub could not be "
                          f"reached ({miss.detail}); {download_hint(repo_id, revision)}{near}")
    what = "not a valid hub id" if miss.reason == "invalid" else "not on the Hugging Face hub (or private: log in with `hf auth login`)"
    raise ConfigError(f"{where}: model {repo_id!r} is {what}, nor in the local cache ({cache}), nor a local "
                      f"folder{near}")


def check_weights_cached(repo_id: str, filenames: Sequence[str], where: str, *, what: str) -> None:
    """Offline only: one of ``filenames`` of ``repo_id`` (weights a registry names) is in the local cache at main;
    else ConfigError with the download command. Online the library downloads them."""
    if not hub_offline():
        return
    cache = hub_cache_dir()
    snapshot = cached_snapshot(cache, repo_id, None)
    if snapshot is not None and any((snapshot / name).is_file() for name in filenames):
        return
    raise ConfigError(f"{where}: {what} {repo_id!r} ({' or '.join(filenames)}) is not in the local cache ({cache}) "
                      f"and HF_HUB_OFFLINE is set; {download_hint(repo_id, None)}")


__all__ = ["CONFIG_FILES", "EXTRA", "PACKAGES", "HubMiss", "cached_names", "cached_snapshot", "check_folder",
           "check_hub_id", "check_online", "check_weights_cached", "closest", "download_hint", "hub_cache_dir",
           "hub_files", "hub_offline", "missing_packages", "read_json", "require"]
