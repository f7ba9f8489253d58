"""webdataset sources: brace patterns, image and label keys (cls, txt, json field), sample keys as row ids, rows read
only from the shards that hold them; errors naming the shard and the key; identity following the shards."""

from __future__ import annotations

import pytest

from format_fixtures import CLASSES, image_features, tiny_images, write_tar_shards
from vertebrae.core.errors import ConfigError, ValidationError
from vertebrae.core.file_digests import FileDigests
from vertebrae.core.identity import DatasetIdentity
from vertebrae.data.sources import webdataset as wds_module
from vertebrae.data.labelled import BenchmarkDataset
from vertebrae.data.sources.files import source_files_recipe
from vertebrae.data.sources import load_source, source_row_count

PATTERN = "shards/train-{000000..000002}.tar"


@pytest.fixture(scope="module")
def rows():
    return tiny_images(13)


@pytest.mark.parametrize("label, extra", [("cls", {}), ("txt", {"label_key": "txt"}),
                                          ("json", {"label_key": "json", "label_field": "label"})])
def test_labels_ids_and_images(tmp_path, rows, label, extra):
    write_tar_shards(tmp_path / "shards", rows, label=label)
    decl = {"type": "webdataset", "path": PATTERN, **extra}
    data = load_source(decl, base_dir=tmp_path, where="source")
    assert data.row_ids == [rid for rid, _, _ in rows]
    names = [name for _, name, _ in rows]
    assert data.labels == ([CLASSES.index(n) for n in names] if label == "cls" else names)
    pixels = image_features(data.features)
    assert [CLASSES[int(p[:3].argmax())] for p in pixels] == names
    assert source_row_count(decl, base_dir=tmp_path, where="source") == 13


