"""The fan-out bundle: one folder per fanned-out retrieval candidate, ``retrieval/fanouts/<merge fp>/``, written by
``vertebrae stage-retrieval-fanout`` and the one declared input of every partial-score job of the candidate.

It holds every file a partial reads, under fixed names: ``inputs.json`` (a ``retrieval-fanout`` artifact under the
merge spec's fingerprint, recording each other file's name, fingerprint and content hash), the merge spec
(``<merge fp>.json``), the protocol's relevance rows by query and by gallery item (``rows.query.h5``,
``rows.gallery.h5``) and the two endpoints (``query.h5``, ``gallery.h5``: hard links to the merged embeddings where
the file system allows, else copies: the same bytes). One input per partial keeps the planning of 10,000 partial
jobs near Snakemake's own cost per job, and a job that sees no shared folder (object storage) receives all it reads.

The folder is written whole or not at all: built under a hidden temporary name beside it and renamed into place.
A file inside it that is bad makes the whole folder bad (:func:`bundle_of`): it is moved aside as one, so that the
workflow restages it (Snakemake tracks the folder, not its files).
"""

from __future__ import annotations

import os
import secrets
import shutil
from collections.abc import Callable, Mapping
from contextlib import suppress
from pathlib import Path
from typing import Any

from vertebrae.core.errors import ArtifactError
from vertebrae.core.fingerprint import FINGERPRINT_PATTERN

FANOUT_KIND = "retrieval-fanout"
INPUTS = "inputs.json"
ENDPOINTS = {"query": "query.h5", "gallery": "gallery.h5"}
RELEVANCE = {"query": "rows.query.h5", "gallery": "rows.gallery.h5"}
FOLDER_PARENT = "fanouts"  # retrieval/fanouts/<merge fp>/


def plan_name(fp: str) -> str:
    """The merge spec's name inside its bundle (``load_plan`` wants a spec stored under its own fingerprint)."""
    return f"{fp}.json"


def bundle_of(path: str | os.PathLike) -> Path | None:
    """The bundle folder ``path`` lies in (``.../fanouts/[...]/<16 hex>/<file>``), or None."""
    path = Path(os.path.abspath(path))
    folder = path.parent
    if FINGERPRINT_PATTERN.fullmatch(folder.name) and FOLDER_PARENT in folder.parent.parts:
        return folder
    return None


def link_or_copy(source: str | os.PathLike, target: str | os.PathLike) -> None:
    """``target`` as a hard link to ``source`` (no bytes copied), or a copy where links cannot be made (another
    file system, a store without links)."""
    try:
        os.link(source, target)
    except OSError:
        shutil.copyfile(source, target)


def write_bundle(folder: str | os.PathLike, fill: Callable[[Path], None]) -> None:
    """Build the bundle at ``folder`` whole or not at all: ``fill(tmp)`` writes every file into a hidden temporary
    folder beside it, which then replaces ``folder`` (an older bundle there is removed first)."""
    folder = Path(os.path.abspath(folder))
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = folder.parent / f".{folder.name}.tmp-{os.getpid()}-{secrets.token_hex(6)}"
    tmp.mkdir()
    try:
        fill(tmp)
        if folder.exists():
            shutil.rmtree(folder)
        os.replace(tmp, folder)
    except BaseException:
        with suppress(FileNotFoundError):
            shutil.rmtree(tmp)
        raise


def resolve(folder: str | os.PathLike, recorded: Mapping[str, Any]) -> dict[str, Any]:
    """The ``inputs.json`` payload ``recorded`` with its files' names made paths inside ``folder`` (the protocol,
    which is not in the bundle, keeps its own path)."""
    folder = Path(folder)
    out = {**recorded, "relevance": {side: {**entry, "path": str(folder / entry["path"])}
                                     for side, entry in recorded["relevance"].items()}}
    for key in ("plan", *ENDPOINTS):
        out[key] = {**recorded[key], "path": str(folder / recorded[key]["path"])}
    return out


def expected_files(recorded: Mapping[str, Any]) -> dict[str, dict[str, str]]:
    """Each file of a bundle by name: the fingerprint and content hash ``inputs.json`` records for it."""
    files = {recorded[key]["path"]: {"fingerprint": recorded[key]["fingerprint"],
                                     "content_hash": recorded[key]["content_hash"]} for key in ("plan", *ENDPOINTS)}
    for entry in recorded["relevance"].values():
        files[entry["path"]] = {"fingerprint": recorded["plan"]["fingerprint"], "content_hash": entry["content_hash"]}
    return files


def check_bundle_file(path: Path, manifest: Mapping[str, Any], recorded: Mapping[str, Any]) -> None:
    """A bundle file (``manifest`` read and verified) must be the file ``inputs.json`` records under its name:
    ArtifactError (stale) if not."""
    expected = expected_files(recorded).get(path.name)
    if expected is None:
        raise ArtifactError(f"artifact {path}: not a file of the fan-out bundle {path.parent}")
    for key in ("fingerprint", "content_hash"):
        if manifest.get(key) != expected[key]:
            raise ArtifactError(f"artifact {path}: stale: {key} {manifest.get(key)}, the bundle's {INPUTS} "
                                f"records {expected[key]}")


__all__ = ["ENDPOINTS", "FANOUT_KIND", "INPUTS", "RELEVANCE", "bundle_of", "check_bundle_file", "expected_files",
           "link_or_copy", "plan_name", "resolve", "write_bundle"]
