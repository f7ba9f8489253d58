"""Retrieval datasets declared in a workflow config.

Three declarations:

- ``{"type": "label_split", "source": <labelled source>, "query_every": 6, "grade": "label" | "label_and_mean"}``:
  rows ``i % query_every == 0`` of a labelled source (see ``sources.py``) are the queries, the other rows the
  gallery; a gallery row is relevant to a query with the same label (grade 1), and with ``label_and_mean``
  grade 2 when it also falls in the same tercile of the row mean (a second, independent signal).
- ``{"type": "npz_pair", "path": ..., "queries_key": "queries", "gallery_key": "gallery",
  "query_ids_key": "query_ids", "gallery_ids_key": "gallery_ids", "relevance_path": qrels.tsv}``: embeddings
  or features of both sides in one ``.npz`` and tab-separated ``query_id  gallery_id  grade`` records.
- ``{"type": "manifest_pair", "queries": <manifest>, "gallery": <manifest>, "relevance_path": qrels.tsv}``: raw
  inputs of each side from its own manifest (``path``, ``text_column`` or ``image_column``, ``id_column``,
  optional ``format``; see ``manifest.py``, without a label column), e.g. text queries against an image gallery,
  and the same relevance records as ``npz_pair``.
- ``{"type": "source_pair", "queries": <source>, "gallery": <source>, "relevance_path": qrels.tsv}`` (or
  ``"relevance": "same_label"`` instead of the file): each side read as it is held, a ``manifest``,
  ``hf_dataset``, ``image_folder`` or ``webdataset`` source declaration (see ``retrieval_sides.py``), e.g. the
  captions of a Hugging Face dataset against an image folder or WebDataset shards; ``same_label`` makes a gallery
  row relevant (grade 1) to every query with an equal label.
- ``{"type": "beir", "path": folder, "split": "test"}``: a BEIR folder (``corpus.jsonl``, ``queries.jsonl``,
  ``qrels/<split>.tsv``; see ``beir.py``): corpus texts as the gallery, the split's queries as the queries.

Relevance files are read by ``qrels.py`` (an optional header line, strict grades, UTF-8, lines named in errors);
every record's ids are checked against the sides when the source loads, and a side of integer ids (an ``.npz``)
reads the file's ids as integers.

Ids are kept as given (ints for row positions of a label split, strings from files).

Identity (:func:`retrieval_identity`): a declared ``identity`` when the dataset gives one, else the ``files``
identity of everything the source reads: the labelled source of a label split (with ``query_every`` and
``grade``), the ``.npz`` of a pair (with its keys), each side's manifest (and its images), each side's files of a source pair (with the relevance rule), a BEIR folder's three files
(with the split), and the relevance file; editing any of them (deleting a qrels line, say) changes the key and every fingerprint below it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from vertebrae.core.errors import ConfigError
from vertebrae.core.file_digests import FileDigests
from vertebrae.core.identity import DatasetIdentity
from vertebrae.core.inputs import RawInputs
from vertebrae.data.sources.beir import beir_endpoint_recipes, beir_files, beir_files_recipe, load_beir, parse_beir_decl
from vertebrae.data.declared.labelled import identity_from_decl
from vertebrae.data.sources.manifest import ManifestSpec, manifest_row_count, read_manifest
from vertebrae.data.sources.qrels import check_qrels_ids, read_qrels, typed_qrels
from vertebrae.data.declared.sides import (
    load_source_pair, pair_endpoint_recipes, pair_files_recipe, pair_row_counts, pair_segments,
)
from vertebrae.data.sources.files import manifest_recipe, source_files_recipe
from vertebrae.data.sources import GROUPS_KEYS, load_source, source_row_count
from vertebrae.data.sources.checks import open_npz
from vertebrae.data.sources.npz import _npz_array

GRADES = ("label", "label_and_mean")


@dataclass(frozen=True)
class RetrievalSourceData:
    queries: Any
    gallery: Any
    query_ids: list
    gallery_ids: list
    records: list[tuple[Any, Any, float]]

    def to_dataset(self, identity: Any, *, exclude_same_id: bool = False) -> Any:
        """The RetrievalDataset: raw inputs (RawInputs from a manifest) through ``from_arrays`` with their kind as
        modality, numeric rows through ``from_embeddings``."""
        from vertebrae.data.retrieval import RetrievalDataset

        common = {"query_ids": self.query_ids, "gallery_ids": self.gallery_ids, "identity": identity,
                  "exclude_same_id": exclude_same_id}
        if isinstance(self.queries, RawInputs):
            return RetrievalDataset.from_arrays(self.queries, self.gallery, self.records, query_modality=self.queries.kind,
                                                gallery_modality=self.gallery.kind, **common)
        return RetrievalDataset.from_embeddings(self.queries, self.gallery, self.records, **common)


def _split(decl: Mapping[str, Any], where: str) -> int:
    every = decl.get("query_every", 6)
    if isinstance(every, bool) or not isinstance(every, int) or every < 2:
        raise ConfigError(f"{where}.query_every: must be an integer >= 2, got {every!r}")
    if decl.get("grade", "label") not in GRADES:
        raise ConfigError(f"{where}.grade: must be one of {GRADES}, got {decl.get('grade')!r}")
    return every


def _label_split(decl: Mapping[str, Any], base_dir: Path, where: str) -> RetrievalSourceData:
    every = _split(decl, where)
    grouped = sorted(k for k in set(GROUPS_KEYS.values())
                     if isinstance(decl.get("source"), Mapping) and decl["source"].get(k) is not None)
    if grouped:
        raise ConfigError(f"{where}.source.{grouped[0]}: retrieval does not use independence groups; remove it")
    data = load_source(decl["source"], base_dir=base_dir, where=f"{where}.source")
    features = data.features
    n = features.shape[0]
    ids = list(range(n)) if data.row_ids is None else list(data.row_ids)
    is_query = np.arange(n) % every == 0
    q_rows, g_rows = np.flatnonzero(is_query), np.flatnonzero(~is_query)
    labels = np.asarray([repr(v) for v in data.labels], dtype=object)
    by_mean = decl.get("grade", "label") == "label_and_mean"
    if by_mean and data.labels_only is not None:
        raise ConfigError(f"{where}.grade: label_and_mean needs feature rows; {data.labels_only}")
    if by_mean and isinstance(features, RawInputs):
        raise ConfigError(f"{where}.grade: label_and_mean needs numeric rows; a manifest of {features.kind} rows takes grade 'label'")
    if by_mean:
        means = np.asarray(features.mean(axis=1)).ravel()
        terciles = np.searchsorted(np.quantile(means, [1 / 3, 2 / 3]), means, side="right")
    # every query's positives are the gallery rows of its label, in row order: group the gallery by label code
    # once (stable sort keeps row order within a label), then slice each query's run: O((q + g) log g + positives)
    _, codes = np.unique(labels, return_inverse=True)
    order = np.argsort(codes[g_rows], kind="stable")
    by_label, gallery_codes = g_rows[order], codes[g_rows][order]
    starts = np.searchsorted(gallery_codes, codes[q_rows], side="left")
    stops = np.searchsorted(gallery_codes, codes[q_rows], side="right")
    records = []
    for q, start, stop in zip(q_rows.tolist(), starts.tolist(), stops.tolist()):
        for g in by_label[start:stop].tolist():
            grade = 2.0 if by_mean and terciles[g] == terciles[q] else 1.0
            records.append((ids[q], ids[g], grade))
    return RetrievalSourceData(features[q_rows], features[g_rows], [ids[i] for i in q_rows], [ids[i] for i in g_rows], records)


def _resolve(base_dir: Path, value: Any, where: str) -> Path:
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{where}: a path is required")
    path = (base_dir / value).resolve()
    if not path.is_file():
        raise ConfigError(f"{where}: file not found: {path}")
    return path


def _records(path: Path, query_ids: list, gallery_ids: list, where: str) -> list[tuple[Any, Any, float]]:
    """The relevance file's records (``vertebrae.data.sources.qrels``), ids typed like the sides' (integer ids of an .npz
    read as integers), every id checked against its side, naming the file and lines."""
    qrels = read_qrels(path)
    records = typed_qrels(qrels, query_ids, gallery_ids)
    check_qrels_ids(qrels, set(query_ids), side="query", where=f"the queries of {where}", records=records)
    check_qrels_ids(qrels, set(gallery_ids), side="gallery", where=f"the gallery of {where}", records=records)
    return records


def _npz_pair(decl: Mapping[str, Any], base_dir: Path, where: str) -> RetrievalSourceData:
    path = _resolve(base_dir, decl.get("path"), f"{where}.path")
    with open_npz(path) as archive:  # a truncated or corrupt archive is refused naming the file
        arrays = {}
        for key, default in _NPZ_KEYS:
            name = decl.get(key, default)
            if name not in archive.files:
                raise ConfigError(f"{where}.{key}: {path} has no array {name!r}; it has {sorted(archive.files)}")
            arrays[default] = _npz_array(archive, name, path)
    query_ids, gallery_ids = arrays["query_ids"].tolist(), arrays["gallery_ids"].tolist()
    records = _records(_resolve(base_dir, decl.get("relevance_path"), f"{where}.relevance_path"), query_ids, gallery_ids,
                       where)
    return RetrievalSourceData(arrays["queries"], arrays["gallery"], query_ids, gallery_ids, records)


_MANIFEST_KEYS = ("path", "text_column", "image_column", "id_column", "format")


def _manifest_spec(decl: Any, base_dir: Path, where: str) -> ManifestSpec:
    """One side's manifest: rows matched by id (``id_column`` required), no label column."""
    if not isinstance(decl, Mapping):
        raise ConfigError(f"{where}: a manifest declaration ({', '.join(_MANIFEST_KEYS)}) is required")
    unknown = sorted(str(k) for k in decl if k not in _MANIFEST_KEYS)
    if unknown:
        raise ConfigError(f"{where}.{unknown[0]}: unknown key for a manifest; allowed keys: {', '.join(_MANIFEST_KEYS)}")
    for key in _MANIFEST_KEYS:
        value = decl.get(key)
        if value is not None and (not isinstance(value, str) or not value):
            raise ConfigError(f"{where}.{key}: must be a non-empty string, got {value!r}")
    for key, why in (("path", "the manifest file"), ("id_column", "the relevance records name rows by id")):
        if decl.get(key) is None:
            raise ConfigError(f"{where}.{key}: required ({why})")
    return ManifestSpec.from_decl({**decl, "label_column": None}, base_dir=base_dir, where=where)


