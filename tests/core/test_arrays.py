from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from vertebrae.core.arrays import as_matrix, check_finite, encode_row_ids, paired_matrices, stack_blocks
from vertebrae.core.errors import ValidationError


def test_as_matrix_keeps_float_dtype_and_makes_sparse_csr():
    dense = np.ones((2, 3), dtype=np.float32)
    assert as_matrix(dense, what="x") is dense
    assert as_matrix(np.ones((2, 3), dtype=np.int8), what="x").dtype == np.float64
    assert sp.isspmatrix_csr(as_matrix(sp.coo_matrix(np.eye(3)), what="x"))
    with pytest.raises(ValidationError, match=r"^x must be a 2-D matrix"):
        as_matrix(np.ones(3), what="x")


def test_check_finite_names_the_row_ids_and_their_index():
    matrix = np.array([[1.0, 2.0], [np.nan, 0.0], [0.0, np.inf]])
    with pytest.raises(ValidationError, match=r"^emb: 2 row\(s\) contain NaN or infinite values: row id 'b' \(index 11\), 'c' \(index 12\)$"):
        check_finite(matrix, ("a", "b", "c"), what="emb", offset=10)
    check_finite(sp.csr_matrix(np.eye(2)), ("a", "b"), what="emb")


def test_encode_row_ids_refuses_duplicates_and_bools():
    assert encode_row_ids(None, 2, what="x") == ("@int:0", "@int:1")
    with pytest.raises(ValidationError, match=r"duplicate row id 'a' at rows \[0, 2\]"):
        encode_row_ids(["a", "b", "a"], 3, what="x")
    with pytest.raises(ValidationError, match=r"must be a str or an int"):
        encode_row_ids([True, 2], 2, what="x")


def test_stack_blocks_refuses_mixed_widths_and_stays_sparse():
    assert sp.issparse(stack_blocks([np.ones((1, 2)), sp.csr_matrix(np.ones((2, 2)))], "m"))
    with pytest.raises(ValidationError, match=r"different widths: \[2, 3\]"):
        stack_blocks([np.ones((1, 2)), np.ones((1, 3))], "m")


def test_paired_matrices_refuse_an_empty_side_and_a_width_mismatch():
    a, b = paired_matrices(np.ones((2, 3)), np.ones((4, 3)), what=("A", "B"), need="needs rows")
    assert a.shape == (2, 3) and b.shape == (4, 3)
    with pytest.raises(ValidationError, match=r"^needs rows, got 2 and 0$"):
        paired_matrices(np.ones((2, 3)), np.ones((0, 3)), what=("A", "B"), need="needs rows")
    with pytest.raises(ValidationError, match=r"^A have 3 dimensions but B have 4; one space$"):
        paired_matrices(np.ones((2, 3)), np.ones((1, 4)), what=("A", "B"), need="x", mismatch_note="; one space")


def test_zero_width_matrices_are_refused_naming_what():
    for empty in (np.zeros((60, 0)), sp.csr_matrix((60, 0)), np.zeros((2, 0), dtype=np.int64)):
        with pytest.raises(ValidationError, match=r"^emb have no dimensions \(shape \((60|2), 0\)\)"):
            as_matrix(empty, what="emb")
    # 0 x 0 passes the width gate, so the caller's "no rows" check speaks (it names the endpoint)
    assert as_matrix(np.zeros((0, 0)), what="emb").shape == (0, 0)
    with pytest.raises(ValidationError, match=r"^B have no dimensions"):
        paired_matrices(np.ones((2, 3)), np.ones((2, 0)), what=("A", "B"), need="x")


def test_a_zero_width_embedding_reaches_no_scorer():
    # Before: sklearn's normalize raised a raw "Found array with 0 feature(s)" ValueError.
    from vertebrae import BenchmarkDataset, DatasetIdentity
    from vertebrae.scoring.overlap import OverlapIndexScorer

    labels = [0, 1, 2] * 20
    with pytest.raises(ValidationError, match=r"^embeddings have no dimensions \(shape \(60, 0\)\)"):
        OverlapIndexScorer().score(np.zeros((60, 0)), labels)
    with pytest.raises(ValidationError, match=r"^dataset features have no dimensions"):
        BenchmarkDataset.from_arrays(np.zeros((60, 0)), labels, identity=DatasetIdentity.declared("d", "1"))
