"""A digits benchmark declaring all four built-in labelled metrics in its config runs through Snakemake; its
report equals the in-process Benchmark's, and a built-in metric ranks (``primary_metric``) and is compared."""

from __future__ import annotations

import json

from vertebrae.workflow import benchmarks_from_config
from workflow_support import comparable, snakemake, write_config

CONFIG = {
    "seed": 0,
    "embedding": {"shards": 1, "batch_size": 512},
    "benchmarks": {
        "digits": {
            "dataset": {"source": {"type": "sklearn", "name": "digits"},
                        "identity": {"kind": "declared", "name": "sklearn-digits", "revision": "1"}},
            "extractors": {
                "pca8": {"type": "sklearn", "steps": [{"estimator": "sklearn.decomposition.PCA", "params": {"n_components": 8}}]},
                "pca16": {"type": "sklearn", "steps": [{"estimator": "sklearn.decomposition.PCA", "params": {"n_components": 16}}]},
            },
            "scoring": {"k": 2},
            "metrics": [
                {"type": "knn", "k": 10, "weighting": "temperature"},
                {"type": "linear_probe", "Cs": [0.1], "folds": 2, "inner_folds": 2, "max_iter": 200},
                {"type": "few_shot", "shots": [1, 5], "episodes": 5},
                {"type": "clustering", "n_init": 1, "repeats": 2},
            ],
            "primary_metric": "knn",
            "comparison": {"resamples": 500},
        },
    },
}


def test_all_four_metrics_through_snakemake_equal_in_process(tmp_path):
    write_config(tmp_path, CONFIG)
    snakemake(tmp_path)
    report = json.loads((tmp_path / "results/reports/digits/report.json").read_text())
    in_process = benchmarks_from_config(CONFIG, base_dir=tmp_path)["digits"].run().to_dict()
    assert comparable(report) == comparable(in_process)
    assert report["ranking"] == ["pca16", "pca8"]  # 16 components keep more of the digits than 8
    scores = report["extractor_results"][0]["metrics"]
    assert set(scores) == {"knn", "linear_probe", "few_shot", "clustering"}
    assert scores["knn"]["score"] > 0.8
    assert report["comparison"]["unit"] == "sample" and report["comparison"]["n_units"] == 1797
    assert set(report["metric_comparisons"]) == set(scores)
    markdown = (tmp_path / "results/reports/digits/report.md").read_text()
    assert "## Metrics" in markdown
