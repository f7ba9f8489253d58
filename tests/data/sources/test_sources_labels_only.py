"""Labels-only tables (issue 27): a csv / npz / hdf5 / hf_dataset source with ids and labels and no features is valid when every
candidate brings its own rows (precomputed files aligned by id); a candidate that needs the dataset's inputs is
refused at plan time, naming it."""

from __future__ import annotations

import h5py
import numpy as np
import pytest

from vertebrae.core.errors import ConfigError
from vertebrae.data.sources import load_source, source_labels_only, source_row_count
from vertebrae.planning import benchmarks_from_config, plan

IDS = [f"r{i:02d}" for i in range(30)]
LABELS = [("a", "b", "c")[i % 3] for i in range(30)]


def _write(tmp_path, kind: str) -> dict:
    if kind == "csv":
        (tmp_path / "labels.csv").write_text("id,label\n" + "".join(f"{i},{y}\n" for i, y in zip(IDS, LABELS)))
        return {"type": "csv", "path": "labels.csv", "id_column": "id"}
    if kind == "npz":
        np.savez(tmp_path / "labels.npz", labels=np.array(LABELS), ids=np.array(IDS))
        return {"type": "npz", "path": "labels.npz", "ids_key": "ids"}
    if kind == "hf_dataset":  # a Hub-style folder of Parquet files, without a text or image column
        import pyarrow as pa
        import pyarrow.parquet as pq

        (tmp_path / "labels.hf").mkdir()
        pq.write_table(pa.table({"id": IDS, "label": LABELS}), tmp_path / "labels.hf" / "train-00000-of-00001.parquet")
        return {"type": "hf_dataset", "path": "labels.hf", "id_column": "id"}
    with h5py.File(tmp_path / "labels.h5", "w") as handle:
        handle["labels"] = np.array(LABELS, dtype="S")
        handle["ids"] = np.array(IDS, dtype="S")
    return {"type": "hdf5", "path": "labels.h5", "ids_dataset": "ids"}


@pytest.mark.parametrize("kind", ["csv", "npz", "hdf5", "hf_dataset"])
def test_a_table_of_ids_and_labels_loads_as_labels_only(tmp_path, kind):
    decl = _write(tmp_path, kind)
    why = source_labels_only(decl, base_dir=tmp_path, where="s")
    assert why is not None and "labels." in why
    assert source_row_count(decl, base_dir=tmp_path, where="s") == 30
    data = load_source(decl, base_dir=tmp_path, where="s")
    assert data.labels_only == why and data.row_ids == IDS and data.labels == LABELS
    assert data.features.shape == (30, 1) and not data.features.any()  # a placeholder, never embedded
    part = load_source(decl, base_dir=tmp_path, where="s", rows=(3, 7))
    assert part.row_ids == IDS[3:7] and part.features.shape == (4, 1)


def test_a_table_with_features_is_not_labels_only(tmp_path):
    (tmp_path / "t.csv").write_text("id,x,label\nr1,0.5,a\nr2,1.5,b\n")
    assert source_labels_only({"type": "csv", "path": "t.csv", "id_column": "id"}, base_dir=tmp_path, where="s") is None
    np.savez(tmp_path / "t.npz", embeddings=np.ones((2, 3)), labels=np.array(["a", "b"]))
    assert source_labels_only({"type": "npz", "path": "t.npz"}, base_dir=tmp_path, where="s") is None
    assert load_source({"type": "npz", "path": "t.npz"}, base_dir=tmp_path, where="s").labels_only is None


def test_a_labels_only_hf_dataset_is_refused_in_python_and_as_a_retrieval_side(tmp_path, monkeypatch):
    from vertebrae.core.errors import ValidationError
    from vertebrae.data.labelled import BenchmarkDataset
    from vertebrae.data.declared.retrieval import load_retrieval_source

    monkeypatch.chdir(tmp_path)
    _write(tmp_path, "hf_dataset")
    with pytest.raises(ValidationError, match=r"labels\.hf declares no text_column nor image_column: a dataset built "
                                              r"in Python needs its inputs"):
        BenchmarkDataset.from_hf_dataset("labels.hf", id_column="id")
    side = {"type": "hf_dataset", "path": "labels.hf", "id_column": "id"}
    with pytest.raises(ConfigError, match=r"r\.queries: a retrieval side embeds its rows"):
        load_retrieval_source({"type": "source_pair", "queries": side, "gallery": side, "relevance": "same_label"},
                              base_dir=tmp_path, where="r")


def _config(decl: dict, extractors: dict) -> dict:
    return {"embedding": {"shards": 1, "batch_size": 64}, "benchmarks": {"tbl": {
        "dataset": {"source": decl}, "extractors": extractors,
        "stability": {"enabled": False}, "separatix": {"enabled": False},
        "row_resampling": {"resamples": 20}}}}  # 3 classes resample rows: 20 subsamples (the least), not 200


@pytest.mark.parametrize("kind", ["csv", "npz", "hdf5", "hf_dataset"])
def test_candidates_with_their_own_rows_plan_and_others_are_refused_by_name(tmp_path, kind, monkeypatch):
    monkeypatch.chdir(tmp_path)
    decl = _write(tmp_path, kind)
    rng = np.random.default_rng(0)
    order = rng.permutation(30)
    np.savez(tmp_path / "emb.npz", embeddings=rng.normal(size=(30, 4))[order], ids=np.array(IDS)[order])
    own = {"model": {"type": "precomputed", "path": "emb.npz", "ids": "ids"}}
    planned = plan(_config(decl, own), base_dir=tmp_path)
    assert [s["extractor"]["name"] for s in planned.specs.values() if s["stage"] == "embed"] == ["model"]
    result = benchmarks_from_config(_config(decl, own), base_dir=tmp_path)["tbl"].run()  # in process too
    assert result.to_dict()["extractor_results"][0]["primary_score"] is not None
    for needs_inputs in ({"type": "precomputed"},
                         {"type": "sklearn", "steps": [{"estimator": "sklearn.preprocessing.StandardScaler"}]}):
        extractors = {**own, "pca": needs_inputs}
        for build in (lambda c: plan(c, base_dir=tmp_path), lambda c: benchmarks_from_config(c, base_dir=tmp_path)):
            with pytest.raises(ConfigError, match=r"benchmarks\.tbl\.extractors\.pca: candidate 'pca' needs the "
                                                  r"dataset's inputs, but benchmarks\.tbl\.dataset\.source is a "
                                                  r"labels-only table"):
                build(_config(decl, extractors))


def test_a_label_split_of_a_labels_only_table_needs_own_rows_and_grades_by_label(tmp_path, monkeypatch):
    from vertebrae.data.declared.retrieval import load_retrieval_source

    monkeypatch.chdir(tmp_path)
    decl = _write(tmp_path, "csv")
    split = {"type": "label_split", "source": decl, "grade": "label_and_mean"}
    with pytest.raises(ConfigError, match=r"r\.grade: label_and_mean needs feature rows; CSV file .*labels\.csv has no "
                                          r"feature columns"):
        load_retrieval_source(split, base_dir=tmp_path, where="r")
    config = {"retrieval": {"s": {"dataset": {"source": {**split, "grade": "label"}},
                                  "extractors": {"raw": {"type": "precomputed"}}}}}
    with pytest.raises(ConfigError, match=r"retrieval\.s\.extractors\.raw: candidate 'raw' needs the dataset's inputs"):
        plan(config, base_dir=tmp_path)
