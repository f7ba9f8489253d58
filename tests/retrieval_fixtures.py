"""Toy retrieval data shared by the tests of vertebrae.data.relevance, .retrieval_protocol and .retrieval: two
queries, three gallery items and hand-written grades."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from vertebrae import DatasetIdentity, VertebraeError
from vertebrae.data.retrieval import RetrievalDataset

ID = DatasetIdentity.declared("toy-retrieval", "1")
Q_IDS = ["q1", "q2"]
G_IDS = ["a", "b", "c"]
# Hand-written grades: q1 -> b (2); q2 -> a (1), c (0.5).
GRADES = [[0.0, 2.0, 0.0], [1.0, 0.0, 0.5]]


def _q(n=2, d=3):
    return np.arange(n * d, dtype=np.float64).reshape(n, d) + 1.0


def _g(n=3, d=3):
    return np.arange(n * d, dtype=np.float64).reshape(n, d) - 2.0


def _raises(exc_type, fn, *args, **kwargs) -> str:
    with pytest.raises(exc_type) as info:
        fn(*args, **kwargs)
    assert isinstance(info.value, VertebraeError) and isinstance(info.value, ValueError)
    return str(info.value)


def _build(relevance, **kwargs):
    kwargs.setdefault("query_ids", Q_IDS)
    kwargs.setdefault("gallery_ids", G_IDS)
    kwargs.setdefault("identity", ID)
    queries, gallery = _q(len(kwargs["query_ids"])), _g(len(kwargs["gallery_ids"]))
    return RetrievalDataset.from_embeddings(queries, gallery, relevance, **kwargs)


def _same_csr(a, b):
    assert isinstance(a, sp.csr_matrix) and isinstance(b, sp.csr_matrix)
    assert a.dtype == b.dtype == np.float64 and a.shape == b.shape
    assert a.has_sorted_indices and b.has_sorted_indices
    np.testing.assert_array_equal(a.indptr, b.indptr)
    np.testing.assert_array_equal(a.indices, b.indices)
    np.testing.assert_array_equal(a.data, b.data)
