"""Retrieval sources declared in a config: the manifest_pair source (raw inputs of each side from its own
manifest, matched by id through relevance records)."""

from __future__ import annotations

import pytest

from vertebrae.core.errors import ConfigError, ValidationError
from vertebrae.core.identity import DatasetIdentity
from vertebrae.core.inputs import RawInputs
from vertebrae.data.declared.retrieval import load_retrieval_source, retrieval_row_counts


def _pair(tmp_path, *, qrels="c1\timg-b\t2\nc1\timg-a\nc2\timg-c\t1\n"):
    (tmp_path / "pics").mkdir()
    for name in ("a", "b", "c"):
        (tmp_path / "pics" / f"{name}.png").write_bytes(b"not decoded here")
    (tmp_path / "gallery.csv").write_text("file,key\npics/a.png,img-a\npics/b.png,img-b\npics/c.png,img-c\n")
    (tmp_path / "captions.csv").write_text('key,caption\nc1,"a red, round thing"\nc2,a green square\n')
    (tmp_path / "qrels.tsv").write_text(qrels)
    return {"type": "manifest_pair", "relevance_path": "qrels.tsv",
            "queries": {"path": "captions.csv", "text_column": "caption", "id_column": "key"},
            "gallery": {"path": "gallery.csv", "image_column": "file", "id_column": "key"}}


def test_manifest_pair_reads_each_side_and_the_records(tmp_path):
    decl = _pair(tmp_path)
    data = load_retrieval_source(decl, base_dir=tmp_path, where="retrieval.x.dataset.source")
    assert isinstance(data.queries, RawInputs) and data.queries.kind == "text"
    assert data.queries.values == ("a red, round thing", "a green square")
    assert data.gallery.kind == "image"
    assert data.gallery.values == tuple(str(tmp_path / "pics" / f"{n}.png") for n in "abc")
    assert (data.query_ids, data.gallery_ids) == (["c1", "c2"], ["img-a", "img-b", "img-c"])
    assert data.records == [("c1", "img-b", 2.0), ("c1", "img-a", 1.0), ("c2", "img-c", 1.0)]
    assert retrieval_row_counts(decl, base_dir=tmp_path, where="r") == (2, 3)
    dataset = data.to_dataset(DatasetIdentity.declared("pairs", "1"))
    assert (dataset.query_modality, dataset.gallery_modality) == ("text", "image")
    assert dataset.protocol.relevance.toarray().tolist() == [[1.0, 2.0, 0.0], [0.0, 0.0, 1.0]]


def test_manifest_pair_declaration_errors_name_the_key(tmp_path):
    decl = _pair(tmp_path)
    cases = [
        ({**decl, "queries": None}, r"src\.queries: a manifest declaration"),
        ({**decl, "queries": {**decl["queries"], "label_column": "x"}}, r"src\.queries\.label_column: unknown key"),
        ({**decl, "gallery": {k: v for k, v in decl["gallery"].items() if k != "id_column"}}, r"src\.gallery\.id_column: required"),
        ({**decl, "gallery": {**decl["gallery"], "path": "nowhere.csv"}}, r"src\.gallery\.path: file not found"),
        ({**decl, "queries": {**decl["queries"], "text_column": "missing"}}, r"src\.queries\.text_column: column 'missing' not found"),
        ({**decl, "queries": {**decl["queries"], "image_column": "caption"}}, r"src\.queries: declare exactly one of"),
        ({**decl, "relevance_path": None}, r"src\.relevance_path: a path is required"),
        ({**decl, "queries": {k: v for k, v in decl["queries"].items() if k != "path"}}, r"src\.queries\.path: required"),
    ]
    for bad, message in cases:
        with pytest.raises(ConfigError, match=message):
            load_retrieval_source(bad, base_dir=tmp_path, where="src")
    with pytest.raises(ConfigError, match=r"src\.gallery\.id_column: required"):
        retrieval_row_counts(cases[2][0], base_dir=tmp_path, where="src")


