"""Loaders for data as researchers already hold it, with the counter/loader contract of
:mod:`vertebrae.data.sources.arrays`:

- ``{"type": "image_folder", "path": <folder>}``: one sub-folder per class (:mod:`vertebrae.data.sources.image_folder`);
- ``{"type": "hf_dataset", "path": ..., "split": None, "image_column": None, "text_column": None,
  "label_column": "label", "id_column": None, "groups_column": None}``: a ``datasets.save_to_disk`` folder or
  Arrow / Parquet files (:mod:`vertebrae.data.sources.hf_dataset`; neither input column: a labels-only table);
- ``{"type": "webdataset", "path": "shards/train-{000000..000099}.tar", "image_key": "jpg;jpeg;png;webp",
  "label_key": "cls", "label_field": None}``: WebDataset tar shards (:mod:`vertebrae.data.sources.webdataset`).

Each yields raw rows (``RawInputs``: image paths or references to images inside a shard or table, or texts) that
an extractor embeds, one label per row and the row ids. Counting the rows (what planning, and so ``vertebrae
validate``, does) is the cheap check: every class folder listed and non-empty; the split and the columns exist
(file metadata); every shard's member names, the first shard's samples each with an image and a label member.
``format_recipe`` is the ``files`` identity recipe (every file the source reads, hashed once and cached by path,
size and mtime).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vertebrae.core.file_digests import FileDigests
from vertebrae.data.sources.image_folder import image_folder_inputs, image_folder_recipe, list_image_folder, resolve_folder
from vertebrae.data.sources.checks import SourceData, labels_only_rows
from vertebrae.data.sources.declaration import _check_rows

FORMAT_SOURCES = ("image_folder", "hf_dataset", "webdataset")

# --------------------------------------------------------------------------------------------------------
# image_folder


def _count_image_folder(opts: dict[str, Any], base_dir: Path, where: str) -> int:
    return len(list_image_folder(resolve_folder(opts["path"], base_dir, where)).paths)


def _load_image_folder(opts: dict[str, Any], base_dir: Path, where: str, rows: Any) -> SourceData:
    listed = list_image_folder(resolve_folder(opts["path"], base_dir, where))
    start, stop = _check_rows(rows, len(listed.paths), where)
    return SourceData(image_folder_inputs(listed, start, stop), listed.labels[start:stop], listed.ids[start:stop])


# --------------------------------------------------------------------------------------------------------
# hf_dataset


def _hf_spec(opts: dict[str, Any], base_dir: Path, where: str) -> Any:
    from vertebrae.data.sources.hf_dataset import HFDatasetSpec

    return HFDatasetSpec.from_decl(opts, base_dir=base_dir, where=where)


def _count_hf_dataset(opts: dict[str, Any], base_dir: Path, where: str) -> int:
    from vertebrae.data.sources.hf_dataset import hf_row_count

    return hf_row_count(_hf_spec(opts, base_dir, where))


def _load_hf_dataset(opts: dict[str, Any], base_dir: Path, where: str, rows: Any) -> SourceData:
    from vertebrae.data.sources.hf_dataset import read_hf_rows

    spec = _hf_spec(opts, base_dir, where)
    data = read_hf_rows(spec, rows)
    if spec.labels_only is not None:
        return SourceData(labels_only_rows(data.n_rows), data.labels, data.row_ids, data.groups, spec.groups_column,
                          spec.labels_only)
    return SourceData(data.inputs, data.labels, data.row_ids, data.groups, spec.groups_column)


def _groups_hf_dataset(opts: dict[str, Any], base_dir: Path, where: str) -> list | None:
    from vertebrae.data.sources.hf_dataset import read_hf_rows

    if opts["groups_column"] is None:
        return None
    spec = _hf_spec({**opts, "image_column": None, "text_column": None}, base_dir, where)  # no input cells read
    return read_hf_rows(spec).groups


def _labels_only_hf_dataset(opts: dict[str, Any], base_dir: Path, where: str) -> str | None:
    return _hf_spec(opts, base_dir, where).labels_only


# --------------------------------------------------------------------------------------------------------
# webdataset


def _wds_spec(opts: dict[str, Any], base_dir: Path, where: str) -> Any:
    from vertebrae.data.sources.webdataset import WebDatasetSpec

    return WebDatasetSpec.from_decl(opts, base_dir=base_dir, where=where)


def _count_webdataset(opts: dict[str, Any], base_dir: Path, where: str) -> int:
    from vertebrae.data.sources.webdataset import check_first_shard, shard_counts

    spec = _wds_spec(opts, base_dir, where)
    check_first_shard(spec)  # the plan (and so ``vertebrae validate``) sees a shard without labels before any job
    return sum(shard_counts(spec))


def source_segments(opts: Any, *, base_dir: Path, where: str) -> list[int] | None:
    """Segment starts of a source's rows (``vertebrae.stages.common.shard_bounds``): a ``webdataset`` source's tar
    files (headers only), None for any other source."""
    if not isinstance(opts, dict) or opts.get("type") != "webdataset":
        return None
    from vertebrae.data.sources.webdataset import wds_segments

    return wds_segments(_wds_spec(opts, base_dir, where))


def source_tars(opts: Any, *, base_dir: Path, where: str, digests: FileDigests) -> list[list] | None:
    """A ``webdataset`` source's ``[[rows, sha256], ...]`` per tar file (``wds_tars``), None for any other source."""
    if not isinstance(opts, dict) or opts.get("type") != "webdataset":
        return None
    from vertebrae.data.sources.webdataset import wds_tars

    return wds_tars(_wds_spec(opts, base_dir, where), digests)


def load_planned_source_rows(opts: dict[str, Any], tars: Any, *, base_dir: Path, where: str, start: int, stop: int,
                             digests: FileDigests) -> tuple[Any, list]:
    """Inputs and row ids of rows ``start:stop`` of a ``webdataset`` source, opening only the tar files that hold
    them, checked against the plan's ``tars`` (``read_planned_rows``); labels are not read."""
    import dataclasses

    from vertebrae.data.sources.webdataset import WebDatasetSpec, read_planned_rows

    spec = WebDatasetSpec.from_decl(opts, base_dir=base_dir, where=where, check_files=False)
    data = read_planned_rows(dataclasses.replace(spec, label_key=None), tars, (start, stop), digests)
    return data.inputs, data.row_ids


def _load_webdataset(opts: dict[str, Any], base_dir: Path, where: str, rows: Any) -> SourceData:
    from vertebrae.data.sources.webdataset import read_wds_rows

    data = read_wds_rows(_wds_spec(opts, base_dir, where), rows)
    return SourceData(data.inputs, data.labels, data.row_ids)


# --------------------------------------------------------------------------------------------------------
# validate's cheap checks and content tracking


def format_recipe(kind: str, opts: dict[str, Any], base_dir: Path, where: str, digests: FileDigests) -> dict[str, Any]:
    """The ``files`` identity recipe of a format source (see the module docstring)."""
    if kind == "image_folder":
        return image_folder_recipe(resolve_folder(opts["path"], base_dir, where), digests)
    if kind == "hf_dataset":
        from vertebrae.data.sources.hf_dataset import hf_recipe

        return {"type": kind, **hf_recipe(_hf_spec(opts, base_dir, where), opts, digests)}
    from vertebrae.data.sources.webdataset import wds_recipe

    return {"type": kind, **wds_recipe(_wds_spec(opts, base_dir, where), opts, digests)}


__all__ = ["FORMAT_SOURCES", "format_recipe", "load_planned_source_rows", "source_segments", "source_tars"]
