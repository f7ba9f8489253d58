"""One side of a retrieval dataset (its queries or its gallery) read from data as researchers hold it.

A side is a source declaration of one of :data:`SIDE_TYPES` (see :mod:`vertebrae.data.sources`): a ``manifest``
(texts or image paths), an ``hf_dataset`` (a text or image column of a ``save_to_disk`` folder or Arrow / Parquet
files), an ``image_folder`` (one sub-folder per class) or ``webdataset`` tar shards. A ``source_pair`` retrieval
source (:mod:`vertebrae.data.declared.retrieval`) pairs two of them, with relevance either from a relevance file
(``relevance_path``: records name rows by id; a side's labels are then not read, so its label keys are dropped:
a ``webdataset`` gallery needs no label member, an ``hf_dataset`` no label column) or by ``relevance:
same_label`` (grade 1 for every query and gallery row whose labels are equal as text: a class folder's name, a
``ClassLabel``'s name, a ``cls`` integer's decimal text).

Row ids are the source's (a manifest's or hf_dataset's ``id_column``, an image folder's relative paths, a tar
sample's key), or the row order (integers) when the source has none.

Each side's ``files`` recipe (:func:`side_recipe`) names the files its rows are read from; without labels it is
the side's endpoint recipe, so the embeddings of a side follow its own rows and never the relevance or labels.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vertebrae.core.errors import ConfigError, ValidationError
from vertebrae.core.file_digests import FileDigests
from vertebrae.core.inputs import RawInputs
from vertebrae.data.sources.registry import GROUPS_KEYS, parse_decl as _parse_decl

SIDE_TYPES = ("manifest", "hf_dataset", "image_folder", "webdataset")
#: The keys of each side type that only concern labels (dropped when relevance comes from a file).
LABEL_KEYS = {"manifest": ("label_column", "label_dtype"), "hf_dataset": ("label_column",),
              "image_folder": (), "webdataset": ("label_key", "label_field")}
RELEVANCE_RULES = ("same_label",)


@dataclass(frozen=True)
class SideRows:
    """A side's raw rows (texts or image paths / references), row ids and, when asked for, one label per row."""

    inputs: RawInputs
    ids: list
    labels: list | None


def _side_opts(decl: Any, where: str, *, labels: bool, strict: bool = True) -> tuple[str, dict[str, Any]]:
    """``(type, options)`` of a side declaration, defaults filled in; without ``labels`` its label options are None
    (``strict``: a non-null label key is refused then, as a key the side would ignore)."""
    if not isinstance(decl, Mapping):
        raise ConfigError(f"{where}: a source declaration ({' | '.join(SIDE_TYPES)}) is required")
    kind = decl.get("type")
    if kind not in SIDE_TYPES:
        raise ConfigError(f"{where}.type: a retrieval side is one of {', '.join(SIDE_TYPES)}, got {kind!r}")
    group_key = GROUPS_KEYS.get(kind, "groups_column")
    if decl.get(group_key) is not None:
        raise ConfigError(f"{where}.{group_key}: retrieval does not use independence groups; remove it")
    decl = {k: v for k, v in decl.items() if not (k == group_key and v is None)}
    if not labels:
        for key in LABEL_KEYS[kind]:
            if strict and decl.get(key) is not None:
                raise ConfigError(f"{where}.{key}: relevance comes from the relevance file, so this side's labels are "
                                  "not read; remove the key (or use relevance: same_label)")
        decl = {k: v for k, v in decl.items() if k not in LABEL_KEYS[kind]}
    kind, opts = _parse_decl(decl, where)
    if not labels:
        opts.update({key: "str" if key == "label_dtype" else None for key in LABEL_KEYS[kind]})
    return kind, opts


def _spec(kind: str, opts: dict[str, Any], base_dir: Path, where: str) -> Any:
    if kind == "manifest":
        from vertebrae.data.sources.manifest import ManifestSpec

        return ManifestSpec.from_decl(opts, base_dir=base_dir, where=where)
    if kind == "hf_dataset":
        from vertebrae.data.sources.hf_dataset import HFDatasetSpec

        spec = HFDatasetSpec.from_decl(opts, base_dir=base_dir, where=where)
        if spec.input_column is None:
            raise ConfigError(f"{where}: a retrieval side embeds its rows: declare text_column or image_column")
        return spec
    if kind == "image_folder":
        from vertebrae.data.sources.image_folder import resolve_folder

        return resolve_folder(opts["path"], base_dir, where)
    from vertebrae.data.sources.webdataset import WebDatasetSpec

    spec = WebDatasetSpec.from_decl({**opts, "label_key": opts["label_key"] or "cls"}, base_dir=base_dir, where=where)
    return dataclasses.replace(spec, label_key=opts["label_key"])


