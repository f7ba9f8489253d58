"""Multi-label and regression benchmarks through Snakemake, with stability and a compression variant,
against the in-process Benchmark for the same config (single-label is covered by the default config)."""

from __future__ import annotations

import json

import numpy as np

from vertebrae.planning import benchmarks_from_config
from workflow_support import comparable, job_counts, snakemake, write_config



def test_multilabel_and_regression_workflows_match_in_process(tmp_path):
    rng = np.random.default_rng(7)
    n = 300
    indicator = (rng.random((n, 3)) < 0.4).astype(np.int8)
    indicator[indicator.sum(axis=1) == 0, 0] = 1
    X = rng.normal(size=(n, 8)) + 2.5 * np.pad(indicator, ((0, 0), (0, 5)))
    (tmp_path / "data").mkdir()
    np.savez(tmp_path / "data/multilabel.npz", embeddings=X, labels=indicator)
    Z = rng.normal(size=(240, 6))
    target = Z[:, 0] * 2 + Z[:, 1] + 0.1 * rng.normal(size=240)
    np.savez(tmp_path / "data/regression.npz", embeddings=Z, labels=target)
    config = {
        "embedding": {"shards": 2, "batch_size": 50},
        "benchmarks": {
            "tags": {
                "dataset": {
                    "source": {"type": "npz", "path": "data/multilabel.npz"},
                    "identity": {"kind": "content"},
                    "target_type": "multilabel",
                    "label_names": ["cat", "dog", 7],
                },
                "extractors": {
                    "raw": {"type": "precomputed"},
                    "pca4": {"type": "sklearn", "steps": [{"estimator": "sklearn.decomposition.PCA", "params": {"n_components": 4}}]},
                },
                "compression": [{"method": "truncated_svd", "n_components": 3}],
                "scoring": {"k": 3},
                "stability": {"enabled": True, "repeats": 3},
            },
            "dose": {
                "dataset": {
                    "source": {"type": "npz", "path": "data/regression.npz"},
                    "identity": {"kind": "declared", "name": "dose-response", "revision": "2"},
                    "target_type": "regression",
                    "target_names": ["response"],
                },
                "extractors": {"raw": {"type": "precomputed"}},
                "compression": [{"method": "gaussian_random_projection", "n_components": 4}],
                "continuous_scoring": {"k": 3, "n_null_permutations": 2},
                "stability": {"enabled": True, "mode": "subsample", "subsample_fraction": 0.8, "repeats": 2},
            },
        },
    }
    write_config(tmp_path, config)
    counts = job_counts(snakemake(tmp_path, "-n", "--quiet", "rules").stdout)
    assert counts["compress"] == 3 and counts["score"] == 6 and counts["report"] == 2
    snakemake(tmp_path)
    in_process = benchmarks_from_config(config, base_dir=tmp_path)
    reports = {}
    for name in ("tags", "dose"):
        reports[name] = json.loads((tmp_path / f"results/reports/{name}/report.json").read_text())
        assert comparable(reports[name]) == comparable(in_process[name].run().to_dict())

    tags = reports["tags"]
    assert [r["name"] for r in tags["extractor_results"]] == ["raw", "raw[truncated_svd_3]", "pca4", "pca4[truncated_svd_3]"]
    assert tags["dataset_summary"]["target_type"] == "multilabel"
    assert tags["dataset_summary"]["labels"] == {"@int:7": "7", "cat": "cat", "dog": "dog"}
    raw = tags["extractor_results"][0]
    assert set(raw["overlap"]["per_class_scores"]) == {"@int:7", "cat", "dog"}
    assert raw["stability"]["repeats"] == 3 and raw["stability"]["mode"] == "prototype"
    assert tags["extractor_results"][1]["compression_metadata"]["compressed_dim"] == 3

    dose = reports["dose"]
    assert dose["dataset_summary"]["target_names"] == ["response"]
    raw = dose["extractor_results"][0]
    assert raw["overlap"]["target_type"] == "regression" and raw["overlap"]["loss_ratio"] < 1.0
    assert raw["stability"]["mode"] == "subsample" and raw["stability"]["effective_sample_counts"] == [192, 192]
    assert dose["extractor_results"][1]["name"] == "raw[gaussian_random_projection_4]"