def _manifest_pair(decl: Mapping[str, Any], base_dir: Path, where: str) -> RetrievalSourceData:
    sides = [read_manifest(_manifest_spec(decl.get(side), base_dir, f"{where}.{side}")) for side in ("queries", "gallery")]
    (queries, query_ids), (gallery, gallery_ids) = ((rows.inputs, rows.row_ids) for rows in sides)
    records = _records(_resolve(base_dir, decl.get("relevance_path"), f"{where}.relevance_path"), list(query_ids),
                       list(gallery_ids), where)
    return RetrievalSourceData(queries, gallery, list(query_ids), list(gallery_ids), records)


def _beir(decl: Mapping[str, Any], base_dir: Path, where: str) -> RetrievalSourceData:
    data = load_beir(*parse_beir_decl(decl, where), base_dir=base_dir, where=where)
    return RetrievalSourceData(RawInputs.texts(data.query_texts, data.query_ids),
                               RawInputs.texts(data.corpus_texts, data.corpus_ids), list(data.query_ids),
                               list(data.corpus_ids), list(data.records))


def _source_pair(decl: Mapping[str, Any], base_dir: Path, where: str) -> RetrievalSourceData:
    pair = load_source_pair(decl, base_dir=base_dir, where=where)
    return RetrievalSourceData(pair.queries.inputs, pair.gallery.inputs, pair.queries.ids, pair.gallery.ids,
                               pair.records)


