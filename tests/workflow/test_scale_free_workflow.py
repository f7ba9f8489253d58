"""Issue 48 through the workflow: a candidate and copies of it times 1e200 and 1e-170 (float64 .npy files, the
dataset's rows in order) score the same in the report, raw and PCA-compressed, under all four built-in metrics
(knn, linear_probe, few_shot, clustering) and OverlapIndex. Before the scale rule the 1e200 copy scored chance
(kNN and few-shot 1/3, clustering 0), the 1e-170 copy was refused as "zero embedding rows" and PCA of the
1e200 copy failed to converge."""

from __future__ import annotations

import numpy as np
import pytest

from workflow_support import snakemake, write_config, written_report

SCALES = {"base": 1.0, "big": 1e200, "tiny": 1e-170}


def _config(root):
    rng = np.random.default_rng(48)
    labels = np.arange(60) % 3
    (root / "data").mkdir(parents=True, exist_ok=True)
    np.savez(root / "data" / "rows.npz", embeddings=np.zeros((60, 1)), labels=labels,
             ids=np.array([f"r{i:02d}" for i in range(60)]))
    x = 1.2 * rng.normal(size=(3, 6))[labels] + rng.normal(size=(60, 6))
    for name, scale in SCALES.items():
        np.save(root / "data" / f"{name}.npy", x * scale)
    return {
        "seed": 0,
        "embedding": {"shards": 1, "batch_size": 64},
        "benchmarks": {"scaled": {
            "dataset": {"source": {"type": "npz", "path": "data/rows.npz", "ids_key": "ids"},
                        "identity": {"kind": "declared", "name": "scaled", "revision": "1"}},
            "extractors": {name: {"type": "precomputed", "path": f"data/{name}.npy"} for name in SCALES},
            "scoring": {"k": 3},
            "compression": [{"method": "pca", "n_components": 3}],
            "metrics": [
                {"type": "knn", "k": 5},
                {"type": "linear_probe", "Cs": [0.1, 1.0], "folds": 2, "inner_folds": 2, "max_iter": 200},
                {"type": "few_shot", "shots": [1, 5], "episodes": 5},
                {"type": "clustering", "n_init": 2, "repeats": 2},
            ],
            "comparison": {"resamples": 200},
            # scale is what this test is about: the per-class comparison spares the 1,200 subsample fits of a
            # row-resampled one (24 more partial jobs of 50 subsamples)
            "row_resampling": {"mode": "class"},
        }},
    }


def test_a_candidate_and_its_multiples_score_the_same_in_the_report(tmp_path):
    write_config(tmp_path, _config(tmp_path))
    snakemake(tmp_path)
    results = {r["name"]: r for r in written_report(tmp_path, "scaled")["extractor_results"]}
    assert set(results) == {*SCALES, *(f"{name}[pca_3]" for name in SCALES)}
    for variant in ("", "[pca_3]"):
        base = results[f"base{variant}"]
        assert base["metrics"]["knn"]["score"] > 0.6  # a real signal, not chance
        for name in ("big", "tiny"):
            other = results[f"{name}{variant}"]
            for metric, value in base["metrics"].items():
                assert other["metrics"][metric]["score"] == value["score"], (name, variant, metric)
                assert other["metrics"][metric]["diagnostics"] == value["diagnostics"], (name, variant, metric)
            assert other["overlap"]["score"] == pytest.approx(base["overlap"]["score"], rel=1e-9, abs=1e-12)
