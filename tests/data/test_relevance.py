"""Relevance and exclusions (vertebrae.data.relevance), through the RetrievalDataset constructors: records, matrices
and sparse input give one canonical CSR; typed ids; exclusions; errors naming the culprit ids. Expected values are
worked out by hand."""

from __future__ import annotations

import time
import tracemalloc

import numpy as np
import pytest
import scipy.sparse as sp

from vertebrae import ValidationError
from vertebrae.data.retrieval import RetrievalDataset
from retrieval_fixtures import G_IDS, GRADES, ID, Q_IDS, _build, _g, _q, _raises, _same_csr


# --------------------------------------------------------------------------------------------------------------
# One relevance, many spellings
# --------------------------------------------------------------------------------------------------------------


def test_records_matrix_sparse_and_nested_list_matrix_give_identical_csr():
    records = [("q1", "b", 2.0), ("q2", "a"), ("q2", "c", 0.5), ("q1", "a", 0)]  # grade 0 dropped, 2-tuple = 1.0
    by_records = _build(records).relevance
    by_array = _build(np.array(GRADES)).relevance
    by_coo = _build(sp.coo_matrix(np.array(GRADES))).relevance
    by_csr_array = _build(sp.csr_array(np.array(GRADES))).relevance
    by_nested = RetrievalDataset.from_relevance_matrix(
        _q(), _g(), GRADES, query_ids=Q_IDS, gallery_ids=G_IDS, identity=ID).relevance
    for other in (by_array, by_coo, by_csr_array, by_nested):
        _same_csr(by_records, other)
    np.testing.assert_array_equal(by_records.indptr, [0, 1, 3])
    np.testing.assert_array_equal(by_records.indices, [1, 0, 2])
    np.testing.assert_array_equal(by_records.data, [2.0, 1.0, 0.5])


def test_explicit_zeros_in_sparse_input_are_no_positives():
    coo = sp.coo_matrix(([2.0, 0.0, 0.25, 0.5], ([0, 0, 1, 1], [1, 2, 0, 2])), shape=(2, 3))
    r = _build(coo).relevance
    np.testing.assert_array_equal(r.toarray(), [[0, 2.0, 0], [0.25, 0, 0.5]])
    assert r.nnz == 3


def test_duplicate_entries_in_sparse_relevance_are_refused_naming_the_pair():
    # (q2, a) stored twice: scipy would sum 0.25 + 0.25 into grade 0.5; duplicate records are refused, so are these.
    coo = sp.coo_matrix(([2.0, 0.0, 0.25, 0.25, 0.5], ([0, 0, 1, 1, 1], [1, 2, 0, 0, 2])), shape=(2, 3))
    msg = _raises(ValidationError, _build, coo)
    assert "stores 1 pair(s) more than once: (query 'q2', gallery 'a')" in msg
    assert "grades 0.25, 0.25" in msg and "sum_duplicates" in msg
    # the same in CSR form (duplicate column indices in one row), and two doubled pairs, both named
    csr = sp.csr_matrix(([1.0, 3.0, 1.0, 1.0], [1, 1, 2, 2], [0, 2, 4]), shape=(2, 3))
    msg = _raises(ValidationError, _build, csr)
    assert "2 pair(s) more than once: (query 'q1', gallery 'b'), (query 'q2', gallery 'c')" in msg
    assert "grades 1.0, 3.0" in msg
    # once summed on purpose, the matrix is accepted
    coo.sum_duplicates()
    np.testing.assert_array_equal(_build(coo).relevance.toarray(), [[0, 2.0, 0], [0.5, 0, 0.5]])


def test_nested_list_given_to_from_embeddings_is_read_as_records():
    # As records: (query 0, gallery 1, grade 3) and (query 1, gallery 0, grade 1) -> [[0, 3], [1, 0]].
    # As a matrix the same list would have shape (2, 3), which fits no 2 x 2 dataset.
    ds = RetrievalDataset.from_embeddings(_q(2), _g(2), [[0, 1, 3.0], [1, 0, 1.0]], identity=ID)
    np.testing.assert_array_equal(ds.relevance.toarray(), [[0, 3.0], [1.0, 0]])


