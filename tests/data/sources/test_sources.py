"""Tests of vertebrae.data.sources: every declared format round trips, slices and fails clearly."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest
import scipy.sparse

from vertebrae.core.errors import ConfigError, ValidationError
from vertebrae.data.sources import SOURCE_TYPES, SourceData, load_source, source_row_count

WHERE = "benchmarks.demo.dataset.source"
N, D = 12, 5


def _features(dtype=np.float32) -> np.ndarray:
    rng = np.random.default_rng(7)
    return rng.normal(size=(N, D)).astype(dtype)


# aperiodic, so a slice taken at the wrong offset cannot match by accident
LABELS = ["cat", "dog", "cat", "bird", "dog", "dog", "cat", "fish", "bird", "cat", "dog", "fish"]
INT_LABELS = [3, 0, 0, 2, 1, 3, 3, 0, 2, 1, 1, 0]
STR_IDS = [f"img-{i:03d}" for i in range(N)]
INT_IDS = [1000 + 3 * i for i in range(N)]


def _load(decl, base_dir, rows=None) -> SourceData:
    return load_source(decl, base_dir=base_dir, where=WHERE, rows=rows)


def _count(decl, base_dir) -> int:
    return source_row_count(decl, base_dir=base_dir, where=WHERE)


def _dense(features) -> np.ndarray:
    return features.toarray() if scipy.sparse.issparse(features) else np.asarray(features)


def _raises_exactly(exc_type, func, *args, **kwargs) -> str:
    """Call ``func``; assert it raises exactly ``exc_type`` (ConfigError subclasses ValidationError)."""
    with pytest.raises(exc_type) as info:
        func(*args, **kwargs)
    assert info.type is exc_type, f"expected {exc_type.__name__}, got {info.type.__name__}: {info.value}"
    return str(info.value)


def _write_lines(path: Path, values, trailing_newline=True) -> Path:
    text = "\n".join(str(v) for v in values) + ("\n" if trailing_newline else "")
    path.write_text(text, encoding="utf-8")
    return path


# ----------------------------------------------------------------------------------------------------
# writers: each returns (declaration with a relative path, expected SourceData)


def make_npz(tmp: Path):
    feats = _features()
    np.savez(tmp / "emb.npz", embeddings=feats, labels=np.array(LABELS), ids=np.array(INT_IDS, dtype=np.int64))
    decl = {"type": "npz", "path": "emb.npz", "ids_key": "ids"}
    return decl, SourceData(feats, LABELS, INT_IDS)


def make_npz_compressed_custom_keys(tmp: Path):
    feats = _features(np.float64)
    np.savez_compressed(tmp / "c.npz", X=feats, y=np.array(INT_LABELS, dtype=np.int32))
    decl = {"type": "npz", "path": "c.npz", "features_key": "X", "labels_key": "y"}
    return decl, SourceData(feats, INT_LABELS, None)


def make_npy_npy_labels(tmp: Path):
    feats = _features()
    np.save(tmp / "f.npy", feats)
    np.save(tmp / "y.npy", np.array(LABELS))
    np.save(tmp / "ids.npy", np.array(STR_IDS))
    decl = {"type": "npy", "path": "f.npy", "labels_path": "y.npy", "ids_path": "ids.npy"}
    return decl, SourceData(feats, LABELS, STR_IDS)


def make_npy_text_labels(tmp: Path):
    feats = _features(np.float64)
    np.save(tmp / "f.npy", feats)
    _write_lines(tmp / "labels.txt", LABELS)
    _write_lines(tmp / "ids.txt", STR_IDS, trailing_newline=False)
    decl = {"type": "npy", "path": "f.npy", "labels_path": "labels.txt", "ids_path": "ids.txt"}
    return decl, SourceData(feats, LABELS, STR_IDS)


def make_sparse(tmp: Path):
    dense = _features()
    dense[np.abs(dense) < 0.8] = 0.0
    scipy.sparse.save_npz(tmp / "s.npz", scipy.sparse.csr_matrix(dense))
    np.save(tmp / "y.npy", np.array(INT_LABELS, dtype=np.int64))
    _write_lines(tmp / "ids.txt", STR_IDS)
    decl = {"type": "sparse_npz", "path": "s.npz", "labels_path": "y.npy", "ids_path": "ids.txt"}
    return decl, SourceData(dense, INT_LABELS, STR_IDS)


def make_hdf5(tmp: Path):
    feats = _features()
    with h5py.File(tmp / "e.h5", "w") as fh:
        fh.create_dataset("embeddings", data=feats, chunks=(4, D))
        fh.create_dataset("labels", data=LABELS, dtype=h5py.string_dtype("utf-8"))
        fh.create_dataset("meta/ids", data=np.array(INT_IDS, dtype=np.int64))
    decl = {"type": "hdf5", "path": "e.h5", "ids_dataset": "meta/ids"}
    return decl, SourceData(feats, LABELS, INT_IDS)


def make_hdf5_fixed_bytes(tmp: Path):
    feats = _features(np.float64)
    labels = [f"é{i % 2}" for i in range(N)]  # non-ASCII: UTF-8 decoding is exercised
    with h5py.File(tmp / "b.h5", "w") as fh:
        fh.create_dataset("X", data=feats)
        fh.create_dataset("y", data=np.array([s.encode("utf-8") for s in labels]))  # fixed-length |S
        fh.create_dataset("rid", data=np.array([s.encode() for s in STR_IDS]))
    decl = {
        "type": "hdf5",
        "path": "b.h5",
        "features_dataset": "X",
        "labels_dataset": "y",
        "ids_dataset": "rid",
    }
    return decl, SourceData(feats, labels, STR_IDS)


def _write_csv(path: Path, header, rows) -> Path:
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(header)
        writer.writerows(rows)
    return path


def make_csv(tmp: Path):
    feats = _features(np.float64)
    header = ["f0", "id", "f1", "label", "f2", "f3", "f4"]
    rows = [
        [repr(f[0]), STR_IDS[i], repr(f[1]), INT_LABELS[i], repr(f[2]), repr(f[3]), repr(f[4])]
        for i, f in enumerate(feats.tolist())
    ]
    _write_csv(tmp / "t.csv", header, rows)
    decl = {"type": "csv", "path": "t.csv", "id_column": "id", "label_dtype": "int"}
    return decl, SourceData(feats, INT_LABELS, STR_IDS)


def make_csv_feature_columns(tmp: Path):
    feats = _features(np.float64)
    header = ["a", "b", "c", "d", "e", "target", "ignored"]
    rows = [[*map(repr, f), LABELS[i], "zzz"] for i, f in enumerate(feats.tolist())]
    _write_csv(tmp / "u.csv", header, rows)
    decl = {
        "type": "csv",
        "path": "u.csv",
        "label_column": "target",
        "feature_columns": ["e", "a", "c"],  # declared order wins over file order
    }
    return decl, SourceData(feats[:, [4, 0, 2]], LABELS, None)


MAKERS = [
    make_npz,
    make_npz_compressed_custom_keys,
    make_npy_npy_labels,
    make_npy_text_labels,
    make_sparse,
    make_hdf5,
    make_hdf5_fixed_bytes,
    make_csv,
    make_csv_feature_columns,
]


@pytest.fixture(params=MAKERS, ids=lambda f: f.__name__[len("make_"):])
def source(request, tmp_path):
    decl, expected = request.param(tmp_path)
    return decl, expected, tmp_path


# ----------------------------------------------------------------------------------------------------
# round trips, slices, counts


def test_round_trip(source):
    decl, expected, base = source
    got = _load(decl, base)
    assert isinstance(got, SourceData)
    dense = _dense(got.features)
    assert dense.dtype == expected.features.dtype
    np.testing.assert_array_equal(dense, expected.features)
    assert got.labels == expected.labels
    assert [type(v) for v in got.labels] == [type(v) for v in expected.labels]
    assert got.row_ids == expected.row_ids
    if expected.row_ids is not None:
        assert [type(v) for v in got.row_ids] == [type(v) for v in expected.row_ids]
    assert got.n_rows == N


@pytest.mark.parametrize("rows", [(0, N), (3, 7), (0, 1), (N - 1, N), (5, 5), (0, 0), (N, N)])
def test_rows_slice_equals_slice_of_full_load(source, rows):
    decl, _expected, base = source
    full = _load(decl, base)
    part = _load(decl, base, rows=rows)
    a, b = rows
    assert part.features.shape == (b - a, full.features.shape[1])
    np.testing.assert_array_equal(_dense(part.features), _dense(full.features)[a:b])
    assert part.labels == full.labels[a:b]
    if full.row_ids is None:
        assert part.row_ids is None
    else:
        assert part.row_ids == full.row_ids[a:b]


def test_row_count_agrees_with_load(source):
    decl, _expected, base = source
    assert _count(decl, base) == _load(decl, base).features.shape[0] == N


@pytest.mark.parametrize("rows", [(0, N + 1), (-1, 3), (5, 4), (N + 1, N + 1)])
def test_rows_out_of_range(source, rows):
    decl, _expected, base = source
    msg = _raises_exactly(ValidationError, _load, decl, base, rows=rows)
    assert f"{N} rows" in msg and WHERE in msg


@pytest.mark.parametrize("rows", [(1,), (1.0, 2.0), ("0", "2"), (True, 3), 5])
def test_rows_must_be_an_integer_pair(tmp_path, rows):
    decl, _ = make_npy_npy_labels(tmp_path)
    msg = _raises_exactly(ValidationError, _load, decl, tmp_path, rows=rows)
    assert "rows" in msg


def test_sklearn_digits():
    decl = {"type": "sklearn", "name": "digits"}
    data = _load(decl, Path("."))
    assert data.features.shape == (1797, 64)
    assert data.features.dtype == np.float64
    assert data.row_ids is None
    assert sorted(set(data.labels)) == list(range(10))
    assert all(type(v) is int for v in data.labels)
    assert _count(decl, Path(".")) == 1797
    part = _load(decl, Path("."), rows=(100, 110))
    np.testing.assert_array_equal(part.features, data.features[100:110])
    assert part.labels == data.labels[100:110]


@pytest.mark.parametrize(
    "name,shape,n_classes", [("iris", (150, 4), 3), ("wine", (178, 13), 3), ("breast_cancer", (569, 30), 2)]
)
def test_sklearn_other_datasets(name, shape, n_classes):
    data = _load({"type": "sklearn", "name": name}, Path("."))
    assert data.features.shape == shape
    assert len(set(data.labels)) == n_classes


def test_sparse_stays_csr(tmp_path):
    decl, expected = make_sparse(tmp_path)
    full = _load(decl, tmp_path)
    part = _load(decl, tmp_path, rows=(2, 9))
    for got in (full, part):
        assert scipy.sparse.issparse(got.features) and got.features.format == "csr"
    assert full.features.nnz == np.count_nonzero(expected.features)


def test_sparse_saved_as_coo_is_returned_as_csr(tmp_path):
    dense = np.eye(N, D, dtype=np.float64)
    scipy.sparse.save_npz(tmp_path / "coo.npz", scipy.sparse.coo_matrix(dense))
    _write_lines(tmp_path / "y.txt", LABELS)
    decl = {"type": "sparse_npz", "path": "coo.npz", "labels_path": "y.txt"}
    got = _load(decl, tmp_path, rows=(1, 4))
    assert got.features.format == "csr"
    np.testing.assert_array_equal(got.features.toarray(), dense[1:4])


def test_npy_features_do_not_stay_memory_mapped(tmp_path):
    decl, expected = make_npy_npy_labels(tmp_path)
    got = _load(decl, tmp_path, rows=(2, 5))
    assert type(got.features) is np.ndarray and got.features.flags.owndata
    np.testing.assert_array_equal(got.features, expected.features[2:5])


def test_absolute_paths_ignore_base_dir(tmp_path):
    decl, expected = make_npy_npy_labels(tmp_path)
    decl = {**decl, "path": str(tmp_path / "f.npy"), "labels_path": str(tmp_path / "y.npy"), "ids_path": None}
    got = _load(decl, tmp_path / "elsewhere")
    np.testing.assert_array_equal(got.features, expected.features)
    assert got.row_ids is None


def test_float_labels_stay_floats(tmp_path):
    np.save(tmp_path / "f.npy", _features())
    values = [0.5 * i for i in range(N)]
    np.save(tmp_path / "y.npy", np.array(values, dtype=np.float64))
    got = _load({"type": "npy", "path": "f.npy", "labels_path": "y.npy"}, tmp_path)
    assert got.labels == values and all(type(v) is float for v in got.labels)


def test_byte_string_npy_labels_are_decoded(tmp_path):
    np.save(tmp_path / "f.npy", _features())
    np.save(tmp_path / "y.npy", np.array([s.encode() for s in LABELS]))
    got = _load({"type": "npy", "path": "f.npy", "labels_path": "y.npy"}, tmp_path)
    assert got.labels == LABELS


def test_text_labels_crlf_and_bom(tmp_path):
    np.save(tmp_path / "f.npy", _features())
    (tmp_path / "y.txt").write_bytes(("\ufeff" + "\r\n".join(LABELS) + "\r\n").encode("utf-8"))
    got = _load({"type": "npy", "path": "f.npy", "labels_path": "y.txt"}, tmp_path)
    assert got.labels == LABELS


def test_csv_default_feature_columns_follow_file_order(tmp_path):
    _write_csv(tmp_path / "o.csv", ["z", "label", "a", "m"], [[1, "x", 2, 3], [4, "y", 5, 6]])
    got = _load({"type": "csv", "path": "o.csv"}, tmp_path)
    np.testing.assert_array_equal(got.features, [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    assert got.labels == ["x", "y"] and got.row_ids is None


def test_csv_quoted_multiline_field_and_blank_lines(tmp_path):
    path = tmp_path / "m.csv"
    path.write_text('f0,label,f1\n1,"two\nlines",2\n\n3,b,4\n', encoding="utf-8")
    decl = {"type": "csv", "path": "m.csv"}
    got = _load(decl, tmp_path)
    assert got.labels == ["two\nlines", "b"]
    np.testing.assert_array_equal(got.features, [[1.0, 2.0], [3.0, 4.0]])
    assert _count(decl, tmp_path) == 2


def test_library_imports_are_lazy():
    code = (
        "import sys, vertebrae.data.sources\n"
        "bad = [m for m in ('h5py', 'scipy', 'sklearn', 'pandas') if m in sys.modules]\n"
        "print(','.join(bad))\n"
    )
    root = Path(__file__).resolve().parents[3]
    out = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


# ----------------------------------------------------------------------------------------------------
# declaration errors (ConfigError, naming the key path)


def test_unknown_type_names_allowed_types(tmp_path):
    msg = _raises_exactly(ConfigError, _load, {"type": "parquet", "path": "x"}, tmp_path)
    assert f"{WHERE}.type" in msg and "parquet" in msg
    for kind in SOURCE_TYPES:
        assert kind in msg


def test_missing_type(tmp_path):
    msg = _raises_exactly(ConfigError, _count, {"path": "x.npy"}, tmp_path)
    assert f"{WHERE}.type" in msg


def test_declaration_must_be_a_mapping(tmp_path):
    msg = _raises_exactly(ConfigError, _load, ["npy"], tmp_path)
    assert WHERE in msg


def test_unknown_sklearn_name():
    msg = _raises_exactly(ConfigError, _load, {"type": "sklearn", "name": "mnist"}, Path("."))
    assert f"{WHERE}.name" in msg and "mnist" in msg and "digits" in msg


def test_unknown_key(tmp_path):
    decl = {"type": "npy", "path": "f.npy", "labels_path": "y.npy", "label_path": "y.npy"}
    msg = _raises_exactly(ConfigError, _load, decl, tmp_path)
    assert f"{WHERE}.label_path" in msg and "labels_path" in msg


def test_missing_required_key(tmp_path):
    msg = _raises_exactly(ConfigError, _load, {"type": "npy", "path": "f.npy"}, tmp_path)
    assert f"{WHERE}.labels_path" in msg


@pytest.mark.parametrize(
    "decl,key",
    [
        ({"type": "npz", "path": 3}, "path"),
        ({"type": "npz", "path": "a.npz", "labels_key": None}, "labels_key"),
        ({"type": "hdf5", "path": "a.h5", "features_dataset": ""}, "features_dataset"),
        ({"type": "csv", "path": "a.csv", "label_dtype": "float"}, "label_dtype"),
        ({"type": "csv", "path": "a.csv", "feature_columns": "f0"}, "feature_columns"),
        ({"type": "csv", "path": "a.csv", "feature_columns": ["f0", "f0"]}, "feature_columns[1]"),
        ({"type": "csv", "path": "a.csv", "id_column": "label"}, "id_column"),
    ],
)
def test_bad_option_values(tmp_path, decl, key):
    msg = _raises_exactly(ConfigError, _load, decl, tmp_path)
    assert f"{WHERE}.{key}" in msg


@pytest.mark.parametrize("maker", MAKERS[:-2] + [make_csv], ids=lambda f: f.__name__[len("make_"):])
@pytest.mark.parametrize("func", [_load, _count], ids=["load", "count"])
def test_missing_file_names_resolved_path(tmp_path, maker, func):
    decl, _ = maker(tmp_path)
    decl = {**decl, "path": "nowhere/missing.bin"}
    msg = _raises_exactly(ConfigError, func, decl, tmp_path)
    assert f"{WHERE}.path" in msg and str(tmp_path / "nowhere" / "missing.bin") in msg


@pytest.mark.parametrize("key", ["labels_path", "ids_path"])
@pytest.mark.parametrize("maker", [make_npy_npy_labels, make_sparse], ids=["npy", "sparse"])
def test_missing_side_file_names_key_and_path(tmp_path, maker, key):
    decl, _ = maker(tmp_path)
    decl = {**decl, key: "gone.txt"}
    msg = _raises_exactly(ConfigError, _load, decl, tmp_path)
    assert f"{WHERE}.{key}" in msg and str(tmp_path / "gone.txt") in msg


def test_directory_is_not_a_file(tmp_path):
    (tmp_path / "d.npy").mkdir()
    msg = _raises_exactly(ConfigError, _load, {"type": "npy", "path": "d.npy", "labels_path": "y"}, tmp_path)
    assert str(tmp_path / "d.npy") in msg


@pytest.mark.parametrize("key", ["features_key", "labels_key", "ids_key"])
@pytest.mark.parametrize("func", [_load, _count], ids=["load", "count"])
def test_missing_npz_key_lists_available(tmp_path, key, func):
    decl, _ = make_npz(tmp_path)
    decl = {**decl, key: "nope"}
    msg = _raises_exactly(ConfigError, func, decl, tmp_path)
    assert f"{WHERE}.{key}" in msg and "'nope'" in msg
    for available in ("embeddings", "labels", "ids"):
        assert repr(available) in msg


@pytest.mark.parametrize("key", ["features_dataset", "labels_dataset", "ids_dataset"])
@pytest.mark.parametrize("func", [_load, _count], ids=["load", "count"])
def test_missing_hdf5_dataset_lists_available(tmp_path, key, func):
    decl, _ = make_hdf5(tmp_path)
    decl = {**decl, key: "nope/deeper"}
    msg = _raises_exactly(ConfigError, func, decl, tmp_path)
    assert f"{WHERE}.{key}" in msg and "'nope/deeper'" in msg
    for available in ("embeddings", "labels", "meta/ids"):
        assert repr(available) in msg


def test_hdf5_group_is_not_a_dataset(tmp_path):
    decl, _ = make_hdf5(tmp_path)
    msg = _raises_exactly(ConfigError, _load, {**decl, "ids_dataset": "meta"}, tmp_path)
    assert f"{WHERE}.ids_dataset" in msg and "'meta/ids'" in msg


@pytest.mark.parametrize(
    "override,key,column",
    [
        ({"label_column": "klass"}, "label_column", "klass"),
        ({"id_column": "uid"}, "id_column", "uid"),
        ({"feature_columns": ["f0", "f9"]}, "feature_columns[1]", "f9"),
    ],
)
@pytest.mark.parametrize("func", [_load, _count], ids=["load", "count"])
def test_missing_csv_column_lists_available(tmp_path, override, key, column, func):
    decl, _ = make_csv(tmp_path)
    msg = _raises_exactly(ConfigError, func, {**decl, **override}, tmp_path)
    assert f"{WHERE}.{key}" in msg and repr(column) in msg and str(tmp_path / "t.csv") in msg
    for available in ("f0", "id", "label", "f4"):
        assert repr(available) in msg


def test_csv_feature_column_may_not_be_the_label(tmp_path):
    decl, _ = make_csv(tmp_path)
    msg = _raises_exactly(ConfigError, _load, {**decl, "feature_columns": ["f0", "label"]}, tmp_path)
    assert f"{WHERE}.feature_columns[1]" in msg and "'label'" in msg


# ----------------------------------------------------------------------------------------------------
# data errors (ValidationError naming the file / line / column)


@pytest.mark.parametrize("shape", [(N,), (N, 2, 2)])
@pytest.mark.parametrize("func", [_load, _count], ids=["load", "count"])
def test_npy_features_must_be_2d(tmp_path, shape, func):
    np.save(tmp_path / "f.npy", np.zeros(shape))
    _write_lines(tmp_path / "y.txt", LABELS)
    msg = _raises_exactly(ValidationError, func, {"type": "npy", "path": "f.npy", "labels_path": "y.txt"}, tmp_path)
    assert "2-D" in msg and str(tmp_path / "f.npy") in msg and str(shape) in msg


@pytest.mark.parametrize("func", [_load, _count], ids=["load", "count"])
def test_npz_features_must_be_2d(tmp_path, func):
    np.savez(tmp_path / "e.npz", embeddings=np.zeros(N), labels=np.array(LABELS))
    msg = _raises_exactly(ValidationError, func, {"type": "npz", "path": "e.npz"}, tmp_path)
    assert "2-D" in msg and "e.npz" in msg and "'embeddings'" in msg


@pytest.mark.parametrize("func", [_load, _count], ids=["load", "count"])
def test_hdf5_features_must_be_2d(tmp_path, func):
    with h5py.File(tmp_path / "e.h5", "w") as fh:
        fh["embeddings"] = np.zeros((N, 2, 3))
        fh["labels"] = np.arange(N)
    msg = _raises_exactly(ValidationError, func, {"type": "hdf5", "path": "e.h5"}, tmp_path)
    assert "2-D" in msg and "e.h5" in msg


def test_npy_features_must_be_numeric(tmp_path):
    np.save(tmp_path / "f.npy", np.array([["a", "b"]] * N))
    _write_lines(tmp_path / "y.txt", LABELS)
    msg = _raises_exactly(ValidationError, _load, {"type": "npy", "path": "f.npy", "labels_path": "y.txt"}, tmp_path)
    assert "numeric" in msg and str(tmp_path / "f.npy") in msg


def test_npy_object_features_are_not_unpickled(tmp_path):
    np.save(tmp_path / "f.npy", np.array([[1, "a"]] * N, dtype=object), allow_pickle=True)
    _write_lines(tmp_path / "y.txt", LABELS)
    msg = _raises_exactly(ValidationError, _load, {"type": "npy", "path": "f.npy", "labels_path": "y.txt"}, tmp_path)
    assert "numeric" in msg and "object" in msg


def test_npz_features_must_be_numeric(tmp_path):
    np.savez(tmp_path / "e.npz", embeddings=np.array([["x"] * 3] * N), labels=np.array(LABELS))
    msg = _raises_exactly(ValidationError, _count, {"type": "npz", "path": "e.npz"}, tmp_path)
    assert "numeric" in msg and "e.npz" in msg


def test_hdf5_features_must_be_numeric(tmp_path):
    with h5py.File(tmp_path / "e.h5", "w") as fh:
        fh["embeddings"] = np.array([[b"x", b"y"]] * N)
        fh["labels"] = np.arange(N)
    msg = _raises_exactly(ValidationError, _load, {"type": "hdf5", "path": "e.h5"}, tmp_path)
    assert "numeric" in msg and "e.h5" in msg


def test_sparse_features_must_be_numeric(tmp_path):
    scipy.sparse.save_npz(tmp_path / "s.npz", scipy.sparse.csr_matrix(np.eye(N, D, dtype=bool)))
    _write_lines(tmp_path / "y.txt", LABELS)
    msg = _raises_exactly(
        ValidationError, _load, {"type": "sparse_npz", "path": "s.npz", "labels_path": "y.txt"}, tmp_path
    )
    assert "numeric" in msg and "s.npz" in msg


def test_plain_npz_is_not_a_sparse_npz(tmp_path):
    np.savez(tmp_path / "s.npz", embeddings=np.zeros((N, 2)))
    _write_lines(tmp_path / "y.txt", LABELS)
    decl = {"type": "sparse_npz", "path": "s.npz", "labels_path": "y.txt"}
    for func in (_load, _count):
        msg = _raises_exactly(ValidationError, func, decl, tmp_path)
        assert "s.npz" in msg and "'embeddings'" in msg


def test_npy_file_given_as_npz(tmp_path):
    np.save(tmp_path / "x.npy", np.zeros((N, 2)))
    msg = _raises_exactly(ValidationError, _load, {"type": "npz", "path": "x.npy"}, tmp_path)
    assert "x.npy" in msg


def test_garbage_hdf5(tmp_path):
    (tmp_path / "e.h5").write_bytes(b"not hdf5 at all")
    msg = _raises_exactly(ValidationError, _load, {"type": "hdf5", "path": "e.h5"}, tmp_path)
    assert "e.h5" in msg


def _npy_length_case(tmp, role):
    decl, _ = make_npy_npy_labels(tmp)
    name = decl[f"{role}_path"]
    np.save(tmp / name, np.array(LABELS[:-2] if role == "labels" else STR_IDS[:-2]))
    return decl, tmp / name


def _text_length_case(tmp, role):
    decl, _ = make_npy_text_labels(tmp)
    name = decl[f"{role}_path"]
    _write_lines(tmp / name, (LABELS + ["extra", "more"]) if role == "labels" else STR_IDS + ["x", "y"])
    return decl, tmp / name


def _sparse_length_case(tmp, role):
    decl, _ = make_sparse(tmp)
    name = decl[f"{role}_path"]
    if role == "labels":
        np.save(tmp / name, np.arange(N - 2))
    else:
        _write_lines(tmp / name, STR_IDS[:-2])
    return decl, tmp / name


def _npz_length_case(tmp, role):
    key = "labels" if role == "labels" else "ids"
    arrays = {"embeddings": _features(), "labels": np.array(LABELS), "ids": np.arange(N)}
    arrays[key] = arrays[key][:-2]
    np.savez(tmp / "e.npz", **arrays)
    return {"type": "npz", "path": "e.npz", "ids_key": "ids"}, tmp / "e.npz"


def _hdf5_length_case(tmp, role):
    with h5py.File(tmp / "e.h5", "w") as fh:
        fh["embeddings"] = _features()
        fh["labels"] = np.array(LABELS if role == "ids" else LABELS[:-2], dtype=h5py.string_dtype())
        fh["ids"] = np.arange(N if role == "labels" else N - 2)
    return {"type": "hdf5", "path": "e.h5", "ids_dataset": "ids"}, tmp / "e.h5"


@pytest.mark.parametrize("role", ["labels", "ids"])
@pytest.mark.parametrize(
    "case",
    [_npy_length_case, _text_length_case, _sparse_length_case, _npz_length_case, _hdf5_length_case],
    ids=["npy", "text", "sparse", "npz", "hdf5"],
)
def test_length_mismatch_gives_both_counts_and_file(tmp_path, case, role):
    decl, culprit = case(tmp_path, role)
    msg = _raises_exactly(ValidationError, _load, decl, tmp_path)
    expected_len = N + 2 if case is _text_length_case else N - 2
    assert role in msg and str(culprit) in msg
    assert f"{expected_len} entries" in msg and f"{N} rows" in msg
    # a slice that would fit both lengths still fails: lengths are checked, not just the slice
    msg = _raises_exactly(ValidationError, _load, decl, tmp_path, rows=(0, 2))
    assert f"{expected_len} entries" in msg


@pytest.mark.parametrize("role", ["labels", "ids"])
def test_blank_line_in_text_file_names_line_number(tmp_path, role):
    decl, _ = make_npy_text_labels(tmp_path)
    values = list(LABELS if role == "labels" else STR_IDS)
    values[4] = "   "
    path = _write_lines(tmp_path / decl[f"{role}_path"], values)
    msg = _raises_exactly(ValidationError, _load, decl, tmp_path)
    assert "line 5" in msg and str(path) in msg


def test_text_file_with_two_trailing_newlines_is_a_blank_line(tmp_path):
    decl, _ = make_npy_text_labels(tmp_path)
    (tmp_path / "labels.txt").write_text("\n".join(LABELS) + "\n\n", encoding="utf-8")
    msg = _raises_exactly(ValidationError, _load, decl, tmp_path)
    assert f"line {N + 1}" in msg


def test_float_ids_are_rejected(tmp_path):
    decl, _ = make_npy_npy_labels(tmp_path)
    np.save(tmp_path / "ids.npy", np.arange(N, dtype=np.float64))
    msg = _raises_exactly(ValidationError, _load, decl, tmp_path)
    assert "ids" in msg and "ids.npy" in msg and "float64" in msg


def test_2d_numeric_labels_load_as_an_indicator_array(tmp_path):
    decl, _ = make_npy_npy_labels(tmp_path)
    indicator = np.arange(N * 2, dtype=np.int64).reshape(N, 2) % 2
    np.save(tmp_path / "y.npy", indicator)
    labels = _load(decl, tmp_path).labels
    assert isinstance(labels, np.ndarray) and labels.shape == (N, 2)
    np.testing.assert_array_equal(labels, indicator)


def test_2d_string_labels_are_rejected(tmp_path):
    decl, _ = make_npy_npy_labels(tmp_path)
    np.save(tmp_path / "y.npy", np.full((N, 2), "a"))
    msg = _raises_exactly(ValidationError, _load, decl, tmp_path)
    assert "1-D" in msg and "y.npy" in msg


def test_csv_non_numeric_cell_names_file_line_column(tmp_path):
    decl, _ = make_csv(tmp_path)
    path = tmp_path / "t.csv"
    lines = path.read_text(encoding="utf-8").splitlines()
    cells = lines[6].split(",")
    cells[2] = "oops"  # column f1, data row 6 -> file line 7
    lines[6] = ",".join(cells)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    msg = _raises_exactly(ValidationError, _load, decl, tmp_path)
    assert str(path) in msg and "line 7" in msg and "'f1'" in msg and "oops" in msg


def test_csv_short_and_long_rows(tmp_path):
    _write_csv(tmp_path / "s.csv", ["f0", "f1", "label"], [[1, 2, "a"], [3, "b"]])
    msg = _raises_exactly(ValidationError, _load, {"type": "csv", "path": "s.csv"}, tmp_path)
    assert "line 3" in msg and "s.csv" in msg
    _write_csv(tmp_path / "l.csv", ["f0", "f1", "label"], [[1, 2, "a", "extra"]])
    msg = _raises_exactly(ValidationError, _load, {"type": "csv", "path": "l.csv"}, tmp_path)
    assert "line 2" in msg and "l.csv" in msg


def test_csv_bad_int_label_names_line(tmp_path):
    _write_csv(tmp_path / "i.csv", ["f0", "label"], [[1, 3], [2, 4], [3, "cat"]])
    msg = _raises_exactly(ValidationError, _load, {"type": "csv", "path": "i.csv", "label_dtype": "int"}, tmp_path)
    assert "line 4" in msg and "'cat'" in msg and "i.csv" in msg


def test_csv_int_labels_parse_and_str_labels_stay_str(tmp_path):
    _write_csv(tmp_path / "i.csv", ["f0", "label"], [[1, 3], [2, 4]])
    as_int = _load({"type": "csv", "path": "i.csv", "label_dtype": "int"}, tmp_path)
    as_str = _load({"type": "csv", "path": "i.csv"}, tmp_path)
    assert as_int.labels == [3, 4] and as_str.labels == ["3", "4"]


def test_csv_empty_label_names_line(tmp_path):
    _write_csv(tmp_path / "e.csv", ["f0", "label"], [[1, "a"], [2, ""]])
    msg = _raises_exactly(ValidationError, _load, {"type": "csv", "path": "e.csv"}, tmp_path)
    assert "line 3" in msg and "'label'" in msg


def test_csv_empty_file(tmp_path):
    (tmp_path / "e.csv").write_text("", encoding="utf-8")
    for func in (_load, _count):
        msg = _raises_exactly(ValidationError, func, {"type": "csv", "path": "e.csv"}, tmp_path)
        assert "e.csv" in msg


def test_csv_duplicate_header(tmp_path):
    _write_csv(tmp_path / "d.csv", ["f0", "f0", "label"], [[1, 2, "a"]])
    msg = _raises_exactly(ValidationError, _load, {"type": "csv", "path": "d.csv"}, tmp_path)
    assert "'f0'" in msg and "d.csv" in msg


def test_csv_header_only_names_the_file(tmp_path):
    # Before: counted 0 rows and failed later with "an endpoint needs at least one row", naming no file.
    _write_csv(tmp_path / "h.csv", ["f0", "f1", "label"], [])
    for func in (_load, _count):
        msg = _raises_exactly(ValidationError, func, {"type": "csv", "path": "h.csv"}, tmp_path)
        assert msg == f"CSV file {tmp_path / 'h.csv'} has a header but no data rows; a source needs at least one row"
    (tmp_path / "b.csv").write_text("f0,label\n\n\n", encoding="utf-8")  # blank lines are no rows
    assert str(tmp_path / "b.csv") in _raises_exactly(ValidationError, _count, {"type": "csv", "path": "b.csv"}, tmp_path)


@pytest.mark.parametrize("func", [_load, _count], ids=["load", "count"])
def test_zero_row_array_features_name_the_file(tmp_path, func):
    np.save(tmp_path / "f.npy", np.zeros((0, 4), dtype=np.float32))
    (tmp_path / "y.txt").write_text("", encoding="utf-8")
    msg = _raises_exactly(ValidationError, func, {"type": "npy", "path": "f.npy", "labels_path": "y.txt"}, tmp_path)
    assert msg.startswith(f"features in {tmp_path / 'f.npy'} have no rows (shape (0, 4))")
