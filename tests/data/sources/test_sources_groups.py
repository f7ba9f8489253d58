"""Independence groups in declared sources (vertebrae.data.sources, manifest, declared): every labelled source
type reads one group per row, slices them with the rows, reads them alone for the plan, and refuses a missing
key or a wrong length naming the file and the key; a declared dataset with groups is a grouped dataset whose
identity key the plan computes without loading the features."""

from __future__ import annotations

import csv
from pathlib import Path

import h5py
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import scipy.sparse

from vertebrae import BenchmarkDataset, DatasetIdentity
from vertebrae.core.errors import ConfigError, ValidationError
from vertebrae.data.declared.labelled import declared_identity_key, load_declared_dataset
from vertebrae.data.sources import GROUPS_KEYS, SOURCE_TYPES, load_source, source_groups

WHERE = "benchmarks.demo.dataset.source"
N, D = 12, 4
LABELS = ["cat", "dog", "cat", "bird", "dog", "dog", "cat", "fish", "bird", "cat", "dog", "fish"]
INT_GROUPS = [5, 5, 9, 9, 9, 2, 2, 5, 11, 11, 2, 9]  # aperiodic: a slice at the wrong offset cannot match
STR_GROUPS = [f"patient-{g}" for g in INT_GROUPS]


def _features() -> np.ndarray:
    return np.random.default_rng(3).normal(size=(N, D))


def _write_csv(path: Path, header, rows) -> None:
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(header)
        writer.writerows(rows)


def _lines(path: Path, values) -> None:
    path.write_text("".join(f"{v}\n" for v in values), encoding="utf-8")


# writers: (declaration, expected groups, expected groups name)

def make_npz(tmp: Path):
    np.savez(tmp / "e.npz", embeddings=_features(), labels=np.array(LABELS), site=np.array(INT_GROUPS))
    return {"type": "npz", "path": "e.npz", "groups_key": "site"}, INT_GROUPS, "site"


def make_npy_npy_groups(tmp: Path):
    np.save(tmp / "f.npy", _features())
    _lines(tmp / "y.txt", LABELS)
    np.save(tmp / "patients.npy", np.array(STR_GROUPS))
    return {"type": "npy", "path": "f.npy", "labels_path": "y.txt", "groups_path": "patients.npy"}, STR_GROUPS, "patients"


def make_npy_text_groups(tmp: Path):
    np.save(tmp / "f.npy", _features())
    _lines(tmp / "y.txt", LABELS)
    _lines(tmp / "groups.txt", INT_GROUPS)  # text files hold text: "5", not 5
    decl = {"type": "npy", "path": "f.npy", "labels_path": "y.txt", "groups_path": "groups.txt"}
    return decl, [str(g) for g in INT_GROUPS], "groups"


def make_sparse(tmp: Path):
    dense = _features()
    dense[np.abs(dense) < 0.5] = 0.0
    scipy.sparse.save_npz(tmp / "s.npz", scipy.sparse.csr_matrix(dense))
    _lines(tmp / "y.txt", LABELS)
    np.save(tmp / "g.npy", np.array(INT_GROUPS, dtype=np.int64))
    return {"type": "sparse_npz", "path": "s.npz", "labels_path": "y.txt", "groups_path": "g.npy"}, INT_GROUPS, "g"


def make_hdf5(tmp: Path):
    with h5py.File(tmp / "e.h5", "w") as fh:
        fh.create_dataset("embeddings", data=_features())
        fh.create_dataset("labels", data=LABELS, dtype=h5py.string_dtype("utf-8"))
        fh.create_dataset("meta/site", data=STR_GROUPS, dtype=h5py.string_dtype("utf-8"))
    return {"type": "hdf5", "path": "e.h5", "groups_dataset": "meta/site"}, STR_GROUPS, "meta/site"


def make_csv(tmp: Path):
    rows = [[*map(repr, f), LABELS[i], STR_GROUPS[i]] for i, f in enumerate(_features().tolist())]
    _write_csv(tmp / "t.csv", ["f0", "f1", "f2", "f3", "label", "site"], rows)
    return {"type": "csv", "path": "t.csv", "groups_column": "site"}, STR_GROUPS, "site"


def make_manifest_csv(tmp: Path):
    _write_csv(tmp / "m.csv", ["text", "label", "site"], [[f"text {i}", LABELS[i], STR_GROUPS[i]] for i in range(N)])
    return {"type": "manifest", "path": "m.csv", "text_column": "text", "groups_column": "site"}, STR_GROUPS, "site"