def test_nested_list_matrix_given_as_records_errors_suggesting_from_relevance_matrix():
    # 2 x 4 matrix: rows of 4 items are no records.
    matrix = [[0, 2, 0, 0], [1, 0, 0, 3]]
    msg = _raises(ValidationError, RetrievalDataset.from_embeddings, _q(2), _g(4), matrix, identity=ID)
    assert "record 0 has 4 items" in msg and "from_relevance_matrix" in msg
    # 2 x 3 matrix: its rows parse as records (0, 1, 0) and (1, 0, 0), both grade 0 -> no query keeps a positive.
    msg = _raises(ValidationError, RetrievalDataset.from_embeddings, _q(2), _g(3), [[0, 1, 0], [1, 0, 0]], identity=ID)
    assert "no eligible positive" in msg and "query ids 0, 1" in msg and "from_relevance_matrix" in msg
    # The explicit constructor reads it as intended.
    ds = RetrievalDataset.from_relevance_matrix(_q(2), _g(3), [[0, 1, 0], [1, 0, 0]], identity=ID)
    np.testing.assert_array_equal(ds.relevance.toarray(), [[0, 1.0, 0], [1.0, 0, 0]])


def test_huge_sparse_relevance_is_never_densified():
    n = 50_000
    rows = np.arange(n)
    cols = (rows * 7) % n  # a permutation: every query has one positive; query 1 gets a second one at gallery 8
    relevance = sp.coo_matrix((np.append(np.full(n, 2.0), 1.0), (np.append(rows, 1), np.append(cols, 8))), shape=(n, n))
    queries = np.ones((n, 2), dtype=np.float32)
    gallery = np.ones((n, 2), dtype=np.float32)
    tracemalloc.start()
    start = time.perf_counter()
    try:
        ds = RetrievalDataset.from_embeddings(queries, gallery, relevance, identity=ID, exclusions=[(1, 7), (3, 0)])
        eligible = ds.eligible_relevance()
        elapsed = time.perf_counter() - start
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # A dense n x n bool matrix would be 2.5 GB (float64: 20 GB); the sparse path stays within ids + O(nnz).
    assert peak < 64 * 2**20, peak
    assert elapsed < 10.0
    assert ds.relevance.shape == (n, n) and ds.relevance.nnz == n + 1
    # (1, 7) removes one of query 1's two positives; (3, 0) is no positive (query 3's is gallery 21).
    assert ds.exclusions.nnz == 2 and eligible.nnz == n
    assert eligible[1, 7] == 0 and eligible[1, 8] == 1.0 and eligible[2, 14] == 2.0 and ds.relevance[1, 7] == 2.0


def test_huge_sparse_relevance_with_exclude_same_id_names_the_first_ten_queries():
    # Diagonal relevance: exclude_same_id removes every query's only positive.
    n = 50_000
    rows = np.arange(n)
    relevance = sp.csr_matrix((np.ones(n), (rows, rows)), shape=(n, n))
    msg = _raises(ValidationError, RetrievalDataset.from_embeddings, np.ones((n, 1)), np.ones((n, 1)), relevance,
                  identity=ID, exclude_same_id=True)
    assert f"{n} of {n} queries have no eligible positive" in msg
    assert "query ids 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, ..." in msg


# --------------------------------------------------------------------------------------------------------------
# Errors name their culprits
# --------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("records", "expected"),
    [
        ([("q1", "b"), ("q9", "a")], "record 1: unknown query id 'q9'"),
        ([("q1", "b"), ("q2", "zz")], "record 1: unknown gallery id 'zz'"),
        ([("q1", "b", 1), ("q2", "a"), ("q1", "b", 1)],
         "records 0 and 2 both grade the pair (query 'q1', gallery 'b')"),
        ([("q1", "b", float("nan")), ("q2", "a")], "record 0 (query 'q1', gallery 'b'): grade nan is not finite"),
        ([("q1", "b", float("inf")), ("q2", "a")], "grade inf is not finite"),
        ([("q1", "b", 1), ("q2", "c", -0.5)], "record 1 (query 'q2', gallery 'c'): grade -0.5 is negative"),
        ([("q1", "b", "high"), ("q2", "a")], "record 0 (query 'q1', gallery 'b'): grade 'high' is not a number"),
        ([("q1", "b", None), ("q2", "a")], "grade None is not a number"),
        ([("q1", "b", 1, "x"), ("q2", "a")], "record 0 has 4 items"),
        ([("q1",), ("q2", "a")], "record 0 has 1 items"),
        (["q1b", ("q2", "a")], "record 0 is 'q1b' (str), not a (query_id, gallery_id, grade) record"),
        ([3.0, ("q2", "a")], "record 0 is 3.0 (float)"),
        ([("q1", ["b"], 1)], "record 0: gallery id ['b'] of type list is not a str or int id"),
    ],
)
def test_bad_records_are_refused_naming_the_ids(records, expected):
    assert expected in _raises(ValidationError, _build, records)


