"""RetrievalDataset: independent query and gallery rows with an explicit relevance protocol.

Contract:

- Query and gallery rows have unique ids (str or int, typed: ``1`` and ``"1"`` differ; default the row order).
- Relevance is a query x gallery grade matrix (a NumPy array or any scipy sparse matrix/array, the latter read
  from its nonzeros without densification) or, for ANY other iterable (nested Python lists included), records
  ``(query_id, gallery_id, grade)``; a record ``(query_id, gallery_id)`` has grade 1. A nested-list *matrix*
  goes through ``from_relevance_matrix``. Grades are finite and >= 0; grade 0 and missing pairs are irrelevant,
  so the stored relevance (CSR float64, sorted indices) holds grades > 0 only.
- ``dataset.relevance`` is that CSR matrix (``RelevanceGrades``), also readable as the mapping
  ``{query_index: {gallery_index: grade}}`` (``relevance[q]``, ``items()``, ``dict(...)``).
- Exclusions (records ``(query_id, gallery_id)`` or a boolean matrix) remove pairs from both the candidates and
  the positives. ``exclude_same_id=True`` adds every pair whose query id equals a gallery id; without it equal
  ids are ordinary (valid) matches. The stored exclusions (CSR bool) hold the union.
- Every query keeps at least one eligible positive (grade > 0, not excluded).
- Embedding inputs are 2-D finite numeric matrices of one width; raw inputs (``from_arrays``) are kept as given.

``protocol_payload()`` is the strict JSON form of the protocol (ids as semantic keys, relevance records,
exclusions, ``exclude_same_id``); ``protocol_from_payload`` reads it back into a validated ``RetrievalProtocol``.
Relevance and exclusions are parsed in :mod:`vertebrae.data.relevance`; the protocol lives in
:mod:`vertebrae.data.relevance`.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp

from vertebrae.core.arrays import as_matrix, check_finite, encode_row_ids
from vertebrae.core.errors import IdentityError, ValidationError
from vertebrae.core.fingerprint import canonical_json
from vertebrae.core.identity import DatasetIdentity, require_identity
from vertebrae.core.inputs import RawInputs
from vertebrae.core.labels import describe_key
from vertebrae.data.relevance import QueryGallerySizes, RetrievalProtocol, _build_protocol

# ----------------------------------------------------------------------------------------------------------
# Inputs and content identity
# ----------------------------------------------------------------------------------------------------------


def _n_raw_rows(rows: Any, what: str) -> int:
    if isinstance(rows, (str, bytes, Mapping)):
        raise ValidationError(f"{what} must be a sequence of rows, got {type(rows).__name__}")
    if sp.issparse(rows) or isinstance(rows, np.ndarray):
        if rows.ndim == 0:
            raise ValidationError(f"{what} must hold rows, got a 0-d array")
        n = rows.shape[0]
    else:
        try:
            n = len(rows)
        except TypeError:
            raise ValidationError(
                f"{what} must be a sized sequence of rows (list, tuple, array), got {type(rows).__name__}"
            ) from None
    if n == 0:
        raise ValidationError(f"{what}: retrieval needs at least one row")
    return n


def _update_array(digest: Any, array: Any) -> None:
    if sp.issparse(array):
        m = sp.csr_matrix(array, copy=True)
        m.sum_duplicates()
        m.sort_indices()
        digest.update(f"csr|{m.dtype}|{m.shape}|".encode())
        parts = (m.data, m.indices.astype(np.int64), m.indptr.astype(np.int64))
    else:
        digest.update(f"dense|{array.dtype}|{array.shape}|".encode())
        parts = (array,)
    for part in parts:
        digest.update(np.ascontiguousarray(part).astype(part.dtype.newbyteorder("<"), copy=False).tobytes())


def _update_rows(digest: Any, rows: Any, keys: Sequence[str], what: str) -> None:
    """Hash an endpoint's rows: numeric/str arrays and sparse matrices whole, image paths by the bytes of the files
    (``RawInputs.digest``; before, the paths alone were hashed, so an edited image kept its key: those keys
    changed, on purpose), other sequences row by row."""
    if isinstance(rows, RawInputs) and rows.kind == "image":
        text = f"images|{rows.digest()}".encode()
        digest.update(f"{len(text)}|".encode())
        digest.update(text)
        return
    if sp.issparse(rows) or (isinstance(rows, np.ndarray) and rows.dtype.kind in "biufcUS"):
        _update_array(digest, rows)
        return
    digest.update(f"rows|{len(keys)}|".encode())
    for i, row in enumerate(rows):
        if isinstance(row, np.ndarray) and row.dtype.kind in "biufcUS":
            piece = hashlib.sha256()
            _update_array(piece, row)
            text = b"array|" + piece.hexdigest().encode()
        elif isinstance(row, (bytes, bytearray)):
            text = b"bytes|" + hashlib.sha256(bytes(row)).hexdigest().encode()
        else:
            try:
                text = b"json|" + canonical_json(row).encode()
            except ValidationError:
                raise IdentityError(
                    f"a from_content() identity cannot hash {what} row {describe_key(keys[i])} (index {i}) of type "
                    f"{type(row).__name__}; declare the identity instead: DatasetIdentity.declared(name, revision) "
                    "or DatasetIdentity.from_manifest(...)"
                ) from None
        digest.update(f"{len(text)}|".encode())
        digest.update(text)


def retrieval_content_digest(
    queries: Any, gallery: Any, protocol: RetrievalProtocol, query_modality: str, gallery_modality: str
) -> str:
    """SHA-256 over queries, gallery, ids, relevance, exclusions, exclude_same_id and the modalities."""
    digest = hashlib.sha256(b"vertebrae.retrieval-content/v1|")
    _update_rows(digest, queries, protocol.query_ids, "queries")
    _update_rows(digest, gallery, protocol.gallery_ids, "gallery")
    header = {
        "query_ids": list(protocol.query_ids), "gallery_ids": list(protocol.gallery_ids),
        "exclude_same_id": protocol.exclude_same_id, "modalities": [query_modality, gallery_modality],
    }
    text = canonical_json(header).encode()
    digest.update(f"{len(text)}|".encode())
    digest.update(text)
    _update_array(digest, protocol.relevance)
    _update_array(digest, protocol.exclusions)
    return digest.hexdigest()


#: Schema of an endpoint key (``endpoint_key``): what names a retrieval endpoint's embeddings (issue 27: before, the
#: whole dataset identity, relevance included, did, so a qrels edit re-embedded both sides).
ENDPOINT_SCHEMA = "vertebrae.retrieval-endpoint/v1"


def endpoint_key(recipe: Mapping[str, Any]) -> str:
    """The key of one retrieval endpoint's rows from its recipe (the files or content of that side, and the side)."""
    return "endpoint:v1:" + hashlib.sha256(canonical_json({"schema": ENDPOINT_SCHEMA, "endpoint": dict(recipe)})
                                            .encode()).hexdigest()