def make_manifest_parquet(tmp: Path):
    table = pa.table({"text": [f"text {i}" for i in range(N)], "label": LABELS, "site": INT_GROUPS})
    pq.write_table(table, tmp / "m.parquet")
    return {"type": "manifest", "path": "m.parquet", "text_column": "text", "groups_column": "site"}, INT_GROUPS, "site"


def make_hf_parquet(tmp: Path):
    table = pa.table({"text": [f"text {i}" for i in range(N)], "label": LABELS, "site": INT_GROUPS})
    (tmp / "hf").mkdir()
    pq.write_table(table, tmp / "hf" / "train-00000-of-00001.parquet")
    return {"type": "hf_dataset", "path": "hf", "text_column": "text", "groups_column": "site"}, INT_GROUPS, "site"


def make_hf_saved(tmp: Path):
    """A save_to_disk dataset whose groups are a ClassLabel: the group is its name."""
    datasets = pytest.importorskip("datasets")
    names = sorted(set(STR_GROUPS))
    features = datasets.Features({"text": datasets.Value("string"), "label": datasets.Value("string"),
                                  "site": datasets.ClassLabel(names=names)})
    datasets.Dataset.from_dict({"text": [f"text {i}" for i in range(N)], "label": LABELS,
                                "site": [names.index(g) for g in STR_GROUPS]}, features=features).save_to_disk(str(tmp / "saved"))
    return {"type": "hf_dataset", "path": "saved", "text_column": "text", "groups_column": "site"}, STR_GROUPS, "site"


MAKERS = [make_npz, make_npy_npy_groups, make_npy_text_groups, make_sparse, make_hdf5, make_csv, make_manifest_csv,
          make_manifest_parquet, make_hf_parquet, make_hf_saved]


@pytest.fixture(params=MAKERS, ids=lambda f: f.__name__[len("make_"):])
def grouped(request, tmp_path):
    decl, groups, name = request.param(tmp_path)
    return decl, groups, name, tmp_path


def test_every_labelled_file_source_declares_groups():
    from vertebrae.data.sources.registry import FORMATS as FORMAT_SOURCES

    # image folders and WebDataset shards hold no groups declaration (yet): not in GROUPS_KEYS
    assert sorted(GROUPS_KEYS) == sorted(set(SOURCE_TYPES) - {"sklearn", "image_folder", "webdataset"})
    assert set(FORMAT_SOURCES) >= {"image_folder", "webdataset"}
    assert {m.__name__.split("_")[1] for m in MAKERS} >= {"npz", "npy", "sparse", "hdf5", "csv", "manifest", "hf"}


def test_groups_round_trip(grouped):
    decl, groups, name, base = grouped
    data = load_source(decl, base_dir=base, where=WHERE)
    assert data.groups == groups
    assert [type(g) for g in data.groups] == [type(g) for g in groups]
    assert data.groups_name == name
    assert data.labels == LABELS


def test_groups_slice_with_their_rows(grouped):
    decl, groups, name, base = grouped
    data = load_source(decl, base_dir=base, where=WHERE, rows=(3, 9))
    assert data.groups == groups[3:9]
    assert data.labels == LABELS[3:9]
    assert data.groups_name == name


def test_groups_alone_equal_the_loaded_groups(grouped):
    decl, groups, name, base = grouped
    assert source_groups(decl, base_dir=base, where=WHERE) == (name, groups)


def test_no_groups_declared_reads_none(grouped):
    decl, _, _, base = grouped
    key = GROUPS_KEYS[decl["type"]]
    plain = {k: v for k, v in decl.items() if k != key}
    if decl["type"] == "csv":  # without its groups column the site column would be read as a feature
        plain["feature_columns"] = ["f0", "f1", "f2", "f3"]
    assert load_source(plain, base_dir=base, where=WHERE).groups is None
    assert load_source({**plain, key: None}, base_dir=base, where=WHERE).groups is None
    assert source_groups(plain, base_dir=base, where=WHERE) is None


def test_a_sklearn_source_has_no_groups_key(tmp_path):
    with pytest.raises(ConfigError, match=rf"{WHERE}\.groups_column: unknown key"):
        load_source({"type": "sklearn", "name": "iris", "groups_column": "x"}, base_dir=tmp_path, where=WHERE)


# ---------------------------------------------------------------------------------------------------- refusals

@pytest.mark.parametrize("maker, missing", [(make_npz, "absent"), (make_hdf5, "meta/absent"), (make_csv, "absent"),
                                            (make_manifest_csv, "absent"), (make_manifest_parquet, "absent"),
                                            (make_hf_parquet, "absent")])