def load_side(decl: Any, *, base_dir: Path, where: str, labels: bool) -> SideRows:
    """Every row of a side (labels only when ``labels``)."""
    kind, opts = _side_opts(decl, where, labels=labels)
    spec = _spec(kind, opts, Path(base_dir), where)
    if kind == "manifest":
        from vertebrae.data.sources.manifest import read_manifest

        data = read_manifest(spec)
        inputs, ids, found = data.inputs, data.row_ids, data.labels
    elif kind == "hf_dataset":
        from vertebrae.data.sources.hf_dataset import read_hf_rows

        data = read_hf_rows(spec)
        inputs, ids, found = data.inputs, data.row_ids, data.labels
    elif kind == "image_folder":
        from vertebrae.data.sources.image_folder import image_folder_inputs, list_image_folder

        listed = list_image_folder(spec)
        inputs, ids, found = image_folder_inputs(listed, 0, len(listed.paths)), listed.ids, listed.labels
    else:
        from vertebrae.data.sources.webdataset import read_wds_rows

        data = read_wds_rows(spec)
        inputs, ids, found = data.inputs, data.row_ids, data.labels
    ids = list(range(len(inputs))) if ids is None else list(ids)
    return SideRows(inputs, ids, list(found) if labels else None)


def side_row_count(decl: Any, *, base_dir: Path, where: str, labels: bool) -> int:
    """The side's row count, read cheaply (file metadata, tar headers, a folder listing), its declaration checked."""
    kind, opts = _side_opts(decl, where, labels=labels)
    spec = _spec(kind, opts, Path(base_dir), where)
    if kind == "manifest":
        from vertebrae.data.sources.manifest import manifest_row_count

        return manifest_row_count(spec)
    if kind == "hf_dataset":
        from vertebrae.data.sources.hf_dataset import hf_row_count

        return hf_row_count(spec)
    if kind == "image_folder":
        from vertebrae.data.sources.image_folder import list_image_folder

        return len(list_image_folder(spec).paths)
    from vertebrae.data.sources.webdataset import check_first_shard, shard_counts

    check_first_shard(spec)
    return sum(shard_counts(spec))


def side_recipe(decl: Any, *, base_dir: Path, where: str, digests: FileDigests, labels: bool,
                strict: bool = True) -> dict[str, Any]:
    """The side's ``files`` recipe: its options (label options only with ``labels``) and the SHA-256 of every file its
    rows are read from (see :mod:`vertebrae.data.sources.files`)."""
    kind, opts = _side_opts(decl, where, labels=labels, strict=strict)
    spec = _spec(kind, opts, Path(base_dir), where)
    if kind == "manifest":
        from vertebrae.data.sources.files import manifest_recipe

        return {"type": kind, **manifest_recipe(spec, opts, digests)}
    if kind == "hf_dataset":
        from vertebrae.data.sources.hf_dataset import hf_recipe

        return {"type": kind, **hf_recipe(spec, opts, digests)}
    if kind == "image_folder":
        from vertebrae.data.sources.image_folder import image_folder_recipe

        return image_folder_recipe(spec, digests)
    from vertebrae.data.sources.webdataset import wds_recipe

    return {"type": kind, **wds_recipe(spec, opts, digests)}


def same_label_records(queries: SideRows, gallery: SideRows) -> list[tuple[Any, Any, float]]:
    """``(query id, gallery id, 1.0)`` for every pair whose labels are equal as text, in query then gallery order."""
    by_label: dict[str, list] = {}
    for rid, label in zip(gallery.ids, gallery.labels or ()):
        by_label.setdefault(str(label), []).append(rid)
    return [(qid, gid, 1.0) for qid, label in zip(queries.ids, queries.labels or ()) for gid in by_label.get(str(label), ())]


# --------------------------------------------------------------------------------------------------------
# a source pair: two sides and their relevance


@dataclass(frozen=True)
class SourcePair:
    queries: SideRows
    gallery: SideRows
    records: list


def _pair_rule(decl: Mapping[str, Any], where: str) -> str | None:
    """A source pair's relevance rule (``same_label``), or None when it reads a relevance file; exactly one."""
    rule = decl.get("relevance")
    if rule is not None and rule not in RELEVANCE_RULES:
        raise ConfigError(f"{where}.relevance: must be one of {RELEVANCE_RULES} (or give relevance_path), got {rule!r}")
    if (rule is None) == (decl.get("relevance_path") is None):
        raise ConfigError(f"{where}: give exactly one of relevance_path (a qrels file naming rows by id) or relevance: "
                          "same_label")
    return rule


def _relevance_file(decl: Mapping[str, Any], base_dir: Path, where: str) -> Path:
    value = decl.get("relevance_path")
    path = (Path(base_dir) / str(value)).resolve()
    if not path.is_file():
        raise ConfigError(f"{where}.relevance_path: file not found: {path}")
    return path


