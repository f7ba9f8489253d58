"""Issue 44 part 2: a 3-class benchmark's verdicts come from matched row subsamples, the same in the workflow as in
process (the resample scores are computed by each candidate's score job)."""

from __future__ import annotations

import numpy as np
import yaml
from sklearn.datasets import load_iris
from sklearn.preprocessing import StandardScaler

from workflow_support import snakemake, written_report


def test_iris_random_embedding_is_behind_row_resampled_in_workflow_and_in_process(tmp_path, monkeypatch):
    from vertebrae.planning.labelled import benchmarks_from_config

    X, y = load_iris(return_X_y=True)
    ids = np.array([f"r{i:03d}" for i in range(y.size)])
    (tmp_path / "data").mkdir()
    np.savez(tmp_path / "data" / "iris.npz", embeddings=StandardScaler().fit_transform(X), labels=y, ids=ids)
    np.savez(tmp_path / "data" / "random.npz", embeddings=np.random.default_rng(3).normal(size=(y.size, 8)), ids=ids)
    config = {"seed": 0, "embedding": {"shards": 1, "batch_size": 256},
              "comparison": {"resamples": 1000},
              "benchmarks": {"iris": {
                  "dataset": {"source": {"type": "npz", "path": "data/iris.npz", "ids_key": "ids"},
                              "identity": {"kind": "declared", "name": "iris-rows", "revision": "1"}},
                  "extractors": {"raw": {"type": "precomputed"},
                                 "random": {"type": "precomputed", "path": "data/random.npz", "key": "embeddings",
                                            "ids": "ids"}}}}}
    (tmp_path / "cfg.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    snakemake(tmp_path, "--configfile", "cfg.yaml")
    workflow = written_report(tmp_path, "iris")["comparison"]
    assert workflow["unit"] == "row subsample" and workflow["method"]["unit"] == "rows"
    (pair,) = workflow["pairs"]
    assert {pair["a"], pair["b"]} == {"raw", "random"} and pair["test"] == "subsampling"
    assert pair["verdict"] == ("ahead" if pair["a"] == "raw" else "behind") and pair["p_adjusted"] < 0.05
    markdown = (tmp_path / "results" / "reports" / "iris" / "report.md").read_text(encoding="utf-8")
    assert "Row-resampled comparison" in markdown and "m-out-of-n subsampling" in markdown

    monkeypatch.chdir(tmp_path)  # the config's paths are relative to the working directory
    in_process = benchmarks_from_config(config, base_dir=tmp_path)["iris"].run()
    assert in_process.comparison.to_dict() == workflow