def test_a_missing_groups_key_is_refused_naming_the_key_and_file(tmp_path, maker, missing):
    decl, _, _ = maker(tmp_path)
    key = GROUPS_KEYS[decl["type"]]
    bad = {**decl, key: missing}
    for read in (lambda: load_source(bad, base_dir=tmp_path, where=WHERE),
                 lambda: source_groups(bad, base_dir=tmp_path, where=WHERE)):
        with pytest.raises(ConfigError) as info:
            read()
        message = str(info.value)
        assert f"{WHERE}.{key}" in message and repr(missing) in message and decl["path"] in message


def test_a_missing_groups_file_is_refused_naming_the_key(tmp_path):
    decl, _, _ = make_npy_text_groups(tmp_path)
    with pytest.raises(ConfigError, match=rf"{WHERE}\.groups_path: file not found: .*nope\.txt"):
        load_source({**decl, "groups_path": "nope.txt"}, base_dir=tmp_path, where=WHERE)


def _short_npz(tmp):
    np.savez(tmp / "e.npz", embeddings=_features(), labels=np.array(LABELS), site=np.array(INT_GROUPS[:-1]))
    return {"type": "npz", "path": "e.npz", "groups_key": "site"}, "e.npz['site']"


def _short_npy(tmp):
    np.save(tmp / "f.npy", _features())
    _lines(tmp / "y.txt", LABELS)
    _lines(tmp / "g.txt", INT_GROUPS + [1])
    return {"type": "npy", "path": "f.npy", "labels_path": "y.txt", "groups_path": "g.txt"}, "g.txt"


def _short_hdf5(tmp):
    with h5py.File(tmp / "e.h5", "w") as fh:
        fh.create_dataset("embeddings", data=_features())
        fh.create_dataset("labels", data=LABELS, dtype=h5py.string_dtype("utf-8"))
        fh.create_dataset("site", data=np.array(INT_GROUPS[:5]))
    return {"type": "hdf5", "path": "e.h5", "groups_dataset": "site"}, "e.h5['/site']"


@pytest.mark.parametrize("maker", [_short_npz, _short_npy, _short_hdf5])
def test_groups_of_the_wrong_length_are_refused_naming_the_file_and_key(tmp_path, maker):
    decl, what = maker(tmp_path)
    for read in (lambda: load_source(decl, base_dir=tmp_path, where=WHERE),
                 lambda: source_groups(decl, base_dir=tmp_path, where=WHERE)):
        with pytest.raises(ValidationError) as info:
            read()
        message = str(info.value)
        assert f"groups in {tmp_path / what}" in message and f"features in {tmp_path}" in message
        assert "entries" in message and f"{N} rows" in message


def test_float_groups_are_refused_naming_the_array(tmp_path):
    np.savez(tmp_path / "e.npz", embeddings=_features(), labels=np.array(LABELS), site=np.linspace(0, 1, N))
    with pytest.raises(ValidationError, match=r"groups in .*e\.npz\['site'\] have unsupported dtype float64"):
        load_source({"type": "npz", "path": "e.npz", "groups_key": "site"}, base_dir=tmp_path, where=WHERE)


def test_an_empty_csv_group_is_refused_naming_line_and_column(tmp_path):
    rows = [[*map(repr, f), LABELS[i], "" if i == 4 else "g"] for i, f in enumerate(_features().tolist())]
    _write_csv(tmp_path / "t.csv", ["f0", "f1", "f2", "f3", "label", "site"], rows)
    decl = {"type": "csv", "path": "t.csv", "groups_column": "site"}
    with pytest.raises(ValidationError, match=r"t\.csv, line 6, column 'site': empty group"):
        load_source(decl, base_dir=tmp_path, where=WHERE)


def test_an_empty_manifest_group_is_refused_naming_the_row(tmp_path):
    rows = [[f"id{i}", f"text {i}", LABELS[i], "" if i == 2 else "g"] for i in range(N)]
    _write_csv(tmp_path / "m.csv", ["id", "text", "label", "site"], rows)
    decl = {"type": "manifest", "path": "m.csv", "text_column": "text", "id_column": "id", "groups_column": "site"}
    for read in (load_source, source_groups):
        with pytest.raises(ValidationError, match=r"m\.csv, row 'id2' \(line 4\): empty 'site' \(group\)"):
            read(decl, base_dir=tmp_path, where=WHERE)