def test_non_record_items_suggest_from_relevance_matrix():
    assert "from_relevance_matrix" in _raises(ValidationError, _build, [3.0, 1.0])


def test_mapping_and_scalar_relevance_refused():
    assert "not a mapping" in _raises(ValidationError, _build, {"q1": {"b": 1.0}, "q2": {"a": 1.0}})
    assert "got str" in _raises(ValidationError, _build, "q1,b")
    assert "got int" in _raises(ValidationError, _build, 5)


def test_matrix_shape_mismatch_names_both_shapes():
    msg = _raises(ValidationError, _build, np.ones((3, 2)))
    assert "shape (3, 2)" in msg and "expected shape (2, 3)" in msg and "2 queries x 3 gallery items" in msg
    msg = _raises(ValidationError, _build, sp.csr_matrix((2, 4)))
    assert "shape (2, 4)" in msg and "(2, 3)" in msg
    # An (n, 3) numpy array of records is a matrix, and the error says so.
    assert "not an array" in _raises(ValidationError, _build, np.array([[0, 1, 1.0], [1, 0, 1.0], [1, 2, 1.0]]))
    msg = _raises(ValidationError, RetrievalDataset.from_relevance_matrix, _q(), _g(), [[1, 0], [0, 1]],
                  query_ids=Q_IDS, gallery_ids=G_IDS, identity=ID)
    assert "shape (2, 2)" in msg and "(2, 3)" in msg


def test_bad_matrix_grades_name_the_pairs():
    dense = np.array(GRADES)
    dense[1, 2] = -1.0
    assert "(query 'q2', gallery 'c')" in _raises(ValidationError, _build, dense)
    sparse = sp.csr_matrix(np.array(GRADES))
    sparse.data[0] = np.nan  # q1 -> b
    assert "1 bad grade(s) at (query 'q1', gallery 'b')" in _raises(ValidationError, _build, sparse)
    assert "must hold numbers" in _raises(
        ValidationError, RetrievalDataset.from_relevance_matrix, _q(), _g(), [["q1", "b", "1"]], identity=ID)
    assert "not rectangular" in _raises(
        ValidationError, RetrievalDataset.from_relevance_matrix, _q(), _g(), [[1, 0, 0], [1]], identity=ID)


# --------------------------------------------------------------------------------------------------------------
# Typed ids
# --------------------------------------------------------------------------------------------------------------


def test_int_and_str_ids_are_distinct():
    ds = RetrievalDataset.from_embeddings(
        _q(2), _g(2), [(1, 1, 1.0), ("1", "1", 2.0)], query_ids=[1, "1"], gallery_ids=["1", 1], identity=ID)
    # query 1 (index 0) -> gallery 1 (index 1); query "1" (index 1) -> gallery "1" (index 0).
    np.testing.assert_array_equal(ds.relevance.toarray(), [[0, 1.0], [2.0, 0]])
    assert ds.query_ids == ("@int:1", "1") and ds.gallery_ids == ("1", "@int:1")
    assert ds.relevance_records() == [("@int:1", "@int:1", 1.0), ("1", "1", 2.0)]


def test_unknown_typed_id_hints_at_the_other_type():
    msg = _raises(ValidationError, RetrievalDataset.from_embeddings, _q(2), _g(2), [("1", 0), (2, 1)],
                  query_ids=[1, 2], identity=ID)
    assert "unknown query id '1'" in msg and "ids are typed: 1 is a declared query id" in msg
    msg = _raises(ValidationError, RetrievalDataset.from_embeddings, _q(2), _g(2), [("x", 0), ("y", 1)],
                  query_ids=["x", "y"], gallery_ids=["0", "1"], identity=ID)
    assert "unknown gallery id 0" in msg and "'0' is a declared gallery id" in msg


def test_numpy_integer_ids_match_int_ids():
    ds = RetrievalDataset.from_embeddings(_q(2), _g(2), [(np.int64(0), np.int32(1)), (np.int64(1), 0)], identity=ID)
    np.testing.assert_array_equal(ds.relevance.toarray(), [[0, 1.0], [1.0, 0]])


# --------------------------------------------------------------------------------------------------------------
# Exclusions
# --------------------------------------------------------------------------------------------------------------


