"""Manifest sources: raw texts or image paths from CSV / Parquet, with labels and ids, for model extractors."""

from __future__ import annotations

from pathlib import Path

import pytest

from vertebrae.core.errors import ConfigError, ValidationError
from vertebrae.core.identity import DatasetIdentity
from vertebrae.core.inputs import RawInputs
from vertebrae.data.declared.labelled import declared_row_count, load_declared_dataset, load_declared_rows
from vertebrae.data.sources.manifest import ManifestSpec, manifest_row_count, read_manifest
from vertebrae.data.declared.retrieval import load_retrieval_source
from vertebrae.data.sources import load_source, source_row_count

TOPICS = Path(__file__).resolve().parents[3] / "config" / "data" / "topics.csv"


def write_images(folder: Path, names) -> None:
    from PIL import Image

    folder.mkdir(parents=True, exist_ok=True)
    for i, name in enumerate(names):
        Image.new("RGB", (6, 5), (i * 40, 10, 200)).save(folder / name)


def test_shipped_topics_corpus_is_balanced_and_loads():
    decl = {"type": "manifest", "path": str(TOPICS), "text_column": "text", "id_column": "id"}
    data = load_source(decl, base_dir=Path("."), where="s")
    assert isinstance(data.features, RawInputs) and data.features.kind == "text"
    assert data.n_rows == source_row_count(decl, base_dir=Path("."), where="s") == 320
    counts = {label: data.labels.count(label) for label in set(data.labels)}
    assert len(counts) == 8 and set(counts.values()) == {40}
    assert len(set(data.features.values)) == 320 and data.row_ids[0] == "sports-00"


def test_image_manifest_csv_resolves_relative_paths_and_slices(tmp_path):
    write_images(tmp_path / "data" / "img", ["a.png", "b.png", "c.png"])
    (tmp_path / "data" / "m.csv").write_text("file,cls,key\nimg/a.png,cat,k1\nimg/b.png,dog,k2\nimg/c.png,cat,k3\n")
    decl = {"type": "manifest", "path": "data/m.csv", "image_column": "file", "label_column": "cls", "id_column": "key"}
    rows = load_source(decl, base_dir=tmp_path, where="s", rows=(1, 3))
    assert rows.features.values == (str(tmp_path / "data/img/b.png"), str(tmp_path / "data/img/c.png"))
    assert rows.labels == ["dog", "cat"] and rows.row_ids == ["k2", "k3"]
    dataset = load_declared_dataset({"source": decl, "identity": {"kind": "content"}}, base_dir=tmp_path, where="d")
    assert dataset.modality == "image" and dataset.n_rows == 3
    before = dataset.identity_key()
    write_images(tmp_path / "data" / "img", ["b.png"])  # b.png now holds a's pixels
    after = load_declared_dataset({"source": decl, "identity": {"kind": "content"}}, base_dir=tmp_path, where="d")
    assert after.identity_key() != before  # the content identity hashes the image bytes
    inputs, ids = load_declared_rows({"source": decl, "identity": {"kind": "declared", "name": "m", "revision": 1}},
                                     base_dir=tmp_path, where="d", start=0, stop=2)
    assert len(inputs) == 2 and len(ids) == 2


def test_missing_image_names_row_and_path(tmp_path):
    write_images(tmp_path / "img", ["a.png"])
    (tmp_path / "m.csv").write_text("path,label,id\nimg/a.png,x,r1\nimg/missing.png,y,r2\n")
    spec = ManifestSpec(tmp_path / "m.csv", image_column="path", id_column="id")
    with pytest.raises(ValidationError, match=r"row 'r2' \(line 3\): image file not found: .*img/missing\.png"):
        read_manifest(spec)
    assert read_manifest(spec, (0, 1)).labels == ["x"]  # only the requested rows are checked


def test_parquet_manifest_with_numeric_labels(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"sentence": ["one", "two", "three"], "y": [1, 2, 1]}), tmp_path / "t.parquet")
    decl = {"type": "manifest", "path": "t.parquet", "text_column": "sentence", "label_column": "y", "label_dtype": "int"}
    assert source_row_count(decl, base_dir=tmp_path, where="s") == 3
    data = load_source(decl, base_dir=tmp_path, where="s")
    assert data.labels == [1, 2, 1] and data.row_ids is None and data.features.values == ("one", "two", "three")
    as_float = load_source({**decl, "label_dtype": "float"}, base_dir=tmp_path, where="s")
    assert as_float.labels == [1.0, 2.0, 1.0]


def test_declaration_and_cell_errors(tmp_path):
    (tmp_path / "m.csv").write_text("text,label\nhello,a\n,b\nthird,\n")
    base = {"type": "manifest", "path": "m.csv", "text_column": "text"}
    with pytest.raises(ConfigError, match=r"s\.text_column: column 'txt' not found in .*m\.csv; available columns: 'text', 'label'"):
        source_row_count({**base, "text_column": "txt"}, base_dir=tmp_path, where="s")
    with pytest.raises(ConfigError, match=r"s: declare exactly one of text_column or image_column"):
        load_source({**base, "image_column": "label"}, base_dir=tmp_path, where="s")
    with pytest.raises(ConfigError, match=r"s\.path: file not found"):
        load_source({**base, "path": "none.csv"}, base_dir=tmp_path, where="s")
    (tmp_path / "m.txt").write_text("text,label\n")
    with pytest.raises(ConfigError, match=r"s\.format: cannot tell the format"):
        load_source({**base, "path": "m.txt"}, base_dir=tmp_path, where="s")
    with pytest.raises(ValidationError, match=r"row 1 \(line 3\): empty or non-text 'text' cell"):
        load_source(base, base_dir=tmp_path, where="s")
    with pytest.raises(ValidationError, match=r"row 2 \(line 4\): empty 'label'"):
        load_source(base, base_dir=tmp_path, where="s", rows=(2, 3))
    (tmp_path / "n.csv").write_text("text,label\nhello,3\nbye,zz\n")
    with pytest.raises(ValidationError, match=r"row 1 \(line 3\): label 'zz' is not an int"):
        load_source({**base, "path": "n.csv", "label_dtype": "int"}, base_dir=tmp_path, where="s")


def test_text_manifest_label_split_retrieval(tmp_path):
    source = {"type": "manifest", "path": str(TOPICS), "text_column": "text", "id_column": "id"}
    data = load_retrieval_source({"type": "label_split", "source": source, "query_every": 5}, base_dir=tmp_path, where="r")
    assert len(data.query_ids) == 64 and len(data.gallery_ids) == 256  # the corpus cycles through 8 topics
    assert len(data.records) == 64 * 32  # each query: the 32 gallery sentences of its topic
    dataset = data.to_dataset(DatasetIdentity.declared("topics", "1"))
    assert dataset.query_modality == dataset.gallery_modality == "text"
    with pytest.raises(ConfigError, match=r"r\.grade: label_and_mean needs numeric rows"):
        load_retrieval_source({"type": "label_split", "source": source, "grade": "label_and_mean"}, base_dir=tmp_path, where="r")
    assert declared_row_count({"source": source}, base_dir=tmp_path, where="d") == 320
    assert manifest_row_count(ManifestSpec(TOPICS, text_column="text")) == 320