def test_manifest_pair_data_errors_name_the_row_or_record(tmp_path):
    decl = _pair(tmp_path)
    (tmp_path / "pics" / "b.png").unlink()
    with pytest.raises(ValidationError, match=r"row 'img-b'.*image file not found: .*b\.png"):
        load_retrieval_source(decl, base_dir=tmp_path, where="src")
    (tmp_path / "pics" / "b.png").write_bytes(b"x")
    (tmp_path / "qrels.tsv").write_text("c1\timg-z\t1\nc2\timg-c\t1\n")  # a gallery id no manifest row has
    # refused when the source loads (validate time), naming the file, how many and the line
    with pytest.raises(ValidationError, match=r"qrels\.tsv: 1 record\(s\) name 1 gallery id\(s\) absent from the gallery "
                                              r"of src: 'img-z' \(line 1\)"):
        load_retrieval_source(decl, base_dir=tmp_path, where="src")


@pytest.mark.parametrize("grade", ["label", "label_and_mean"])
def test_label_split_records_equal_the_pairwise_definition(tmp_path, grade):
    """Every (query, gallery) pair of equal labels, queries in row order and each query's positives in gallery row
    order, graded 2 where the row means share a tercile (label_and_mean) — checked pair by pair."""
    import numpy as np

    rng = np.random.default_rng(3)
    features = rng.normal(size=(203, 4)).astype(np.float32)
    labels = rng.choice(np.array(["b", "a", "c", "z", "q"]), size=203)
    labels[7] = "lonely"  # a query (row 7 = 7 * 1) whose label no gallery row shares... if it is a query
    np.savez(tmp_path / "s.npz", embeddings=features, labels=labels)
    decl = {"type": "label_split", "query_every": 7, "grade": grade,
            "source": {"type": "npz", "path": "s.npz", "features_key": "embeddings", "labels_key": "labels"}}
    data = load_retrieval_source(decl, base_dir=tmp_path, where="r")
    means = features.mean(axis=1)
    terciles = np.searchsorted(np.quantile(means, [1 / 3, 2 / 3]), means, side="right")
    expected = []
    for q in range(0, 203, 7):
        for g in range(203):
            if g % 7 and labels[g] == labels[q]:
                expected.append((q, g, 2.0 if grade == "label_and_mean" and terciles[g] == terciles[q] else 1.0))
    assert data.records == expected
    assert not any(q == 7 for q, _, _ in data.records)
    assert data.query_ids == list(range(0, 203, 7)) and len(data.gallery_ids) == 203 - 29


def test_label_split_refuses_groups_it_would_ignore(tmp_path):
    import numpy as np

    np.savez(tmp_path / "s.npz", embeddings=np.zeros((6, 2)), labels=np.arange(6) % 2, groups=np.arange(6))
    decl = {"type": "label_split", "source": {"type": "npz", "path": "s.npz", "features_key": "embeddings",
                                              "labels_key": "labels", "groups_key": "groups"}}
    with pytest.raises(ConfigError, match=r"r\.source\.groups_key: retrieval does not use independence groups"):
        load_retrieval_source(decl, base_dir=tmp_path, where="r")


def test_a_key_of_another_source_type_is_refused_naming_its_types(tmp_path):
    decl = _pair(tmp_path)
    with pytest.raises(ConfigError, match=r"src\.split: a key of retrieval source type\(s\) beir, not of type "
                                          r"'manifest_pair', which would ignore it; type 'manifest_pair' takes queries"):
        load_retrieval_source({**decl, "split": "dev"}, base_dir=tmp_path, where="src")
    with pytest.raises(ConfigError, match=r"src\.query_every: a key of retrieval source type\(s\) label_split, not of "
                                          r"type 'npz_pair'"):
        retrieval_row_counts({"type": "npz_pair", "path": "p.npz", "relevance_path": "q.tsv", "query_every": 3},
                             base_dir=tmp_path, where="src")
    from vertebrae.data.sources import source_row_count

    with pytest.raises(ConfigError, match=r"s\.path: unknown key for a 'sklearn' source \(a key of source type\(s\) npz, "
                                          r"npy, sparse_npz, hdf5, csv, manifest, image_folder, hf_dataset, webdataset, which a 'sklearn' source would ignore\)"):
        source_row_count({"type": "sklearn", "name": "iris", "path": "x.npz"}, base_dir=tmp_path, where="s")
