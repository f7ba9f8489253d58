"""hf_dataset sources: a save_to_disk folder (Image feature with bytes, or image paths) and Parquet files; splits,
ClassLabel names, ids; errors naming the split, the column and the row; identity following the files."""

from __future__ import annotations

import pytest

from format_fixtures import CLASSES, image_features, tiny_images, write_hf_dataset
from vertebrae.core.errors import ConfigError, ValidationError
from vertebrae.core.file_digests import FileDigests
from vertebrae.core.identity import DatasetIdentity
from vertebrae.data.labelled import BenchmarkDataset
from vertebrae.data.sources.files import source_files_recipe
from vertebrae.data.sources import load_source, source_row_count

pytest.importorskip("datasets")


@pytest.fixture(scope="module")
def rows():
    return tiny_images(9)


@pytest.fixture(scope="module")
def saved(tmp_path_factory, rows):
    return write_hf_dataset(tmp_path_factory.mktemp("hf") / "ds", rows)


def _decl(path, **keys):
    return {"type": "hf_dataset", "path": str(path), "image_column": "image", "id_column": "id", **keys}


def test_save_to_disk_rows_labels_ids_and_images(saved, rows):
    data = load_source(_decl(saved, split="train"), base_dir=saved.parent, where="source")
    assert data.row_ids == [rid for rid, _, _ in rows]
    assert data.labels == [label for _, label, _ in rows]  # ClassLabel indices -> names
    pixels = image_features(data.features)
    assert pixels.shape == (9, 6)
    for (_, label, _), row in zip(rows, pixels):  # the decoded bytes are the rows' own images
        assert CLASSES[int(row[:3].argmax())] == label
    part = load_source(_decl(saved, split="train"), base_dir=saved.parent, where="source", rows=(4, 7))
    assert part.row_ids == data.row_ids[4:7] and list(part.features.values) == list(data.features.values[4:7])
    assert source_row_count(_decl(saved, split="test"), base_dir=saved.parent, where="source") == 2


def test_parquet_file_and_image_paths(tmp_path, rows, saved):
    import datasets

    train = datasets.load_from_disk(str(saved))["train"]
    train.to_parquet(str(tmp_path / "train-00000-of-00001.parquet"))
    data = load_source(_decl(tmp_path, split="train"), base_dir=tmp_path, where="source")
    assert data.labels == [label for _, label, _ in rows]
    assert image_features(data.features).tolist() == image_features(
        load_source(_decl(saved, split="train"), base_dir=tmp_path, where="source").features).tolist()
    paths = write_hf_dataset(tmp_path / "paths", rows, image="path")
    data = load_source(_decl(paths, split="train"), base_dir=tmp_path, where="source")
    assert data.features.values[0] == str(paths / "files" / "img000.png")


def test_missing_split_column_and_undecodable_image_are_named(tmp_path, saved, rows):
    with pytest.raises(ValidationError, match=r"split 'validation' not found in .*ds; its splits: \['train', 'test'\]"):
        load_source(_decl(saved, split="validation"), base_dir=tmp_path, where="source")
    with pytest.raises(ConfigError, match=r"source.split: .*holds the splits"):
        source_row_count(_decl(saved), base_dir=tmp_path, where="source")
    with pytest.raises(ConfigError, match=r"source.label_column: column 'fine_label' not found in split 'train' of "
                                          r".*; its columns: 'image', 'label', 'id'"):
        source_row_count(_decl(saved, split="train", label_column="fine_label"), base_dir=tmp_path, where="source")
    broken = write_hf_dataset(tmp_path / "broken", [*rows[:2], ("bad", "red", b"not an image")])
    data = load_source(_decl(broken, split="train"), base_dir=tmp_path, where="source")
    with pytest.raises(ValidationError, match=r"row 'bad': cannot decode image .*broken/train/data-00000-of-00001.arrow "
                                              r"\(row 2, column 'image'\)"):
        image_features(data.features)


def test_identity_follows_the_files_and_python_constructor(tmp_path, rows):
    folder = write_hf_dataset(tmp_path / "ds", rows)
    decl = _decl(folder, split="train")

    def key():
        return DatasetIdentity.from_files(source_files_recipe(decl, base_dir=tmp_path, where="s",
                                                              digests=FileDigests(None))).key()

    first = key()
    dataset = BenchmarkDataset.from_hf_dataset(folder, split="train", image_column="image", id_column="id")
    assert dataset.identity.key() == first and dataset.n_rows == 9 and dataset.summary()["modality"] == "image"
    write_hf_dataset(tmp_path / "ds", rows[::-1])
    assert key() != first
