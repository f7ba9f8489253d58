"""Artifact I/O: round trips, atomic writes and verification of corrupt, stale or foreign artifacts."""

from __future__ import annotations

import json
import os

import h5py
import numpy as np
import pytest
import scipy.sparse

from vertebrae.core.artifacts import (
    EmbeddingArtifact,
    atomic_write,
    read_embeddings,
    read_json_artifact,
    read_manifest,
    write_embeddings,
    write_json,
    write_json_artifact,
)
from vertebrae.core.errors import ArtifactError, ValidationError
from vertebrae.core.fingerprint import SCHEMAS, canonical_json, sha256_hex

FP = "0123456789abcdef"
OTHER_FP = "fedcba9876543210"
RECIPE = {"backbone": "toy", "layer": 3}


def _ids(n: int) -> list[str]:
    return [f"row-{i:04d}-é" for i in range(n)]


def _dense(dtype=np.float32, n=6, d=4, offset=0.0) -> np.ndarray:
    return (np.arange(n * d, dtype=np.float64).reshape(n, d) * 0.3731 + 1.2345 + offset).astype(dtype)


def _write(path, matrix, fp=FP, **kw):
    return write_embeddings(path, matrix, _ids(matrix.shape[0]), fingerprint=fp, recipe=RECIPE, **kw)


def _set_manifest(f, text) -> None:
    """Replace an HDF5 artifact's manifest as a deliberate writer would: with its matching manifest hash."""
    f.attrs["manifest"] = text
    f.attrs["manifest_sha256"] = sha256_hex(text)


def _leftovers(directory) -> list[str]:
    return [name for name in os.listdir(directory) if ".tmp-" in name]


# ------------------------------------------------------------------------------------------ round trips


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_dense_round_trip(tmp_path, dtype):
    matrix = _dense(dtype)
    path = tmp_path / "emb.h5"
    manifest = _write(path, matrix, metadata={"note": "x"})
    art = read_embeddings(path, fingerprint=FP)
    assert isinstance(art, EmbeddingArtifact)
    assert isinstance(art.matrix, np.ndarray) and art.matrix.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(art.matrix, matrix)
    assert art.row_ids == tuple(_ids(6))
    assert art.manifest == manifest and art.path == str(path)
    assert manifest["schema"] == SCHEMAS["embedding"] == "vertebrae.embedding/v1"
    assert manifest["fingerprint"] == FP and manifest["format"] == "dense"
    assert manifest["shape"] == [6, 4] and manifest["dtype"] == np.dtype(dtype).name
    assert manifest["nnz"] is None and manifest["recipe"] == RECIPE and manifest["metadata"] == {"note": "x"}
    assert len(manifest["content_hash"]) == 64
    with h5py.File(path, "r") as f:
        assert f.attrs["manifest"] == canonical_json(manifest)
        assert f["embeddings"].dtype == np.dtype(dtype)
    assert read_manifest(path) == manifest
    assert read_embeddings(path, fingerprint=None).manifest == manifest


def test_csr_round_trip_stays_sparse(tmp_path):
    coo = scipy.sparse.coo_matrix(
        (np.array([1.5, 2.0, -3.25, 0.5, 4.0], dtype=np.float32),
         (np.array([0, 2, 2, 0, 3]), np.array([3, 1, 0, 3, 2]))), shape=(5, 4))  # duplicate at (0, 3)
    original = coo.copy()
    path = tmp_path / "sparse.h5"
    manifest = _write(path, coo)
    np.testing.assert_array_equal(coo.toarray(), original.toarray())  # caller's matrix untouched
    assert coo.nnz == 5
    art = read_embeddings(path, fingerprint=FP)
    assert scipy.sparse.issparse(art.matrix) and art.matrix.format == "csr"
    assert art.matrix.dtype == np.float32 and art.matrix.shape == (5, 4)
    assert art.matrix.nnz == 4 == manifest["nnz"]  # duplicates summed
    np.testing.assert_array_equal(art.matrix.toarray(), coo.toarray())
    assert manifest["format"] == "csr" and manifest["dtype"] == "float32" and manifest["shape"] == [5, 4]
    assert art.row_ids == tuple(_ids(5))
    with h5py.File(path, "r") as f:
        assert set(f["embeddings"]) == {"data", "indices", "indptr"}
        assert list(f["embeddings"].attrs["shape"]) == [5, 4]


