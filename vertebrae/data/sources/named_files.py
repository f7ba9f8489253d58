"""The files a source declaration names indirectly: the images a manifest lists, the tar files a WebDataset pattern
names. The workflow declares them as the inputs of the jobs that read them (``vertebrae.planning.job_files``), each
spelled as the config spells its source (relative to the working folder, or absolute), so that a job run where only
its declared inputs are (object storage, a node without the shared disk) gets them.

- ``manifest_images``: a manifest's image path of every row, in row order (a relative cell under the manifest's
  folder, as ``read_manifest`` resolves it); None for a text manifest or another source type.
- ``webdataset_tars``: a ``webdataset`` source's tar files, in pattern order (the brace pattern expanded as the
  source expands it); None for another source type.
- ``tars_of_rows``: which of those tar files hold rows ``[start, stop)``, from the per-tar row counts an embedding
  plan records (``wds_tars``): exactly the tars a shard job opens (``read_planned_rows``).

An image folder, a Hugging Face ``datasets`` folder and a BEIR folder are named by their ``path`` itself (their
readers list the folder), so they need no listing here.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from vertebrae.core.errors import ValidationError


def _spelled(folder: str, cell: str) -> str:
    return cell if os.path.isabs(cell) or "://" in cell else os.path.normpath(os.path.join(folder, cell))


def manifest_images(decl: Any, base_dir: str | os.PathLike = ".") -> list[str] | None:
    """Every row's image path of an image ``manifest`` declaration, in row order, spelled under the manifest's
    folder as the declaration spells its ``path``; None for any other declaration."""
    if not isinstance(decl, Mapping) or decl.get("type") != "manifest" or not decl.get("image_column"):
        return None
    from vertebrae.data.sources.manifest import ManifestSpec, _table

    path = Path(decl["path"]) if Path(decl["path"]).is_absolute() else Path(base_dir) / decl["path"]
    # the image column alone (a retrieval side's manifest has no label column)
    spec = ManifestSpec(path, image_column=decl["image_column"], label_column=None, format=decl.get("format"))
    _, columns, _ = _table(spec)
    folder = os.path.dirname(str(decl["path"]))
    return [_spelled(folder, cell) if isinstance(cell, str) and cell.strip() else str(cell)
            for cell in columns[spec.input_column]]


def webdataset_tars(decl: Any) -> list[str] | None:
    """A ``webdataset`` declaration's tar files as its pattern names them, in order; None for any other
    declaration (or a pattern braceexpand does not read: the source refuses it itself)."""
    if not isinstance(decl, Mapping) or decl.get("type") != "webdataset" or not isinstance(decl.get("path"), str):
        return None
    from braceexpand import braceexpand

    try:
        return [os.path.normpath(name) for name in braceexpand(decl["path"])]
    except (ValueError, RecursionError):
        return None


def tars_of_rows(tars: Sequence[str], counts: Sequence[Any], start: int, stop: int) -> list[str]:
    """The tar files holding rows ``[start, stop)`` of a source whose tars hold ``counts`` rows each (an
    embedding plan's ``tars`` entries, ``[[rows, sha256], ...]``, or the counts alone), in order."""
    if len(tars) != len(counts):
        raise ValidationError(f"{len(tars)} tar file(s) named, {len(counts)} planned; re-plan")
    found, first = [], 0
    for name, count in zip(tars, counts):
        rows = int(count[0] if isinstance(count, Sequence) else count)
        if rows and first < stop and start < first + rows:
            found.append(name)
        first += rows
    return found


__all__ = ["manifest_images", "tars_of_rows", "webdataset_tars"]