def _resolve_identity(identity: DatasetIdentity, digest_of) -> DatasetIdentity:
    if identity.kind != "content":
        return identity
    digest = digest_of()
    if identity.digest is not None and identity.digest != digest:
        raise IdentityError(
            f"content identity digest {identity.digest} does not match the retrieval dataset content ({digest}); "
            "the data changed since the identity was computed"
        )
    return identity.with_content_digest(digest)


def _check_modality(value: Any, what: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValidationError(f"{what} must be a non-empty string, got {value!r}")
    return value


class RelevanceGrades(sp.csr_matrix):
    """The stored relevance: a CSR float64 query x gallery grade matrix that also reads as the mapping
    ``{query_index: {gallery_index: grade}}`` (grades > 0; exclusions not applied), the established library's form.

    Matrix use is unchanged (``r[i, j]``, ``r.toarray()``, ``r.nnz``, arithmetic). Mapping use: ``r[q]`` is query
    ``q``'s ``{gallery_index: grade}`` dict (a KeyError outside ``0..n_queries-1``), ``len(r)`` the number of
    queries, iteration the query indices, ``keys()`` / ``values()`` / ``items()`` / ``get()``, ``dict(r)``, and
    ``r == {...}`` compares with a nested dict.
    """

    def _row(self, q: int) -> dict[int, float]:
        start, stop = self.indptr[q], self.indptr[q + 1]
        return {int(g): float(v) for g, v in zip(self.indices[start:stop], self.data[start:stop])}

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, (int, np.integer)) and not isinstance(key, (bool, np.bool_)):
            if not 0 <= key < self.shape[0]:
                raise KeyError(key)
            return self._row(int(key))
        return super().__getitem__(key)

    def __len__(self) -> int:
        return self.shape[0]

    def __iter__(self):
        return iter(range(self.shape[0]))

    def __contains__(self, key: Any) -> bool:
        return isinstance(key, (int, np.integer)) and not isinstance(key, (bool, np.bool_)) and 0 <= key < self.shape[0]

    def keys(self) -> range:
        return range(self.shape[0])

    def values(self) -> list[dict[int, float]]:
        return [self._row(q) for q in range(self.shape[0])]

    def items(self) -> list[tuple[int, dict[int, float]]]:
        return [(q, self._row(q)) for q in range(self.shape[0])]

    def get(self, key: Any, default: Any = None) -> Any:
        return self[key] if key in self else default

    def to_dict(self) -> dict[int, dict[int, float]]:
        return dict(self.items())

    def __eq__(self, other: Any) -> Any:
        if isinstance(other, Mapping):
            return self.to_dict() == {k: dict(v) for k, v in other.items()}
        return super().__eq__(other)

    def __ne__(self, other: Any) -> Any:
        if isinstance(other, Mapping):
            return not self.__eq__(other)
        return super().__ne__(other)

    __hash__ = None  # type: ignore[assignment]  # mutable, like every scipy matrix


