"""image_folder sources: torchvision's ImageFolder order and classes, errors naming the folder, content tracking,
and the same scores as the same images given through a manifest."""

from __future__ import annotations

import pytest

from format_fixtures import image_features, tiny_images, write_image_folder, write_manifest
from vertebrae.core.errors import ValidationError
from vertebrae.core.file_digests import FileDigests
from vertebrae.core.identity import DatasetIdentity
from vertebrae.data.labelled import BenchmarkDataset
from vertebrae.data.sources.files import source_files_recipe
from vertebrae.data.sources import load_source, source_row_count


@pytest.fixture(scope="module")
def rows():
    return tiny_images(12)


def test_rows_follow_torchvision_imagefolder(tmp_path, rows):
    datasets = pytest.importorskip("torchvision.datasets")
    root = write_image_folder(tmp_path / "imgs", rows)
    (root / "red" / "notes.txt").write_text("not an image")  # skipped, as torchvision skips it
    (root / "red" / "nested").mkdir()
    (root / "red" / "nested" / "UPPER.PNG").write_bytes(rows[2][2])  # sub-folders and upper-case endings count
    expected = datasets.ImageFolder(str(root))
    data = load_source({"type": "image_folder", "path": "imgs"}, base_dir=tmp_path, where="source")
    assert list(data.features.values) == [path for path, _ in expected.samples]
    assert data.labels == [expected.classes[target] for _, target in expected.samples]
    assert data.row_ids[:2] == ["blue/img000.png", "blue/img003.png"] and "red/nested/UPPER.PNG" in data.row_ids
    assert source_row_count({"type": "image_folder", "path": "imgs"}, base_dir=tmp_path, where="source") == 13
    part = load_source({"type": "image_folder", "path": "imgs"}, base_dir=tmp_path, where="source", rows=(3, 6))
    assert part.row_ids == data.row_ids[3:6] and part.labels == data.labels[3:6]


def test_empty_class_folder_and_missing_root_are_named(tmp_path, rows):
    root = write_image_folder(tmp_path / "imgs", rows[:3])
    (root / "zebra").mkdir()
    (root / "zebra" / "readme.md").write_text("no images here")
    with pytest.raises(ValidationError, match=r"class folder .*zebra holds no image"):
        load_source({"type": "image_folder", "path": "imgs"}, base_dir=tmp_path, where="source")
    with pytest.raises(ValueError, match=r"source.path: image folder not found: .*nowhere"):
        load_source({"type": "image_folder", "path": "nowhere"}, base_dir=tmp_path, where="source")
    (tmp_path / "flat").mkdir()
    with pytest.raises(ValidationError, match=r"flat has no class folder"):
        load_source({"type": "image_folder", "path": "flat"}, base_dir=tmp_path, where="source")


def test_undecodable_image_names_the_folder_and_row(tmp_path, rows):
    root = write_image_folder(tmp_path / "imgs", rows[:3])
    (root / "green" / "broken.png").write_bytes(b"not a png")
    data = load_source({"type": "image_folder", "path": "imgs"}, base_dir=tmp_path, where="source")
    with pytest.raises(ValidationError, match=r"row 'green/broken.png': cannot decode image .*imgs/green/broken.png"):
        image_features(data.features)


def test_identity_follows_image_bytes_and_class_names(tmp_path, rows):
    root = write_image_folder(tmp_path / "imgs", rows[:6])
    decl = {"type": "image_folder", "path": "imgs"}

    def key():
        return DatasetIdentity.from_files(source_files_recipe(decl, base_dir=tmp_path, where="s",
                                                              digests=FileDigests(None))).key()

    first = key()
    assert key() == first
    (root / "red" / "img002.png").write_bytes(rows[5][2])
    edited = key()
    assert edited != first
    (root / "red").rename(root / "crimson")
    assert key() not in (first, edited)


def test_python_constructor_scores_like_the_manifest(tmp_path, rows):
    from vertebrae import Benchmark, OverlapScoringConfig
    from vertebrae.extractors.callable import CallableExtractor
    from vertebrae.scoring.paired.rows import RowResamplingConfig

    write_image_folder(tmp_path / "imgs", rows)
    manifest = write_manifest(tmp_path / "m.csv", rows, tmp_path / "flat")
    folder = BenchmarkDataset.from_image_folder(tmp_path / "imgs")
    listed = BenchmarkDataset.from_image_paths(
        [str(tmp_path / "flat" / f"{rid}.png") for rid, _, _ in sorted(rows, key=lambda r: (r[1], r[0]))],
        [label for _, label, _ in sorted(rows, key=lambda r: (r[1], r[0]))],
        row_ids=[f"{label}/{rid}.png" for rid, label, _ in sorted(rows, key=lambda r: (r[1], r[0]))],
        identity=DatasetIdentity.declared("same", "1"))
    assert manifest.is_file() and folder.n_rows == listed.n_rows == 12
    assert folder.identity.kind == "files"
    scores = []
    for dataset in (folder, listed):
        # 3 classes: the comparison resamples rows; 20 subsamples (the least), not the default 200
        result = Benchmark(dataset, [CallableExtractor("px", image_features)], scoring_config=OverlapScoringConfig(k=2),
                           row_resampling=RowResamplingConfig(resamples=20)).run()
        scores.append(result.extractor_results[0].overlap.to_dict())
    assert scores[0] == scores[1]
    assert scores[0]["score"] > 0.5  # the dominant channel separates the classes