def load_source_pair(decl: Mapping[str, Any], *, base_dir: Path, where: str) -> SourcePair:
    """Both sides and the relevance records (ids typed like the sides', each checked against its side)."""
    from vertebrae.data.sources.qrels import check_qrels_ids, read_qrels, typed_qrels

    labels = _pair_rule(decl, where) is not None
    queries, gallery = (load_side(decl.get(side), base_dir=base_dir, where=f"{where}.{side}", labels=labels)
                        for side in ("queries", "gallery"))
    if labels:
        return SourcePair(queries, gallery, same_label_records(queries, gallery))
    qrels = read_qrels(_relevance_file(decl, base_dir, where))
    records = typed_qrels(qrels, queries.ids, gallery.ids)
    check_qrels_ids(qrels, set(queries.ids), side="query", where=f"the queries of {where}", records=records)
    check_qrels_ids(qrels, set(gallery.ids), side="gallery", where=f"the gallery of {where}", records=records)
    return SourcePair(queries, gallery, records)


def pair_row_counts(decl: Mapping[str, Any], *, base_dir: Path, where: str) -> tuple[int, int]:
    labels = _pair_rule(decl, where) is not None
    queries, gallery = (side_row_count(decl.get(side), base_dir=base_dir, where=f"{where}.{side}", labels=labels)
                        for side in ("queries", "gallery"))
    return queries, gallery


def _webdataset_sides(decl: Mapping[str, Any], base_dir: Path, where: str, read: Any) -> tuple[Any, Any]:
    """(queries, gallery): ``read`` of a ``webdataset`` side's WebDatasetSpec, None for the other kinds."""
    labels = _pair_rule(decl, where) is not None
    found = []
    for side in ("queries", "gallery"):
        kind, opts = _side_opts(decl.get(side), f"{where}.{side}", labels=labels)
        found.append(read(_spec(kind, opts, Path(base_dir), f"{where}.{side}")) if kind == "webdataset" else None)
    return found[0], found[1]


def pair_segments(decl: Mapping[str, Any], *, base_dir: Path, where: str) -> tuple[list[int] | None, list[int] | None]:
    """(queries, gallery) segment starts: a ``webdataset`` side's tar files (``wds_segments``), None for the others."""
    from vertebrae.data.sources.webdataset import wds_segments

    return _webdataset_sides(decl, base_dir, where, wds_segments)


def pair_tars(decl: Mapping[str, Any], *, base_dir: Path, where: str,
              digests: FileDigests) -> tuple[list[list] | None, list[list] | None]:
    """(queries, gallery) ``[[rows, sha256], ...]`` per tar file of a ``webdataset`` side (``wds_tars``), None for
    the others."""
    from vertebrae.data.sources.webdataset import wds_tars

    return _webdataset_sides(decl, base_dir, where, lambda spec: wds_tars(spec, digests))


def load_planned_side_rows(decl: Mapping[str, Any], side: str, tars: Any, *, base_dir: Path, where: str, start: int,
                           stop: int, digests: FileDigests) -> tuple[Any, list]:
    """Inputs and row ids of rows ``start:stop`` of a ``webdataset`` side (``queries`` | ``gallery``), opening only
    the tar files that hold them, checked against the plan's ``tars`` (``read_planned_rows``); labels not read."""
    from vertebrae.data.sources.webdataset import WebDatasetSpec, read_planned_rows

    kind, opts = _side_opts(decl.get(side), f"{where}.{side}", labels=False, strict=False)
    if kind != "webdataset":
        raise ValidationError(f"{where}.{side}: the plan records tar files, but the side is a {kind!r} source; re-plan")
    spec = WebDatasetSpec.from_decl({**opts, "label_key": "cls"}, base_dir=Path(base_dir), where=f"{where}.{side}",
                                    check_files=False)
    data = read_planned_rows(dataclasses.replace(spec, label_key=None), tars, (start, stop), digests)
    return data.inputs, list(data.row_ids)


def pair_files_recipe(decl: Mapping[str, Any], *, base_dir: Path, where: str, digests: FileDigests) -> dict[str, Any]:
    """The pair's ``files`` recipe: each side's (with its label options under ``same_label``) and the relevance."""
    rule = _pair_rule(decl, where)
    sides = {side: side_recipe(decl.get(side), base_dir=base_dir, where=f"{where}.{side}", digests=digests,
                               labels=rule is not None) for side in ("queries", "gallery")}
    relevance = rule if rule is not None else {"sha256": digests.digest(_relevance_file(decl, base_dir, where))}
    return {"type": "source_pair", **sides, "relevance": relevance}


def pair_endpoint_recipes(decl: Mapping[str, Any], *, base_dir: Path, where: str,
                          digests: FileDigests) -> dict[str, dict[str, Any]]:
    """What each endpoint's rows are read from: that side's files, never its labels nor the relevance."""
    _pair_rule(decl, where)
    return {side: {"type": "source_pair", "side": side_recipe(decl.get(name), base_dir=base_dir, where=f"{where}.{name}",
                                                              digests=digests, labels=False, strict=False)}
            for side, name in (("query", "queries"), ("gallery", "gallery"))}


__all__ = ["SourcePair", "load_source_pair", "pair_endpoint_recipes", "pair_files_recipe", "pair_row_counts", "pair_segments", "pair_tars",
           "load_planned_side_rows",
           "LABEL_KEYS", "RELEVANCE_RULES", "SIDE_TYPES", "SideRows", "load_side", "same_label_records", "side_recipe",
           "side_row_count"]
