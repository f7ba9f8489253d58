"""Row-range reads of embedding artifacts (``read_embedding_rows``): exactly the rows asked for, every chunk read
verified against its hash, and a full verification for files written without chunk hashes."""

from __future__ import annotations

import h5py
import json
import numpy as np
import pytest
import scipy.sparse

from vertebrae.core.artifact_rows import read_embedding_rows
from vertebrae.core.artifacts import read_embeddings, write_embeddings
from vertebrae.core.errors import ArtifactError, CorruptArtifactError, ValidationError
from vertebrae.core.fingerprint import canonical_json, sha256_hex

FP = "0123456789abcdef"


def _ids(n):
    return [f"row-{i:03d}" for i in range(n)]


def _matrices(n=23, d=5):
    rng = np.random.default_rng(0)
    dense = rng.normal(size=(n, d)).astype(np.float32)
    sparse = scipy.sparse.csr_array(np.where(np.abs(dense) > 0.8, dense, 0).astype(np.float64))
    return {"dense": dense, "csr": sparse}


def _as_dense(m):
    return m.toarray() if scipy.sparse.issparse(m) else np.asarray(m)


@pytest.mark.parametrize("kind", ["dense", "csr"])
@pytest.mark.parametrize("chunk_rows", [1, 3, 7, 100, None])
def test_rows_and_picked_rows_equal_the_full_read(tmp_path, kind, chunk_rows):
    matrix = _matrices()[kind]
    path = tmp_path / "e.h5"
    manifest = write_embeddings(path, matrix, _ids(23), fingerprint=FP, recipe={"r": 1}, chunk_rows=chunk_rows)
    full = read_embeddings(path, fingerprint=FP)
    for start, stop, rows in ((0, 23, None), (5, 12, [22, 0, 5, 5, 13]), (22, 23, [1]), (7, 7, [3, 4]), (3, 9, [])):
        got = read_embedding_rows(path, start, stop, fingerprint=FP, rows=rows)
        assert got.verified == "chunks" and got.manifest == manifest
        np.testing.assert_array_equal(_as_dense(got.matrix), _as_dense(full.matrix)[start:stop])
        assert got.row_ids == full.row_ids[start:stop]
        assert scipy.sparse.issparse(got.matrix) == (kind == "csr")
        if rows is None:
            assert got.picked is None and got.picked_ids is None
        else:
            index = sorted(set(rows))
            assert got.picked_rows.tolist() == index
            np.testing.assert_array_equal(_as_dense(got.picked), _as_dense(full.matrix)[index])
            assert got.picked_ids == tuple(full.row_ids[i] for i in index)


def test_chunk_hashes_leave_the_content_hash_and_manifest_fields_as_they_were(tmp_path):
    dense = _matrices()["dense"]
    a = write_embeddings(tmp_path / "a.h5", dense, _ids(23), fingerprint=FP, recipe={}, chunk_rows=1)
    b = write_embeddings(tmp_path / "b.h5", dense, _ids(23), fingerprint=FP, recipe={})
    assert a["content_hash"] == b["content_hash"]
    assert a["row_chunks"]["rows"] == 1 and a["row_chunks"]["count"] == 23 and b["row_chunks"]["count"] == 1
    with pytest.raises(ValidationError, match="chunk_rows"):
        write_embeddings(tmp_path / "c.h5", dense, _ids(23), fingerprint=FP, recipe={}, chunk_rows=0)


@pytest.mark.parametrize("kind", ["dense", "csr"])
def test_a_damaged_chunk_is_refused_when_read_and_only_then(tmp_path, kind):
    path = tmp_path / "e.h5"
    write_embeddings(path, _matrices()[kind], _ids(23), fingerprint=FP, recipe={}, chunk_rows=4)
    with h5py.File(path, "r+") as f:
        if kind == "dense":
            f["embeddings"][18, 2] = 99.0  # row 18: chunk 4 (rows 16..19)
        else:
            data = f["embeddings"]["data"]
            data[int(f["embeddings"]["indptr"][18])] = 99.0
    assert read_embedding_rows(path, 0, 16, fingerprint=FP, rows=[20, 21]).verified == "chunks"  # chunk 4 unread
    for start, stop, rows in ((15, 17, None), (0, 2, [18])):
        with pytest.raises(CorruptArtifactError, match=r"row chunk 4 \(rows \[16, 20\)\) does not match its hash") as info:
            read_embedding_rows(path, start, stop, fingerprint=FP, rows=rows)
        assert str(path) in str(info.value)
    with pytest.raises(CorruptArtifactError, match="content hash mismatch"):
        read_embeddings(path, fingerprint=FP)


def test_damaged_row_ids_and_chunk_table_are_refused(tmp_path):
    path = tmp_path / "e.h5"
    write_embeddings(path, _matrices()["dense"], _ids(23), fingerprint=FP, recipe={}, chunk_rows=5)
    with h5py.File(path, "r+") as f:
        f["row_ids"][7] = b"row-999"
    with pytest.raises(CorruptArtifactError, match=r"row chunk 1 \(rows \[5, 10\)\)"):
        read_embedding_rows(path, 6, 7, fingerprint=FP)
    write_embeddings(path, _matrices()["dense"], _ids(23), fingerprint=FP, recipe={}, chunk_rows=5)
    with h5py.File(path, "r+") as f:
        f["row_chunks"][0, 0] ^= 1
    for read in (lambda: read_embedding_rows(path, 20, 21, fingerprint=FP), lambda: read_embeddings(path, fingerprint=FP)):
        with pytest.raises(CorruptArtifactError, match="row-chunk hash table mismatch"):
            read()


def test_stale_fingerprint_and_rows_outside_are_refused(tmp_path):
    path = tmp_path / "e.h5"
    write_embeddings(path, _matrices()["dense"], _ids(23), fingerprint=FP, recipe={})
    with pytest.raises(ArtifactError, match="stale artifact"):
        read_embedding_rows(path, 0, 1, fingerprint="fedcba9876543210")
    with pytest.raises(ValidationError, match=r"rows \[20, 24\) are outside its 23 rows"):
        read_embedding_rows(path, 20, 24, fingerprint=FP)
    with pytest.raises(ValidationError, match="row index 23 is outside"):
        read_embedding_rows(path, 0, 1, fingerprint=FP, rows=[3, 23])
    with pytest.raises(ArtifactError, match="file not found"):
        read_embedding_rows(tmp_path / "missing.h5", 0, 1, fingerprint=FP)


def test_an_artifact_without_chunk_hashes_falls_back_to_full_verification(tmp_path):
    path = tmp_path / "old.h5"
    matrix = _matrices()["dense"]
    write_embeddings(path, matrix, _ids(23), fingerprint=FP, recipe={})
    with h5py.File(path, "r+") as f:  # what a writer before chunk hashes produced
        manifest = json.loads(f.attrs["manifest"])
        del manifest["row_chunks"], f["row_chunks"]
        text = canonical_json(manifest)
        f.attrs["manifest"], f.attrs["manifest_sha256"] = text, sha256_hex(text)
    got = read_embedding_rows(path, 2, 6, fingerprint=FP, rows=[0, 22])
    assert got.verified == "full"
    np.testing.assert_array_equal(got.matrix, matrix[2:6])
    np.testing.assert_array_equal(got.picked, matrix[[0, 22]])
    with h5py.File(path, "r+") as f:
        f["embeddings"][20, 0] = 5.0  # far from the rows asked for: still found by the full verification
    with pytest.raises(CorruptArtifactError, match="content hash mismatch"):
        read_embedding_rows(path, 2, 6, fingerprint=FP)