def test_csr_hash_is_canonical(tmp_path):
    dense = np.array([[0, 1.0, 2.0], [3.0, 0, 0]])
    csr = scipy.sparse.csr_matrix(dense)
    unsorted = scipy.sparse.csr_matrix((csr.data[[1, 0, 2]], csr.indices[[1, 0, 2]], csr.indptr), shape=(2, 3))
    assert not unsorted.has_sorted_indices
    a = _write(tmp_path / "a.h5", csr)
    b = _write(tmp_path / "b.h5", unsorted)
    c = _write(tmp_path / "c.h5", scipy.sparse.csc_array(dense))
    assert a["content_hash"] == b["content_hash"] == c["content_hash"]
    assert a["content_hash"] != _write(tmp_path / "d.h5", dense)["content_hash"]  # dense differs from csr


def test_invalid_inputs_refused_before_writing(tmp_path):
    path = tmp_path / "bad.h5"
    with pytest.raises(ValidationError, match="dtype"):
        _write(path, np.ones((2, 2), dtype=np.int64))
    with pytest.raises(ValidationError, match="dtype"):
        _write(path, scipy.sparse.csr_matrix(np.eye(2, dtype=np.int32)))
    with pytest.raises(ValidationError, match="2-D"):
        _write(path, np.ones(3))
    with pytest.raises(ValidationError, match="3 row ids for a matrix of 2 rows"):
        write_embeddings(path, np.ones((2, 2)), ["a", "b", "c"], fingerprint=FP, recipe={})
    with pytest.raises(ValidationError, match="index 1"):
        write_embeddings(path, np.ones((2, 2)), ["a", 7], fingerprint=FP, recipe={})
    with pytest.raises(ValidationError, match=r"\$\.metadata\.a"):
        write_embeddings(path, np.ones((1, 2)), ["a"], fingerprint=FP, recipe={}, metadata={"a": float("inf")})
    assert os.listdir(tmp_path) == []


# ---------------------------------------------------------------------------------------- atomic writes


def test_atomic_write_replaces_and_cleans_up(tmp_path):
    target = tmp_path / "deep" / "er" / "out.txt"
    with atomic_write(target) as tmp:
        assert os.path.dirname(tmp) == str(target.parent)
        assert os.path.basename(tmp).startswith(".out.txt.tmp-")
        assert not target.exists()
        with open(tmp, "w") as fh:
            fh.write("new")
    assert target.read_text() == "new"
    with pytest.raises(RuntimeError, match="boom"):
        with atomic_write(target) as tmp:
            with open(tmp, "w") as fh:
                fh.write("half")
            raise RuntimeError("boom")
    assert target.read_text() == "new"
    assert _leftovers(target.parent) == []