def test_exclusion_records_and_matrix_remove_pairs():
    relevance = [("q1", "b", 2.0), ("q1", "c", 1.0), ("q2", "a", 1.0), ("q2", "c", 0.5)]
    by_records = _build(relevance, exclusions=[("q1", "b"), ("q2", "b")])
    mask = np.array([[False, True, False], [False, True, False]])
    by_matrix = _build(relevance, exclusions=mask)
    by_sparse = _build(relevance, exclusions=sp.csr_matrix(mask.astype(np.int64)))
    for ds in (by_records, by_matrix, by_sparse):
        assert ds.exclusions.dtype == bool and ds.exclusions.nnz == 2
        np.testing.assert_array_equal(ds.exclusions.toarray(), mask)
        # q1 loses b (grade 2) and keeps c; q2's excluded b was no positive.
        np.testing.assert_array_equal(ds.eligible_relevance().toarray(), [[0, 0, 1.0], [1.0, 0, 0.5]])
        np.testing.assert_array_equal(ds.relevance.toarray(), [[0, 2.0, 1.0], [1.0, 0, 0.5]])  # declared grades kept


def test_exclusions_that_remove_every_positive_name_the_queries():
    msg = _raises(ValidationError, _build, np.array(GRADES), exclusions=[("q1", "b"), ("q2", "a"), ("q2", "c")])
    assert "2 of 2 queries have no eligible positive" in msg and "query ids 'q1', 'q2'" in msg
    msg = _raises(ValidationError, _build, np.array(GRADES), exclusions=[("q1", "b")])
    assert "1 of 2 queries" in msg and "query ids 'q1'" in msg and "'q2'" not in msg


def test_query_without_any_positive_is_named():
    msg = _raises(ValidationError, _build, [("q2", "a")])
    assert "1 of 2 queries have no eligible positive" in msg and "'q1'" in msg


def test_at_most_ten_query_ids_are_named():
    ids = [f"query-{i:02d}" for i in range(12)]
    msg = _raises(ValidationError, RetrievalDataset.from_embeddings, np.ones((12, 2)), np.ones((1, 2)), [],
                  query_ids=ids, identity=ID)
    assert "12 of 12 queries" in msg and "'query-09', ..." in msg and "query-10" not in msg


def test_bad_exclusions_are_refused():
    grades = np.array(GRADES)
    msg = _raises(ValidationError, _build, grades, exclusions=[("zz", "a")])
    assert "exclusion record 0: unknown query id 'zz'" in msg
    assert "exclusion record 1: unknown gallery id 'zz'" in _raises(
        ValidationError, _build, np.array(GRADES), exclusions=[("q1", "a"), ("q1", "zz")])
    assert "(query_id, gallery_id) pair" in _raises(ValidationError, _build, grades, exclusions=[("q1", "a", 1)])
    msg = _raises(ValidationError, _build, grades, exclusions=np.zeros((3, 3), bool))
    assert "exclusion matrix has shape (3, 3)" in msg
    assert "only 0/1" in _raises(ValidationError, _build, np.array(GRADES), exclusions=np.full((2, 3), 2))


def test_equal_ids_are_valid_matches_unless_exclude_same_id():
    q_ids, g_ids = ["x", "y"], ["y", "x", "z"]
    relevance = [("x", "x", 1.0), ("x", "z", 1.0), ("y", "y", 3.0)]
    kept = RetrievalDataset.from_embeddings(_q(), _g(), relevance, query_ids=q_ids, gallery_ids=g_ids, identity=ID)
    assert kept.exclusions.nnz == 0
    np.testing.assert_array_equal(kept.eligible_relevance().toarray(), [[0, 1.0, 1.0], [3.0, 0, 0]])
    # exclude_same_id removes (x, x) and (y, y): y's only positive goes -> named.
    msg = _raises(ValidationError, RetrievalDataset.from_embeddings, _q(), _g(), relevance,
                  query_ids=q_ids, gallery_ids=g_ids, identity=ID, exclude_same_id=True)
    assert "1 of 2 queries" in msg and "query ids 'y'" in msg
    ok = RetrievalDataset.from_embeddings(_q(), _g(), relevance + [("y", "z", 1.0)], query_ids=q_ids, gallery_ids=g_ids,
                                          identity=ID, exclude_same_id=True, exclusions=[("y", "y")])
    np.testing.assert_array_equal(ok.exclusions.toarray(), [[False, True, False], [True, False, False]])
    np.testing.assert_array_equal(ok.eligible_relevance().toarray(), [[0, 0, 1.0], [0, 0, 1.0]])


def test_exclude_same_id_uses_typed_keys():
    # query 1 (int) and gallery "1" (str) are different ids: nothing excluded.
    ds = RetrievalDataset.from_embeddings(_q(1), _g(2), [(1, "1")], query_ids=[1], gallery_ids=["1", 2], identity=ID,
                                          exclude_same_id=True)
    assert ds.exclusions.nnz == 0
