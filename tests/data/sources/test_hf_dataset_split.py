"""``split:`` on an hf_dataset that has no splits (issue 48): a Dataset saved by ``save_to_disk`` without a split, or one
data file not named after it, used to ignore the key and read every row; it is refused naming the key and the path.
A Dataset saved with the split named, and a file named after it, still read."""

from __future__ import annotations

import pytest

from vertebrae.core.errors import ConfigError
from vertebrae.data.labelled import BenchmarkDataset
from vertebrae.data.sources import load_source, source_row_count

datasets = pytest.importorskip("datasets")
WHERE = "benchmarks.t.dataset.source"


@pytest.fixture()
def plain(tmp_path):
    datasets.disable_progress_bars()
    datasets.Dataset.from_dict({"text": ["a b", "c d", "e f"], "label": [0, 1, 0]}).save_to_disk(str(tmp_path / "ds"))
    return tmp_path / "ds"


def test_a_split_of_a_dataset_without_splits_is_refused_naming_the_key_and_folder(plain):
    decl = {"type": "hf_dataset", "path": "ds", "split": "test", "text_column": "text"}
    message = (f"{WHERE}.split: {plain} is a single Dataset saved by save_to_disk, without splits (not a DatasetDict), "
               "so split 'test' names nothing in it; leave split out to read all its rows")
    for read in (source_row_count, load_source):
        with pytest.raises(ConfigError) as info:
            read(decl, base_dir=plain.parent, where=WHERE)
        assert str(info.value) == message
    with pytest.raises(ConfigError, match=r"split 'test' names nothing in it"):
        BenchmarkDataset.from_hf_dataset(plain, split="test", text_column="text")
    del decl["split"]
    assert load_source(decl, base_dir=plain.parent, where=WHERE).labels == [0, 1, 0]


def test_a_dataset_saved_with_its_split_named_reads_that_split(tmp_path):
    datasets.disable_progress_bars()
    ds = datasets.Dataset.from_dict({"text": ["a", "b"], "label": [0, 1]}, split=datasets.Split("train"))
    ds.save_to_disk(str(tmp_path / "ds"))
    decl = {"type": "hf_dataset", "path": "ds", "split": "train", "text_column": "text"}
    assert source_row_count(decl, base_dir=tmp_path, where=WHERE) == 2


def test_a_split_of_one_data_file_not_named_after_it_is_refused(tmp_path):
    table = datasets.Dataset.from_dict({"text": ["a", "b"], "label": [0, 1]})
    table.to_parquet(str(tmp_path / "all.parquet"))
    table.to_parquet(str(tmp_path / "train-00000-of-00001.parquet"))
    decl = {"type": "hf_dataset", "path": "all.parquet", "split": "train", "text_column": "text"}
    with pytest.raises(ConfigError) as info:
        source_row_count(decl, base_dir=tmp_path, where=WHERE)
    assert str(info.value) == (f"{WHERE}.split: {tmp_path / 'all.parquet'} is one data file, not named after split "
                               "'train'; leave split out to read it, or give the dataset folder")
    decl["path"] = "train-00000-of-00001.parquet"
    assert source_row_count(decl, base_dir=tmp_path, where=WHERE) == 2