#: The keys each retrieval source type takes besides ``type``.
RETRIEVAL_SOURCE_KEYS: dict[str, tuple[str, ...]] = {
    "label_split": ("source", "query_every", "grade"),
    "npz_pair": ("path", "queries_key", "gallery_key", "query_ids_key", "gallery_ids_key", "relevance_path"),
    "manifest_pair": ("queries", "gallery", "relevance_path"),
    "beir": ("path", "split"),
    "source_pair": ("queries", "gallery", "relevance_path", "relevance"),
}


def check_source_keys(decl: Any, where: str) -> str:
    """The retrieval source's type, after refusing an unknown type or a key of another type (which it would ignore),
    naming the key, the type and the types it belongs to."""
    if not isinstance(decl, Mapping):
        raise ConfigError(f"{where}: a retrieval source declaration must be a mapping, got {type(decl).__name__}")
    kind = decl.get("type")
    if kind not in RETRIEVAL_SOURCE_KEYS:
        raise ConfigError(f"{where}.type: unknown retrieval source {kind!r}; known: {sorted(RETRIEVAL_SOURCE_KEYS)}")
    allowed = RETRIEVAL_SOURCE_KEYS[kind]
    for key in decl:
        if key != "type" and key not in allowed:
            owners = [t for t, keys in RETRIEVAL_SOURCE_KEYS.items() if key in keys]
            belongs = f"a key of retrieval source type(s) {', '.join(owners)}" if owners else "an unknown key"
            raise ConfigError(f"{where}.{key}: {belongs}, not of type {kind!r}, which would ignore it; type {kind!r} "
                              f"takes {', '.join(allowed)}")
    return kind