def _plain_csr(matrix: Any) -> Any:
    """A RelevanceGrades handed back in (e.g. ``RetrievalDataset(..., ds.relevance, ...)``) as a plain CSR matrix."""
    return sp.csr_matrix(matrix) if isinstance(matrix, RelevanceGrades) else matrix


@dataclass(frozen=True)
class _GradeMatrix:
    """Relevance handed over by ``from_relevance_matrix``: read as a query x gallery matrix, nested lists too."""

    grades: Any


# ----------------------------------------------------------------------------------------------------------
# The dataset
# ----------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class RetrievalDataset(QueryGallerySizes):
    """Validated query and gallery rows with their relevance protocol.

    Build it with ``from_embeddings``, ``from_relevance_matrix`` (a nested-list matrix) or ``from_arrays`` (raw
    inputs for extractors). Direct construction checks the structural invariants (shapes, ids, canonical CSR,
    eligible positives, resolved identity).
    """

    queries: Any
    gallery: Any
    query_ids: tuple[str, ...]
    gallery_ids: tuple[str, ...]
    relevance: sp.csr_matrix
    exclusions: sp.csr_matrix
    identity: DatasetIdentity
    query_modality: str = "embedding"
    gallery_modality: str = "embedding"
    exclude_same_id: bool = False
    metadata: Mapping[str, Any] = field(default_factory=dict)
    endpoint_keys: Mapping[str, str] | None = None

    def __post_init__(self) -> None:
        identity = require_identity(self.identity, what="retrieval dataset")
        if not identity.resolved:
            raise IdentityError("a from_content() identity must be resolved; build the dataset with a constructor")
        _check_modality(self.query_modality, "query_modality")
        _check_modality(self.gallery_modality, "gallery_modality")
        protocol = RetrievalProtocol(
            self.query_ids, self.gallery_ids, _plain_csr(self.relevance), self.exclusions, self.exclude_same_id
        )
        for rows, ids, what, modality in (
            (self.queries, self.query_ids, "queries", self.query_modality),
            (self.gallery, self.gallery_ids, "gallery", self.gallery_modality),
        ):
            n_rows = _n_raw_rows(rows, what)
            if n_rows != len(ids):
                raise ValidationError(f"{what}: {n_rows} rows for {len(ids)} ids")
            if modality == "embedding" and not (
                (isinstance(rows, np.ndarray) and rows.ndim == 2) or isinstance(rows, sp.csr_matrix)
            ):
                raise ValidationError(
                    f"{what}: embeddings must be a 2-D array or CSR matrix, got {type(rows).__name__}"
                )
        both = self.query_modality == self.gallery_modality == "embedding"
        if both and self.queries.shape[1] != self.gallery.shape[1]:
            raise ValidationError(
                f"query embeddings have {self.queries.shape[1]} dimensions but gallery embeddings "
                f"{self.gallery.shape[1]}"
            )
        if self.endpoint_keys is not None:
            keys = dict(self.endpoint_keys)
            if set(keys) != {"query", "gallery"} or not all(isinstance(v, str) and v for v in keys.values()):
                raise ValidationError(f"endpoint_keys must map 'query' and 'gallery' to keys, got {keys!r}")
            object.__setattr__(self, "endpoint_keys", keys)
        object.__setattr__(self, "_protocol", protocol)
        object.__setattr__(self, "relevance", RelevanceGrades(protocol.relevance))
        object.__setattr__(self, "metadata", dict(self.metadata))

    # --- constructors -------------------------------------------------------------------------------------

    @classmethod
    def from_embeddings(
        cls,
        query_embeddings: Any,
        gallery_embeddings: Any,
        relevance: Any,
        *,
        query_ids: Sequence[Any] | None = None,
        gallery_ids: Sequence[Any] | None = None,
        identity: DatasetIdentity | None,
        exclusions: Any = None,
        exclude_same_id: bool = False,
        metadata: Mapping[str, Any] | None = None,
    ) -> RetrievalDataset:
        """Precomputed embeddings (dense or scipy sparse) with a grade matrix or relevance records.

        ``relevance``: a NumPy array or scipy sparse matrix of shape (n_queries, n_gallery), or an iterable of
        records ``(query_id, gallery_id, grade)`` / ``(query_id, gallery_id)``; a nested Python list is records.
        """
        identity = require_identity(identity, what="retrieval dataset")
        q = as_matrix(query_embeddings, what="queries")
        g = as_matrix(gallery_embeddings, what="gallery")
        for m, what in ((q, "queries"), (g, "gallery")):
            if m.shape[0] == 0:
                raise ValidationError(f"{what}: retrieval needs at least one row")
        if q.shape[1] != g.shape[1]:
            raise ValidationError(
                f"query embeddings have {q.shape[1]} dimensions but gallery embeddings have {g.shape[1]}; "
                "both sides must share one embedding space"
            )
        q_keys = encode_row_ids(query_ids, q.shape[0], what="queries")
        g_keys = encode_row_ids(gallery_ids, g.shape[0], what="gallery")
        check_finite(q, q_keys, what="queries")
        check_finite(g, g_keys, what="gallery")
        matrix = isinstance(relevance, _GradeMatrix)
        return cls._assemble(q, g, q_keys, g_keys, relevance.grades if matrix else relevance, exclusions,
                             exclude_same_id, identity, ("embedding", "embedding"), metadata, matrix=matrix)

    @classmethod
    def from_relevance_matrix(
        cls, query_embeddings: Any, gallery_embeddings: Any, matrix: Any, **keywords: Any
    ) -> RetrievalDataset:
        """Embeddings with an explicit query x gallery grade matrix: nested lists, NumPy or scipy sparse. The
        keywords are those of ``from_embeddings``."""
        return cls.from_embeddings(query_embeddings, gallery_embeddings, _GradeMatrix(matrix), **keywords)

    @classmethod
    def from_arrays(
        cls,
        queries: Any,
        gallery: Any,
        relevance: Any,
        *,
        query_ids: Sequence[Any] | None = None,
        gallery_ids: Sequence[Any] | None = None,
        query_modality: str = "text",
        gallery_modality: str = "text",
        identity: DatasetIdentity | None,
        exclusions: Any = None,
        exclude_same_id: bool = False,
        metadata: Mapping[str, Any] | None = None,
    ) -> RetrievalDataset:
        """Raw inputs (strings, image arrays, feature rows...) that extractors embed; kept exactly as given."""
        identity = require_identity(identity, what="retrieval dataset")
        for value, what in ((query_modality, "query_modality"), (gallery_modality, "gallery_modality")):
            _check_modality(value, what)
            if value == "embedding":
                raise ValidationError(
                    f"{what}='embedding' is for precomputed embeddings: use RetrievalDataset.from_embeddings"
                )
        q_keys = encode_row_ids(query_ids, _n_raw_rows(queries, "queries"), what="queries")
        g_keys = encode_row_ids(gallery_ids, _n_raw_rows(gallery, "gallery"), what="gallery")
        return cls._assemble(queries, gallery, q_keys, g_keys, relevance, exclusions, exclude_same_id, identity,
                             (query_modality, gallery_modality), metadata, matrix=False)

    @classmethod
    def from_beir(
        cls,
        path: Any,
        split: str = "test",
        *,
        identity: DatasetIdentity | None = None,
        exclude_same_id: bool = False,
        metadata: Mapping[str, Any] | None = None,
    ) -> RetrievalDataset:
        """A BEIR folder (``corpus.jsonl``, ``queries.jsonl``, ``qrels/<split>.tsv``; ``.jsonl.gz`` too), read as
        ``source: {type: beir}`` reads it (``vertebrae.data.sources.beir``): corpus texts (title + " " + text) as the text
        gallery, the queries with a relevance record in ``split`` as text queries. ``identity`` defaults to the
        files' identity (the SHA-256 of the three files and the split), the one the workflow gives the same folder."""
        from dataclasses import replace

        from vertebrae.core.file_digests import FileDigests
        from vertebrae.data.sources.beir import beir_endpoint_recipes, beir_files, beir_files_recipe, load_beir

        files = beir_files(path, split, where="from_beir")
        data = load_beir(path, split, where="from_beir")
        keys = None
        if identity is None:
            digests = FileDigests(None)
            identity = DatasetIdentity.from_files(beir_files_recipe(files, digests))
            keys = {side: endpoint_key({"files": recipe, "side": side})
                    for side, recipe in beir_endpoint_recipes(files, data, digests).items()}
        dataset = cls.from_arrays(RawInputs.texts(data.query_texts, data.query_ids),
                               RawInputs.texts(data.corpus_texts, data.corpus_ids), list(data.records),
                               query_ids=list(data.query_ids), gallery_ids=list(data.corpus_ids), identity=identity,
                               exclude_same_id=exclude_same_id, metadata=metadata)
        return dataset if keys is None else replace(dataset, endpoint_keys=keys)

    @classmethod
    def from_sources(
        cls,
        queries: Mapping[str, Any],
        gallery: Mapping[str, Any],
        *,
        relevance_path: Any = None,
        relevance: str | None = None,
        identity: DatasetIdentity | None = None,
        exclude_same_id: bool = False,
        metadata: Mapping[str, Any] | None = None,
    ) -> RetrievalDataset:
        """Each side as it is held, a source declaration (``{"type": "hf_dataset", "path": ..., "text_column":
        "caption", "id_column": "id"}``, ``{"type": "image_folder", "path": ...}``, ``{"type": "webdataset",
        "path": "shards/{000..009}.tar"}`` or a ``manifest``; relative paths: the working folder), read as ``source:
        {type: source_pair}`` reads them (``vertebrae.data.declared.sides``), with relevance from ``relevance_path``
        (records naming rows by id) or ``relevance="same_label"``. ``identity`` defaults to the files' identity, the
        one the workflow gives the same data, and each side's embeddings are keyed by that side's files alone."""
        from dataclasses import replace
        from pathlib import Path

        from vertebrae.core.file_digests import FileDigests
        from vertebrae.data.declared.sides import load_source_pair, pair_endpoint_recipes, pair_files_recipe

        decl = {"type": "source_pair", "queries": dict(queries), "gallery": dict(gallery), "relevance": relevance,
                "relevance_path": None if relevance_path is None else os.fspath(relevance_path)}
        base, where = Path.cwd(), "from_sources"
        pair = load_source_pair(decl, base_dir=base, where=where)
        keys = None
        if identity is None:
            digests = FileDigests(None)
            identity = DatasetIdentity.from_files(pair_files_recipe(decl, base_dir=base, where=where, digests=digests))
            keys = {side: endpoint_key({"files": recipe, "side": side}) for side, recipe in
                    pair_endpoint_recipes(decl, base_dir=base, where=where, digests=digests).items()}
        dataset = cls.from_arrays(pair.queries.inputs, pair.gallery.inputs, pair.records, query_ids=pair.queries.ids,
                                  gallery_ids=pair.gallery.ids, query_modality=pair.queries.inputs.kind,
                                  gallery_modality=pair.gallery.inputs.kind, identity=identity,
                                  exclude_same_id=exclude_same_id, metadata=metadata)
        return dataset if keys is None else replace(dataset, endpoint_keys=keys)

    @classmethod
    def _assemble(cls, queries, gallery, q_keys, g_keys, relevance, exclusions, exclude_same_id, identity,
                  modalities: tuple[str, str], metadata, *, matrix: bool) -> RetrievalDataset:
        """The protocol over the parsed ids, the identity resolved against the content, then the dataset."""
        protocol = _build_protocol(relevance, exclusions, exclude_same_id, q_keys, g_keys, matrix=matrix)
        identity = _resolve_identity(identity, lambda: retrieval_content_digest(queries, gallery, protocol, *modalities))
        return cls(queries, gallery, q_keys, g_keys, protocol.relevance, protocol.exclusions, identity, *modalities,
                   exclude_same_id, dict(metadata or {}))

    # --- views --------------------------------------------------------------------------------------------

    @property
    def protocol(self) -> RetrievalProtocol:
        return self._protocol  # type: ignore[attr-defined]

    def identity_key(self) -> str:
        return self.identity.key()

    def endpoint_key(self, side: str) -> str:
        """The identity of one endpoint's rows (``side``: query or gallery), which names its embeddings: given
        (``endpoint_keys``: the workflow's, from the files of that side), else for a ``content`` identity the digest
        of the side's ids and rows, else the dataset's identity with the side. Never relevance or exclusions, so a
        relevance edit re-scores and never re-embeds (with a content or files identity)."""
        if side not in ("query", "gallery"):
            raise ValidationError(f"side must be 'query' or 'gallery', got {side!r}")
        if self.endpoint_keys is not None:
            return self.endpoint_keys[side]
        cached = self.__dict__.setdefault("_endpoint_keys", {})
        if side not in cached:
            if self.identity.kind == "content":
                rows, ids, modality = ((self.queries, self.query_ids, self.query_modality) if side == "query" else
                                       (self.gallery, self.gallery_ids, self.gallery_modality))
                digest = hashlib.sha256(f"{ENDPOINT_SCHEMA}|content|{modality}|".encode())
                _update_rows(digest, rows, ids, side)
                digest.update(canonical_json(list(ids)).encode())
                cached[side] = endpoint_key({"content": digest.hexdigest(), "side": side})
            else:
                cached[side] = endpoint_key({"dataset": self.identity_key(), "side": side})
        return cached[side]

    def relevance_records(self) -> list[tuple[str, str, float]]:
        """``(query_key, gallery_key, grade)`` for every grade > 0, in query then gallery row order."""
        return self.protocol.relevance_records()

    def relevance_dict(self) -> dict[int, dict[int, float]]:
        """``{query_index: {gallery_index: grade}}`` (grades > 0; exclusions not applied); ``relevance`` reads the
        same way (``dataset.relevance[q]``)."""
        return self.relevance.to_dict()

    def eligible_relevance(self) -> sp.csr_matrix:
        """Relevance with the excluded pairs removed (what metrics score)."""
        return self.protocol.eligible_relevance()

    def protocol_payload(self) -> dict[str, Any]:
        return self.protocol.to_payload()

    @staticmethod
    def protocol_from_payload(payload: Any) -> RetrievalProtocol:
        return RetrievalProtocol.from_payload(payload)

    def transposed(self) -> RetrievalDataset:
        """The reverse direction for bidirectional scoring: gallery rows become queries, relevance and
        exclusions are transposed; every gallery item must then have an eligible positive. Same identity."""
        reverse = self.protocol.transposed()
        keys = None if self.endpoint_keys is None else {"query": self.endpoint_keys["gallery"],
                                                         "gallery": self.endpoint_keys["query"]}
        return RetrievalDataset(
            self.gallery, self.queries, reverse.query_ids, reverse.gallery_ids, reverse.relevance, reverse.exclusions,
            self.identity, self.gallery_modality, self.query_modality, self.exclude_same_id, dict(self.metadata), keys,
        )

    def summary(self) -> dict[str, Any]:
        eligible = self.eligible_relevance()
        grades = self.relevance.data
        return {
            "identity": self.identity.key(),
            "n_queries": self.n_queries,
            "n_gallery": self.n_gallery,
            "n_positives": int(self.relevance.nnz),
            "n_eligible_positives": int(eligible.nnz),
            "mean_positives_per_query": float(self.relevance.nnz / self.n_queries),
            "mean_eligible_positives_per_query": float(eligible.nnz / self.n_queries),
            "n_exclusions": int(self.exclusions.nnz),
            "exclude_same_id": self.exclude_same_id,
            "grade_min": float(grades.min()),
            "grade_max": float(grades.max()),
            "query_modality": self.query_modality,
            "gallery_modality": self.gallery_modality,
        }
