"""Probe-summary helpers that need no separatix run (the summaries of real runs are checked in test_scorer.py)."""

from __future__ import annotations

from vertebrae.scoring.separatix.probes import metric_direction


def test_metric_directions():
    for name in ("balanced_accuracy", "accuracy", "macro_f1", "micro_f1", "sample_jaccard", "r2_variance_weighted"):
        assert metric_direction(name) == "larger_is_better"
    for name in ("normalized_rmse_mean", "mae", "rmse", "hamming_loss"):
        assert metric_direction(name) == "smaller_is_better"
    for name in ("stability_balanced_accuracy_std", "per_target_r2_summary.min", "model_name"):
        assert metric_direction(name) is None
