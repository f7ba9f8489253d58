"""The labelled report names the published recipe a metric was computed with (the linear probe's
``recipe: clip_benchmark | mteb``); our default recipe adds no line."""

from __future__ import annotations

import numpy as np

from vertebrae import Benchmark, BenchmarkDataset, DatasetIdentity, LinearProbeMetric, PrecomputedExtractor
from vertebrae.reports.markdown import render_markdown
from vertebrae.scoring.paired.rows import RowResamplingConfig


def _report(metrics):
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(3), 30)
    x = rng.normal(size=(len(y), 5))
    x[np.arange(len(y)), y] += 3.0
    dataset = BenchmarkDataset.from_embeddings(x, [f"c{v}" for v in y], identity=DatasetIdentity.declared("blobs", "1"))
    # 3 classes: the comparison resamples rows; 20 subsamples (the least), not the default 200
    return render_markdown(Benchmark(dataset, [PrecomputedExtractor("p")], metrics=metrics,
                                     row_resampling=RowResamplingConfig(resamples=20), seed=5).run())


def test_a_published_recipe_is_named_under_the_metrics_table():
    text = _report([LinearProbeMetric(recipe="mteb", n_experiments=2, folds=3, name="probe_mteb"),
                    LinearProbeMetric(folds=3, inner_folds=2, Cs=(1.0,), name="probe")])
    metrics = text.split("## Metrics\n", 1)[1].split("\n## ", 1)[0]
    assert "- probe_mteb is computed with recipe mteb (docs/conventions.md, 'Labelled metrics')." in metrics
    assert "- probe is computed" not in metrics