def test_a_row_range_reads_only_its_shards(tmp_path, rows, monkeypatch):
    paths = write_tar_shards(tmp_path / "shards", rows)  # 5 + 5 + 3 samples
    decl = {"type": "webdataset", "path": PATTERN}
    full = load_source(decl, base_dir=tmp_path, where="source")
    opened = []
    real_open = open

    def spying_open(path, *args, **kwargs):
        opened.append(str(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(wds_module, "open", spying_open, raising=False)  # the reader's data reads, not its headers
    part = load_source(decl, base_dir=tmp_path, where="source", rows=(5, 9))
    assert part.row_ids == full.row_ids[5:9] and part.labels == full.labels[5:9]
    assert opened == [str(paths[1])]
    assert all(str(paths[1]) in value for value in part.features.values)


def test_missing_label_missing_shard_and_bad_image_are_named(tmp_path, rows):
    import io
    import tarfile

    write_tar_shards(tmp_path / "shards", rows)
    with tarfile.open(tmp_path / "shards" / "train-000000.tar", "a") as tar:
        info = tarfile.TarInfo("orphan.png")
        info.size = len(rows[0][2])
        tar.addfile(info, io.BytesIO(rows[0][2]))
    with pytest.raises(ValidationError, match=r"shard .*train-000000.tar, sample 'orphan': no label member "
                                              r"\(orphan.cls\); its members: png"):
        source_row_count({"type": "webdataset", "path": PATTERN}, base_dir=tmp_path, where="source")
    with pytest.raises(ConfigError, match=r"source.path: 1 of 4 shard\(s\) .* not found: .*train-000003.tar"):
        source_row_count({"type": "webdataset", "path": "shards/train-{000000..000003}.tar"}, base_dir=tmp_path,
                         where="source")
    write_tar_shards(tmp_path / "bad", [("k0", "red", b"garbage"), *rows[:2]])
    data = load_source({"type": "webdataset", "path": "bad/train-000000.tar"}, base_dir=tmp_path, where="source")
    with pytest.raises(ValidationError, match=r"row 'k0': cannot decode image .*bad/train-000000.tar \(member data"):
        image_features(data.features)


def test_identity_follows_the_shards_and_python_constructor(tmp_path, rows):
    write_tar_shards(tmp_path / "shards", rows, label="txt")
    decl = {"type": "webdataset", "path": str(tmp_path / PATTERN), "label_key": "txt"}

    def key():
        return DatasetIdentity.from_files(source_files_recipe(decl, base_dir=tmp_path, where="s",
                                                              digests=FileDigests(None))).key()

    first = key()
    dataset = BenchmarkDataset.from_webdataset(str(tmp_path / PATTERN), label_key="txt")
    assert dataset.identity.key() == first and dataset.n_rows == 13
    write_tar_shards(tmp_path / "shards", rows[::-1], label="txt")
    assert key() != first


def test_a_gzip_compressed_shard_is_refused_naming_the_file(tmp_path, rows):
    import gzip
    import shutil

    write_tar_shards(tmp_path / "shards", rows)
    with open(tmp_path / "shards" / "train-000001.tar", "rb") as src, gzip.open(tmp_path / "shards" / "train-000001.tar.gz", "wb") as dst:
        shutil.copyfileobj(src, dst)
    decl = {"type": "webdataset", "path": "shards/train-{000000.tar,000001.tar.gz}"}
    for read in (lambda: source_row_count(decl, base_dir=tmp_path, where="source"),
                 lambda: load_source(decl, base_dir=tmp_path, where="source")):
        with pytest.raises(ConfigError, match=r"source.path: shard .*train-000001.tar.gz is not an uncompressed .tar "
                                              r"file \(gzip-compressed: `gunzip` it"):
            read()


def test_segments_from_headers_are_where_the_rows_change_tar(tmp_path, rows):
    """The plan's segments (tar headers only) are the ones the in-process path finds in the rows' tar references:
    a labelled source, and both sides of a label_split over it; a shard named twice is refused."""
    from vertebrae.data.declared.retrieval import load_retrieval_source, retrieval_segments
    from vertebrae.data.sources.webdataset import source_segments
    from vertebrae.stages.common import tar_segments

    write_tar_shards(tmp_path / "shards", rows)  # 5 + 5 + 3 samples
    decl = {"type": "webdataset", "path": PATTERN}
    assert source_segments(decl, base_dir=tmp_path, where="source") == [0, 5, 10]
    assert tar_segments(load_source(decl, base_dir=tmp_path, where="source").features) == [0, 5, 10]
    split = {"type": "label_split", "query_every": 3, "source": decl}
    data = load_retrieval_source(split, base_dir=tmp_path, where="source")
    assert retrieval_segments(split, base_dir=tmp_path, where="source") == (
        tar_segments(data.queries), tar_segments(data.gallery)) == ([0, 2, 4], [0, 3, 6])
    assert source_segments({"type": "npz", "path": "x.npz"}, base_dir=tmp_path, where="source") is None
    with pytest.raises(ConfigError, match="more than once"):
        source_segments({"type": "webdataset", "path": "shards/train-{000000,000001,000000}.tar"}, base_dir=tmp_path,
                        where="source")


def test_planned_rows_open_only_their_shards_checked_against_the_plan(tmp_path, rows):
    """``read_planned_rows`` gives ``read_wds_rows``' rows from the recorded counts and digests alone: the other
    shards may be gone; a missing, edited or miscounted own shard, or a plan of another shard count, is refused."""
    import shutil

    from vertebrae.data.sources.webdataset import WebDatasetSpec, read_planned_rows, read_wds_rows, wds_tars

    write_tar_shards(tmp_path / "shards", rows)  # 5 + 5 + 3 samples
    decl = {"type": "webdataset", "path": PATTERN}
    digests = FileDigests(None)
    spec = WebDatasetSpec.from_decl(decl, base_dir=tmp_path, where="source")
    tars = wds_tars(spec, digests)
    assert [count for count, _ in tars] == [5, 5, 3]
    expected = read_wds_rows(spec, (5, 10))
    (tmp_path / "shards" / "train-000000.tar").unlink()
    (tmp_path / "shards" / "train-000002.tar").unlink()
    alone = WebDatasetSpec.from_decl(decl, base_dir=tmp_path, where="source", check_files=False)
    got = read_planned_rows(alone, tars, (5, 10), digests)
    assert (got.inputs.values, got.row_ids, got.labels) == (expected.inputs.values, expected.row_ids, expected.labels)
    with pytest.raises(ValidationError, match="train-000000.tar of the plan is missing"):
        read_planned_rows(alone, tars, (0, 5), digests)
    with pytest.raises(ValidationError, match="names 3 shard"):
        read_planned_rows(alone, tars[:2], (5, 10), digests)
    with pytest.raises(ValidationError, match="holds 5 samples, the plan recorded 4"):
        read_planned_rows(alone, [tars[0], [4, tars[1][1]], tars[2]], (5, 9), digests)
    shutil.copyfile(tmp_path / "shards" / "train-000001.tar", tmp_path / "other.tar")
    write_tar_shards(tmp_path / "shards", rows[:5], per_shard=5)  # train-000000.tar again, now with no 000001's data
    shutil.copyfile(tmp_path / "shards" / "train-000000.tar", tmp_path / "shards" / "train-000001.tar")
    with pytest.raises(ValidationError, match="train-000001.tar changed since the plan was made; re-plan"):
        read_planned_rows(alone, tars, (5, 10), FileDigests(None))
