"""Row-range reads of embedding artifacts: the rows a partial score needs, each chunk read verified against the
row-chunk hash table ``vertebrae.core.artifacts`` writes into the manifest, without reading the rest of the file."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from vertebrae.core.artifacts import (_chunk_arrays, _chunk_hash, _decode_ids, _fail, _h5_manifest, _layout, _open_h5,
                                      _verified_chunk_table, read_embeddings)
from vertebrae.core.errors import ValidationError


@dataclass(frozen=True)
class EmbeddingRows:
    """Rows of a verified embedding artifact (:func:`read_embedding_rows`): ``matrix`` / ``row_ids`` = rows
    [start, stop); ``picked`` / ``picked_ids`` = the rows ``picked_rows`` (ascending, unique), or None."""

    matrix: Any
    row_ids: tuple[str, ...]
    start: int
    stop: int
    picked: Any
    picked_ids: tuple[str, ...] | None
    picked_rows: Any
    manifest: dict
    path: str
    verified: str  # "chunks" (every chunk read verified) or "full" (no chunk hashes: the whole file verified)


def read_embedding_rows(path: str | os.PathLike, start: int, stop: int, *, fingerprint: str | None,
                        rows: Any = None) -> EmbeddingRows:
    """Rows [start, stop) of an embedding artifact, and optionally the rows ``rows`` (any row indices; returned
    ascending and unique), read and verified without reading the rest of the file.

    Verification: schema, fingerprint (when given), the manifest's own hash and the stored structure as
    :func:`read_embeddings` checks them; then the row-chunk hash table against the manifest, and every chunk of
    ``row_chunks.rows`` rows the read touches (a range is read out to its chunks' edges) against its hash. The
    whole-file content hash cannot be checked without reading the whole file and is not: a damaged byte in a chunk
    that is not read goes unnoticed until something reads that chunk. An artifact written before chunk hashes
    existed (no ``row_chunks`` in its manifest) falls back to full verification: the whole file is read and checked
    by :func:`read_embeddings` and the rows are taken from it (``verified == "full"``).
    """
    import numpy as np
    import scipy.sparse

    path = os.fspath(path)
    start, stop = int(start), int(stop)
    picked_rows = None if rows is None else np.unique(np.asarray(rows, dtype=np.int64))
    with _open_h5(path) as f:
        manifest = _h5_manifest(path, f, fingerprint)
        fmt, dtype, shape, nnz, node = _layout(path, f, manifest)
        n, width = int(shape[0]), int(shape[1])
        outside = not 0 <= start <= stop <= n or (picked_rows is not None and picked_rows.size > 0
                                                  and (picked_rows[0] < 0 or picked_rows[-1] >= n))
        chunks = None if outside else _verified_chunk_table(path, f, manifest)
        if chunks is None:
            full = None
        else:
            size, table = chunks
            wanted = set(range(start // size, -(-stop // size)))
            if picked_rows is not None:
                wanted.update((picked_rows // size).tolist())
            runs: list[list[int]] = []
            for k in sorted(wanted):
                if runs and runs[-1][1] == k:
                    runs[-1][1] = k + 1
                else:
                    runs.append([k, k + 1])
            pieces = []  # (first row, last row, matrix of those rows, their ids)
            for k0, k1 in runs:
                a, b = k0 * size, min(k1 * size, n)
                ids = _decode_ids(f["row_ids"][a:b])
                if fmt == "dense":
                    arrays = [node[a:b]]
                else:
                    indptr = node["indptr"][a:b + 1].astype(np.int64)
                    lo, hi = int(indptr[0]), int(indptr[-1])
                    if not 0 <= lo <= hi <= int(nnz) or np.any(np.diff(indptr) < 0):
                        raise _fail(path, f"malformed CSR data (indptr of rows [{a}, {b}))")
                    arrays = [node["data"][lo:hi], node["indices"][lo:hi].astype(np.int64), indptr]
                for k in range(k0, k1):
                    ca, cb = k * size, min((k + 1) * size, n)
                    digest = _chunk_hash(fmt, dtype, width, ca, cb, _chunk_arrays(fmt, arrays, ca, cb, base=a),
                                         ids[ca - a:cb - a])
                    if digest != table[k].tobytes():
                        raise _fail(path, f"row chunk {k} (rows [{ca}, {cb})) does not match its hash")
                if fmt == "dense":
                    matrix = arrays[0]
                else:
                    try:
                        matrix = scipy.sparse.csr_array((arrays[0], arrays[1], arrays[2] - arrays[2][0]),
                                                        shape=(b - a, width))
                        matrix.check_format(full_check=True)
                    except ValueError as exc:
                        raise _fail(path, f"malformed CSR data in rows [{a}, {b}) ({exc})") from exc
                pieces.append((a, b, matrix, ids))
            full = pieces
    if outside:  # raised outside the open file: a request, not damage (_open_h5 calls failures inside corrupt)
        bad = [int(i) for i in ([] if picked_rows is None else picked_rows) if not 0 <= i < n][:1]
        raise ValidationError(f"artifact {path}: " + (f"row index {bad[0]} is outside its {n} rows" if bad else
                                                      f"rows [{start}, {stop}) are outside its {n} rows"))
    if full is None:
        artifact = read_embeddings(path, fingerprint=fingerprint)
        matrix, ids = artifact.matrix, artifact.row_ids
        block = matrix[start:stop]
        block_ids = ids[start:stop]
        picked = picked_ids = None
        if picked_rows is not None:
            picked = matrix[picked_rows]
            picked_ids = tuple(ids[i] for i in picked_rows.tolist())
        return EmbeddingRows(block, tuple(block_ids), start, stop, picked, picked_ids, picked_rows, manifest, path, "full")

    def take(index: np.ndarray) -> tuple[Any, tuple[str, ...]]:
        """The rows ``index`` (ascending) from the pieces read."""
        parts, ids = [], []
        firsts = np.array([p[0] for p in full], dtype=np.int64)
        owner = np.searchsorted(firsts, index, side="right") - 1
        for j in np.unique(owner).tolist():
            a, _, matrix, piece_ids = full[j]
            local = index[owner == j] - a
            parts.append(matrix[local])
            ids.extend(piece_ids[i] for i in local.tolist())
        if not parts:
            empty = np.zeros((0, width), dtype=dtype)
            return (empty if fmt == "dense" else scipy.sparse.csr_array(empty)), ()
        if fmt == "dense":
            return (parts[0] if len(parts) == 1 else np.concatenate(parts)), tuple(ids)
        return scipy.sparse.vstack(parts, format="csr"), tuple(ids)

    block, block_ids = take(np.arange(start, stop, dtype=np.int64))
    picked = picked_ids = None
    if picked_rows is not None:
        picked, picked_ids = take(picked_rows)
    return EmbeddingRows(block, block_ids, start, stop, picked, picked_ids, picked_rows, manifest, path, "chunks")


__all__ = ["EmbeddingRows", "read_embedding_rows"]