def test_a_float_parquet_group_is_refused_naming_the_row(tmp_path):
    table = pa.table({"text": [f"t{i}" for i in range(N)], "label": LABELS, "site": [float(g) for g in INT_GROUPS]})
    pq.write_table(table, tmp_path / "m.parquet")
    decl = {"type": "manifest", "path": "m.parquet", "text_column": "text", "groups_column": "site"}
    with pytest.raises(ValidationError, match=r"row 0 \(index 0\): group 5\.0 in column 'site' is not text or an integer"):
        load_source(decl, base_dir=tmp_path, where=WHERE)


@pytest.mark.parametrize("maker, column", [(make_csv, "label"), (make_manifest_csv, "text"), (make_manifest_csv, "label")])
def test_the_groups_column_must_be_its_own(tmp_path, maker, column):
    decl, _, _ = maker(tmp_path)
    with pytest.raises(ConfigError, match=rf"{WHERE}\.groups_column: '{column}' is also the label, id or input column"):
        load_source({**decl, "groups_column": column}, base_dir=tmp_path, where=WHERE)


def test_the_groups_column_is_never_a_csv_feature(tmp_path):
    decl, _, _ = make_csv(tmp_path)
    assert load_source(decl, base_dir=tmp_path, where=WHERE).features.shape == (N, D)  # site is not a feature
    with pytest.raises(ConfigError, match=r"feature_columns\[1\]: column 'site' is the label, id or groups column"):
        load_source({**decl, "feature_columns": ["f0", "site"]}, base_dir=tmp_path, where=WHERE)


# ---------------------------------------------------------------------------------------------------- declared

@pytest.mark.parametrize("kind", ["declared", "content"])
def test_a_declared_dataset_with_groups_is_the_grouped_dataset(tmp_path, kind):
    decl, groups, name = make_npz(tmp_path)
    identity = {"kind": "declared", "name": "demo", "revision": 1} if kind == "declared" else {"kind": "content"}
    where = "benchmarks.demo.dataset"
    dataset = load_declared_dataset({"source": decl, "identity": identity}, base_dir=tmp_path, where=where)
    ident = DatasetIdentity.declared("demo", "1") if kind == "declared" else DatasetIdentity.from_content()
    by_hand = BenchmarkDataset.from_embeddings(_features(), LABELS, identity=ident).with_groups(groups, name=name)
    assert dataset.groups == by_hand.groups and dataset.groups_name == "site"
    assert dataset.identity_key() == by_hand.identity_key()
    assert "|groups:" in dataset.identity_key()
    # the plan's key equals the dataset's, and the ungrouped declaration keeps the ungrouped key
    key = declared_identity_key({"source": decl, "identity": identity}, base_dir=tmp_path, where=where)
    assert key == dataset.identity_key()
    plain = {"source": {k: v for k, v in decl.items() if k != "groups_key"}, "identity": identity}
    assert declared_identity_key(plain, base_dir=tmp_path, where=where) == by_hand.identity.key() != key


def test_an_empty_hf_dataset_group_is_refused_naming_the_row(tmp_path):
    table = pa.table({"text": ["a", "b", "c"], "label": ["x", "y", "x"], "id": ["r0", "r1", "r2"], "site": ["s", None, "t"]})
    pq.write_table(table, tmp_path / "t.parquet")
    decl = {"type": "hf_dataset", "path": "t.parquet", "text_column": "text", "id_column": "id", "groups_column": "site"}
    for read in (lambda: load_source(decl, base_dir=tmp_path, where=WHERE),
                 lambda: source_groups(decl, base_dir=tmp_path, where=WHERE)):
        with pytest.raises(ValidationError, match=r"t\.parquet, row 'r1' \(index 1\): group None in 'site' must be"):
            read()
    with pytest.raises(ConfigError, match=rf"{WHERE}\.groups_column: 'id' is also the label, id or input column"):
        load_source({**decl, "groups_column": "id"}, base_dir=tmp_path, where=WHERE)


def test_hf_dataset_groups_tracked_by_files_in_the_plan_and_in_python(tmp_path, monkeypatch):
    decl, groups, name = make_hf_saved(tmp_path)
    where = "benchmarks.demo.dataset"
    dataset = load_declared_dataset({"source": decl}, base_dir=tmp_path, where=where)
    assert dataset.groups == tuple(groups) and dataset.groups_name == "site" and "|groups:" in dataset.identity_key()
    assert declared_identity_key({"source": decl}, base_dir=tmp_path, where=where) == dataset.identity_key()
    monkeypatch.chdir(tmp_path)
    in_python = BenchmarkDataset.from_hf_dataset("saved", text_column="text", groups_column="site")
    assert in_python.groups == dataset.groups and in_python.identity_key() == dataset.identity_key()
