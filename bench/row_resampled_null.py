"""Calibration of the row-resampled comparison (``vertebrae.scoring.paired.rows``) under a null.

Each simulated dataset: 3 Gaussian classes (40 rows each, 6 dims, class means 1.5 apart on their own axis); two
candidates of equal quality = the same embedding plus two independent noise draws of the same strength. The pair
is compared by matched m-out-of-n row subsamples; a rejection is an adjusted p below alpha. The rejection rate over
the datasets should be at most 2 x alpha. Prints one line per dataset, then ``row_resampled_null_rejection=X``.

    .venv/bin/python bench/row_resampled_null.py [--datasets 40] [--resamples 100]
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np

from vertebrae.core.identity import DatasetIdentity
from vertebrae.data.labelled import BenchmarkDataset
from vertebrae.scoring.overlap import OverlapIndexScorer
from vertebrae.scoring.paired import ComparisonConfig
from vertebrae.scoring.paired.rows import RowResamplingConfig, compare_row_resamples
from vertebrae.scoring.stability import run_stability_analysis


def one(seed: int, resamples: int, alpha: float) -> float:
    rng = np.random.default_rng(seed)
    labels = np.repeat(np.arange(3), 40)
    base = rng.normal(size=(labels.size, 6))
    base[np.arange(labels.size), labels] += 1.5
    dataset = BenchmarkDataset.from_arrays(base, labels, identity=DatasetIdentity.declared(f"null-{seed}", "1"))
    rows = RowResamplingConfig(resamples=resamples)
    points, resampled = [], []
    for draw in range(2):
        z = base + rng.normal(size=base.shape) * 1.0
        points.append(OverlapIndexScorer(None).score_targets(z, dataset.targets, seed=0, row_ids=dataset.row_ids).score)
        st = run_stability_analysis(z, dataset.targets, stability_config=rows.stability_config(), row_ids=dataset.row_ids)
        resampled.append(st.scores)
    n, b = labels.size, st.effective_sample_counts[0]
    doc = compare_row_resamples(["a", "b"], points, resampled, n_rows=n, subsample_rows=b, n_classes=3,
                                config=ComparisonConfig(alpha=alpha), rows=rows)
    return doc.pairs[0]["p_adjusted"]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--datasets", type=int, default=40)
    parser.add_argument("--resamples", type=int, default=100)
    parser.add_argument("--alpha", type=float, default=0.05)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    rejected = 0
    for seed in range(args.datasets):
        p = one(seed, args.resamples, args.alpha)
        rejected += p < args.alpha
        print(f"dataset {seed:3d}  p = {p:.4f}{'  rejected' if p < args.alpha else ''}", flush=True)
    print(f"row_resampled_null_rejection={rejected / args.datasets:.4f}")


if __name__ == "__main__":
    main()