LOADERS = {"beir": _beir, "label_split": _label_split, "manifest_pair": _manifest_pair, "npz_pair": _npz_pair,
           "source_pair": _source_pair}


def load_retrieval_source(decl: Mapping[str, Any], *, base_dir: Path, where: str) -> RetrievalSourceData:
    kind = check_source_keys(decl, where)
    return LOADERS[kind](decl, base_dir, where)


_NPZ_KEYS = (("queries_key", "queries"), ("gallery_key", "gallery"), ("query_ids_key", "query_ids"),
             ("gallery_ids_key", "gallery_ids"))


def retrieval_files_recipe(decl: Mapping[str, Any], *, base_dir: Path, where: str,
                           digests: FileDigests) -> dict[str, Any]:
    """The ``files`` identity recipe of a retrieval source: its options and the SHA-256 of every file it reads."""
    kind = check_source_keys(decl, where)
    if kind == "label_split":
        return {"type": kind, "query_every": _split(decl, where), "grade": decl.get("grade", "label"),
                "source": source_files_recipe(decl["source"], base_dir=base_dir, where=f"{where}.source", digests=digests)}
    if kind not in LOADERS:
        raise ConfigError(f"{where}.type: unknown retrieval source {kind!r}; known: {sorted(LOADERS)}")
    if kind == "beir":
        return beir_files_recipe(beir_files(*parse_beir_decl(decl, where), base_dir=base_dir, where=where), digests)
    if kind == "source_pair":
        return pair_files_recipe(decl, base_dir=base_dir, where=where, digests=digests)
    relevance = {"sha256": digests.digest(_resolve(base_dir, decl.get("relevance_path"), f"{where}.relevance_path"))}
    if kind == "npz_pair":
        keys = {key: decl.get(key, default) for key, default in _NPZ_KEYS}
        path = _resolve(base_dir, decl.get("path"), f"{where}.path")
        return {"type": kind, **keys, "path": {"sha256": digests.digest(path)}, "relevance": relevance}
    sides = {}
    for side in ("queries", "gallery"):
        spec = _manifest_spec(decl.get(side), base_dir, f"{where}.{side}")
        options = {key: decl[side].get(key) for key in _MANIFEST_KEYS}
        sides[side] = manifest_recipe(spec, options, digests)
    return {"type": kind, **sides, "relevance": relevance}


def retrieval_endpoint_recipes(decl: Mapping[str, Any], *, base_dir: Path, where: str,
                               digests: FileDigests) -> dict[str, dict[str, Any]]:
    """What each endpoint's rows are read from (query / gallery), without the relevance: a label split's source file
    and split, a pair's .npz and that side's keys, that side's manifest (and images), a BEIR folder's corpus, or its
    queries file and the split's query ids."""
    kind = check_source_keys(decl, where)
    if kind == "label_split":
        source = source_files_recipe(decl["source"], base_dir=base_dir, where=f"{where}.source", digests=digests)
        return {side: {"type": kind, "query_every": _split(decl, where), "source": source} for side in ("query", "gallery")}
    if kind == "beir":
        path, split = parse_beir_decl(decl, where)
        files = beir_files(path, split, base_dir=base_dir, where=where)
        return beir_endpoint_recipes(files, load_beir(path, split, base_dir=base_dir, where=where), digests)
    if kind == "source_pair":  # a side's rows, never its labels
        return pair_endpoint_recipes(decl, base_dir=base_dir, where=where, digests=digests)
    if kind == "npz_pair":
        digest = {"sha256": digests.digest(_resolve(base_dir, decl.get("path"), f"{where}.path"))}
        keys = {key: decl.get(key, default) for key, default in _NPZ_KEYS}
        return {side: {"type": kind, "path": digest, "rows": keys[f"{name}_key"], "ids": keys[f"{side}_ids_key"]}
                for side, name in (("query", "queries"), ("gallery", "gallery"))}
    recipes = {}
    for side, name in (("query", "queries"), ("gallery", "gallery")):
        spec = _manifest_spec(decl.get(name), base_dir, f"{where}.{name}")
        recipes[side] = {"type": kind, "manifest": manifest_recipe(spec, {key: decl[name].get(key) for key in _MANIFEST_KEYS},
                                                                   digests)}
    return recipes