def test_failed_hdf5_write_leaves_previous_artifact(tmp_path, monkeypatch):
    path = tmp_path / "emb.h5"
    matrix = _dense()
    _write(path, matrix)

    def boom(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(h5py.Group, "create_dataset", boom)
    with pytest.raises(OSError, match="disk full"):
        _write(path, _dense(offset=1.0))
    monkeypatch.undo()
    assert _leftovers(tmp_path) == []
    np.testing.assert_array_equal(read_embeddings(path, fingerprint=FP).matrix, matrix)


# ----------------------------------------------------------------------------- corrupt or foreign files


def test_missing_and_garbage_files(tmp_path):
    missing = tmp_path / "nope.h5"
    with pytest.raises(ArtifactError, match="not found") as info:
        read_embeddings(missing, fingerprint=None)
    assert str(missing) in str(info.value)
    garbage = tmp_path / "garbage.h5"
    garbage.write_bytes(b"definitely not hdf5" * 100)
    for reader in (lambda p: read_embeddings(p, fingerprint=None), read_manifest):
        with pytest.raises(ArtifactError) as info:
            reader(garbage)
        assert str(garbage) in str(info.value)


@pytest.mark.parametrize("sparse", [False, True])
def test_truncated_file_refused(tmp_path, sparse):
    path = tmp_path / "emb.h5"
    matrix = _dense(n=200, d=16)
    _write(path, scipy.sparse.csr_array(matrix) if sparse else matrix)
    raw = path.read_bytes()
    path.write_bytes(raw[: len(raw) // 2])
    with pytest.raises(ArtifactError) as info:
        read_embeddings(path, fingerprint=FP)
    assert str(path) in str(info.value)


def test_flipped_data_bytes_detected(tmp_path):
    path = tmp_path / "emb.h5"
    matrix = _dense(np.float64, n=50, d=8)
    _write(path, matrix)
    raw = bytearray(path.read_bytes())
    start = raw.find(matrix.astype("<f8").tobytes())
    assert start > 0
    raw[start + 100] ^= 0xFF
    path.write_bytes(bytes(raw))
    with pytest.raises(ArtifactError, match="content hash mismatch") as info:
        read_embeddings(path, fingerprint=FP)
    assert str(path) in str(info.value)
    assert read_manifest(path)["fingerprint"] == FP  # the light reader does not hash content


def test_tampered_row_id_detected(tmp_path):
    path = tmp_path / "emb.h5"
    _write(path, scipy.sparse.csr_array(_dense()))
    raw = path.read_bytes()
    needle = "row-0003-é".encode()
    assert raw.count(needle) == 1
    path.write_bytes(raw.replace(needle, "row-0009-é".encode()))
    with pytest.raises(ArtifactError, match="content hash mismatch"):
        read_embeddings(path, fingerprint=FP)


def _copy_manifest(src, dst):
    with h5py.File(src, "r") as f:
        text = f.attrs["manifest"]
    with h5py.File(dst, "r+") as f:
        _set_manifest(f, text)


def test_swapped_manifest_refused(tmp_path):
    a, b, c = tmp_path / "a.h5", tmp_path / "b.h5", tmp_path / "c.h5"
    _write(a, _dense())
    _write(b, _dense(offset=1.0))  # same shape and dtype, other values
    _write(c, _dense(n=7))
    _copy_manifest(a, b)
    with pytest.raises(ArtifactError, match="content hash mismatch") as info:
        read_embeddings(b, fingerprint=FP)
    assert str(b) in str(info.value)
    _copy_manifest(a, c)
    with pytest.raises(ArtifactError, match=r"shape mismatch: file holds \[7, 4\], manifest says \[6, 4\]"):
        read_embeddings(c, fingerprint=FP)
    s = tmp_path / "s.h5"
    _write(s, scipy.sparse.csr_array(_dense()))
    _copy_manifest(a, s)
    with pytest.raises(ArtifactError, match="format mismatch"):
        read_embeddings(s, fingerprint=FP)


def test_stale_fingerprint_refused(tmp_path):
    path = tmp_path / "emb.h5"
    _write(path, _dense(), fp=OTHER_FP)
    with pytest.raises(ArtifactError) as info:
        read_embeddings(path, fingerprint=FP)
    message = str(info.value)
    assert f"stale artifact: fingerprint {OTHER_FP}, expected {FP}" in message and str(path) in message
    assert read_embeddings(path, fingerprint=OTHER_FP).manifest["fingerprint"] == OTHER_FP


def test_unknown_or_missing_schema_and_manifest(tmp_path):
    path = tmp_path / "emb.h5"
    _write(path, _dense())
    with h5py.File(path, "r+") as f:
        manifest = json.loads(f.attrs["manifest"])
        _set_manifest(f, json.dumps({**manifest, "schema": "x"}))
    for reader in (lambda p: read_embeddings(p, fingerprint=None), read_manifest):
        with pytest.raises(ArtifactError, match="unknown schema 'x', expected 'vertebrae.embedding/v1'"):
            reader(path)
    with h5py.File(path, "r+") as f:
        _set_manifest(f, "{not json")
    with pytest.raises(ArtifactError, match="not valid JSON"):
        read_manifest(path)
    with h5py.File(path, "r+") as f:
        del f.attrs["manifest"]
    with pytest.raises(ArtifactError, match="no manifest") as info:
        read_embeddings(path, fingerprint=None)
    assert str(path) in str(info.value)


def test_structure_mismatches_refused(tmp_path):
    path = tmp_path / "emb.h5"
    manifest = _write(path, _dense())
    with h5py.File(path, "r+") as f:
        _set_manifest(f, canonical_json({**manifest, "dtype": "float64"}))
    with pytest.raises(ArtifactError, match="dtype mismatch: file holds float32, manifest says float64"):
        read_embeddings(path, fingerprint=None)
    with h5py.File(path, "r+") as f:
        _set_manifest(f, canonical_json(manifest))
        del f["row_ids"]
        f.create_dataset("row_ids", data=np.array(_ids(5), dtype=object), dtype=h5py.string_dtype())
    with pytest.raises(ArtifactError, match="row id count mismatch: 5 row ids for 6 rows"):
        read_embeddings(path, fingerprint=None)
    sparse = tmp_path / "sparse.h5"
    manifest = _write(sparse, scipy.sparse.csr_array(_dense()))
    with h5py.File(sparse, "r+") as f:
        _set_manifest(f, canonical_json({**manifest, "nnz": manifest["nnz"] - 1}))
    with pytest.raises(ArtifactError, match="nnz mismatch"):
        read_embeddings(sparse, fingerprint=None)


# ------------------------------------------------------------------------------------------- JSON files


def test_json_artifact_round_trip(tmp_path):
    path = tmp_path / "sub" / "score.json"
    payload = {"scores": np.array([0.25, 0.5]), "n": np.int64(3), "pair": ("a", "b"), "name": "ü"}
    manifest = write_json_artifact(path, "score", payload, fingerprint=FP, recipe={"k": 1})
    assert manifest["schema"] == SCHEMAS["score"] and manifest["kind"] == "score"
    assert manifest["recipe"] == {"k": 1} and manifest["fingerprint"] == FP
    expected = {"scores": [0.25, 0.5], "n": 3, "pair": ["a", "b"], "name": "ü"}
    assert read_json_artifact(path, "score", fingerprint=FP) == expected
    assert read_json_artifact(path, "score", fingerprint=None) == expected
    text = path.read_text(encoding="utf-8")
    assert text.startswith('{\n  "manifest": {') and json.loads(text)["payload"] == expected
    assert _leftovers(path.parent) == []


def test_json_artifact_refusals(tmp_path):
    path = tmp_path / "score.json"
    write_json_artifact(path, "score", {"auc": 0.5, "label": "cats"}, fingerprint=OTHER_FP)
    with pytest.raises(ArtifactError) as info:
        read_json_artifact(path, "score", fingerprint=FP)
    assert f"fingerprint {OTHER_FP}, expected {FP}" in str(info.value) and str(path) in str(info.value)
    with pytest.raises(ArtifactError, match="expected 'vertebrae.plan/v1'"):
        read_json_artifact(path, "plan", fingerprint=None)

    text = path.read_text(encoding="utf-8")
    assert '"auc": 0.5' in text
    path.write_text(text.replace('"auc": 0.5', '"auc": 0.75'), encoding="utf-8")
    with pytest.raises(ArtifactError, match="content hash mismatch") as info:
        read_json_artifact(path, "score", fingerprint=OTHER_FP)
    assert str(path) in str(info.value)

    path.write_text(text[: len(text) // 2], encoding="utf-8")
    with pytest.raises(ArtifactError, match="not valid JSON") as info:
        read_json_artifact(path, "score", fingerprint=None)
    assert str(path) in str(info.value)

    doc = json.loads(text)
    doc["manifest"]["schema"] = "vertebrae.score/v999"
    path.write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(ArtifactError, match="unknown schema 'vertebrae.score/v999'"):
        read_json_artifact(path, "score", fingerprint=None)
    del doc["manifest"]["schema"]
    path.write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(ArtifactError, match="no schema"):
        read_json_artifact(path, "score", fingerprint=None)
    with pytest.raises(ArtifactError, match="not found"):
        read_json_artifact(tmp_path / "missing.json", "score", fingerprint=None)


def test_json_nan_refused_at_write(tmp_path):
    path = tmp_path / "score.json"
    with pytest.raises(ValidationError, match=r"\$\.a\.b"):
        write_json_artifact(path, "score", {"a": {"b": float("nan")}}, fingerprint=FP)
    with pytest.raises(ValidationError, match=r"\$\.x\[1\]"):
        write_json(path, {"x": [1.0, np.float32("inf")]})
    assert os.listdir(tmp_path) == []
    with pytest.raises(ValidationError, match="unknown artifact kind"):
        write_json_artifact(path, "nonsense", {}, fingerprint=FP)


def test_write_json_is_sorted_and_indented(tmp_path):
    path = tmp_path / "report.json"
    write_json(path, {"b": 1, "a": (np.float64(0.5), "é")})
    assert path.read_text(encoding="utf-8") == '{\n  "a": [\n    0.5,\n    "é"\n  ],\n  "b": 1\n}\n'


# ------------------------------------------------------------------------------------------ corruption


def test_single_byte_flips_are_refused_with_the_path_or_read_back_unchanged(tmp_path):
    """Seeded fuzz: 300 single-byte flips anywhere in a small merged-embedding file. Each read is refused with a
    CorruptArtifactError naming the file, or returns exactly what was written (matrix, row ids, manifest)."""
    from vertebrae.core.errors import CorruptArtifactError

    clean = tmp_path / "clean.h5"
    manifest = _write(clean, _dense(n=12, d=5))
    original = clean.read_bytes()
    rng = np.random.default_rng(1417)
    path = tmp_path / "flipped.h5"
    refused = 0
    for offset in rng.choice(len(original), size=min(300, len(original)), replace=False):
        damaged = bytearray(original)
        damaged[int(offset)] ^= int(rng.integers(1, 256))
        path.write_bytes(bytes(damaged))
        try:
            art = read_embeddings(path, fingerprint=FP)
        except CorruptArtifactError as exc:
            assert str(path) in str(exc) and exc.path == str(path), (int(offset), str(exc))
            refused += 1
            continue
        np.testing.assert_array_equal(art.matrix, _dense(n=12, d=5), err_msg=f"offset {offset}")
        assert art.row_ids == tuple(_ids(12)) and art.manifest == manifest, f"offset {offset}"
    assert refused > 50  # the data, the row ids, the manifest and the header are all hit


def test_manifest_edit_is_detected_by_its_hash(tmp_path):
    from vertebrae.core.errors import CorruptArtifactError

    path = tmp_path / "emb.h5"
    _write(path, _dense())
    with h5py.File(path, "r+") as f:
        f.attrs["manifest"] = f.attrs["manifest"].replace('"toy"', '"toz"')  # a flipped byte in the recipe
    with pytest.raises(CorruptArtifactError, match="manifest hash mismatch") as info:
        read_embeddings(path, fingerprint=FP)
    assert str(path) in str(info.value)


def test_corrupt_and_stale_are_told_apart_and_corrupt_files_move_aside(tmp_path):
    from vertebrae.core.artifacts import move_aside
    from vertebrae.core.errors import CorruptArtifactError

    stale = tmp_path / "stale.h5"
    _write(stale, _dense(), fp=OTHER_FP)
    with pytest.raises(ArtifactError) as info:
        read_embeddings(stale, fingerprint=FP)
    assert not isinstance(info.value, CorruptArtifactError)  # a valid file of another job: never moved
    with pytest.raises(ArtifactError) as info:
        read_embeddings(tmp_path / "missing.h5", fingerprint=FP)
    assert not isinstance(info.value, CorruptArtifactError)
    score = tmp_path / "score.json"
    write_json_artifact(score, "score", {"a": 1}, fingerprint=FP)
    with pytest.raises(ArtifactError) as info:
        read_json_artifact(score, "protocol", fingerprint=FP)
    assert not isinstance(info.value, CorruptArtifactError)

    truncated = tmp_path / "emb.h5"
    _write(truncated, _dense())
    truncated.write_bytes(truncated.read_bytes()[:300])
    with pytest.raises(CorruptArtifactError) as info:
        read_embeddings(truncated, fingerprint=FP)
    assert info.value.path == str(truncated)
    first, second = move_aside(truncated), None
    _write(truncated, _dense())
    second = move_aside(truncated)
    assert not truncated.exists() and first != second
    for moved in (first, second):
        assert os.path.basename(moved).startswith("emb.h5.corrupt-") and os.path.dirname(moved) == str(tmp_path)
