"""Importable custom metrics for the tests (``pythonpath = ["tests"]`` makes this ``metric_fixtures:name``).

Every function follows the CallableMetric contract
``fn(embeddings, labels, *, target_metadata=None, groups=None, seed=None)``; the values they return are simple
enough to work out by hand in the tests.
"""

from __future__ import annotations

import numpy as np


def embedding_width(embeddings, labels, *, target_metadata=None, groups=None, seed=None):
    """score = the number of embedding columns (a hand-checkable value unrelated to class separation)."""
    return {"score": float(embeddings.shape[1]), "diagnostics": {"n_rows": int(embeddings.shape[0])}}


def first_column_mean(embeddings, labels, *, target_metadata=None, groups=None, seed=None):
    """score = the mean of the first embedding column (a plain number, not a dict)."""
    return float(np.asarray(embeddings[:, 0]).mean())


def echo_inputs(embeddings, labels, *, target_metadata=None, groups=None, seed=None):
    """Records what crossed the metric boundary, so tests can compare it with hand-written expectations."""
    if isinstance(labels, np.ndarray):
        seen_labels = [str(v) if labels.dtype == object else float(v) for v in labels.tolist()]
    else:
        seen_labels = [list(row) for row in labels]
    return {
        "score": 0.0,
        "diagnostics": {
            "labels": seen_labels,
            "labels_type": type(labels).__name__,
            "groups": None if groups is None else [str(g) for g in groups.tolist()],
            "groups_type": None if groups is None else type(groups).__name__,
            "target_metadata": target_metadata,
            "seed": seed,
        },
    }


def never_valid(embeddings, labels, *, target_metadata=None, groups=None, seed=None):
    """A finite score that declares itself not fit for ranking."""
    return {"score": 1.0, "aggregate_valid": False, "warnings": ["never_valid: not rankable by design"]}


def narrow_only(embeddings, labels, *, target_metadata=None, groups=None, seed=None):
    """score = embedding width, aggregate-valid only for fewer than 5 columns."""
    return {"score": float(embeddings.shape[1]), "aggregate_valid": bool(embeddings.shape[1] < 5)}