def retrieval_endpoint_keys(dataset: Mapping[str, Any], *, base_dir: Path, where: str) -> dict[str, str]:
    """The key of each endpoint's rows (``RetrievalDataset.endpoint_key``), which names its embeddings: from the
    side's files without a declared identity (a relevance edit then re-embeds nothing, a corpus edit only the
    gallery), from the loaded rows for a ``content`` identity, else from the declared identity and the side."""
    from vertebrae.data.retrieval import endpoint_key

    if dataset.get("identity") is None:
        digests = FileDigests.under(base_dir)
        recipes = retrieval_endpoint_recipes(dataset["source"], base_dir=Path(base_dir), where=f"{where}.source",
                                             digests=digests)
        digests.save()
        return {side: endpoint_key({"files": recipe, "side": side}) for side, recipe in recipes.items()}
    identity = retrieval_identity(dataset, base_dir=base_dir, where=where)
    if identity.resolved:
        return {side: endpoint_key({"dataset": identity.key(), "side": side}) for side in ("query", "gallery")}
    data = load_retrieval_source(dataset["source"], base_dir=Path(base_dir), where=f"{where}.source")
    built = data.to_dataset(identity, exclude_same_id=dataset.get("exclude_same_id", False))
    return {side: built.endpoint_key(side) for side in ("query", "gallery")}


def retrieval_identity(dataset: Mapping[str, Any], *, base_dir: Path, where: str) -> DatasetIdentity:
    """The identity of a retrieval ``dataset`` declaration (``where`` names it): the declared ``identity``, else
    the ``files`` identity of its source (digests cached under ``base_dir``). A ``content`` identity comes back
    unresolved: :func:`retrieval_identity_key` resolves it."""
    if dataset.get("identity") is not None:
        return identity_from_decl(dataset["identity"], where=f"{where}.identity")
    digests = FileDigests.under(base_dir)
    recipe = retrieval_files_recipe(dataset["source"], base_dir=Path(base_dir), where=f"{where}.source", digests=digests)
    digests.save()
    return DatasetIdentity.from_files(recipe)


def retrieval_identity_key(dataset: Mapping[str, Any], *, base_dir: Path, where: str) -> str:
    """The identity key of a retrieval dataset declaration, as the dataset built from it reports it: a
    ``content`` identity loads the source and hashes it (a full pass, each time the workflow is planned)."""
    identity = retrieval_identity(dataset, base_dir=base_dir, where=where)
    if identity.resolved:
        return identity.key()
    data = load_retrieval_source(dataset["source"], base_dir=Path(base_dir), where=f"{where}.source")
    return data.to_dataset(identity, exclude_same_id=dataset.get("exclude_same_id", False)).identity_key()


def retrieval_row_counts(decl: Mapping[str, Any], *, base_dir: Path, where: str) -> tuple[int, int]:
    """(queries, gallery) row counts, cheaply where the format allows."""
    check_source_keys(decl, where)
    if decl.get("type") == "label_split":
        every = _split(decl, where)
        n = source_row_count(decl["source"], base_dir=base_dir, where=f"{where}.source")
        n_queries = (n + every - 1) // every
        return n_queries, n - n_queries
    if decl.get("type") == "manifest_pair":
        queries, gallery = (manifest_row_count(_manifest_spec(decl.get(side), base_dir, f"{where}.{side}"))
                            for side in ("queries", "gallery"))
        return queries, gallery
    if decl.get("type") == "source_pair":
        return pair_row_counts(decl, base_dir=base_dir, where=where)
    data = load_retrieval_source(decl, base_dir=base_dir, where=where)
    return len(data.query_ids), len(data.gallery_ids)


def retrieval_segments(decl: Mapping[str, Any], *, base_dir: Path, where: str) -> tuple[list[int] | None, list[int] | None]:
    """(queries, gallery) segment starts (``vertebrae.stages.common.shard_bounds``): where a side's rows come from
    a WebDataset source (a ``source_pair`` side, or the source of a ``label_split``), where its tar file changes, as
    ``tar_segments`` finds them in the rows; None for every other source (headers only, no row is read)."""
    if decl.get("type") == "source_pair":
        return pair_segments(decl, base_dir=base_dir, where=where)
    if decl.get("type") != "label_split":
        return None, None
    from vertebrae.data.sources.webdataset import source_segments

    starts = source_segments(decl.get("source"), base_dir=base_dir, where=f"{where}.source")
    if starts is None:
        return None, None
    n = source_row_count(decl["source"], base_dir=base_dir, where=f"{where}.source")
    tar = np.zeros(n, dtype=np.int64)
    tar[starts[1:]] = 1
    tar = np.cumsum(tar)
    is_query = np.arange(n) % _split(decl, where) == 0
    return tuple((None if not len(t) else [0] + (np.flatnonzero(np.diff(t)) + 1).tolist())  # type: ignore[return-value]
                 for t in (tar[is_query], tar[~is_query]))

