"""RetrievalDataset: relevance parsing (records, matrices, sparse), exclusions, validation naming the culprit ids,
protocol payloads, content identity and the reverse direction. Expected values are worked out by hand."""

from __future__ import annotations

import json
import time
import tracemalloc

import numpy as np
import pytest
import scipy.sparse as sp

from vertebrae import DatasetIdentity, IdentityError, ValidationError, VertebraeError
from vertebrae.data.retrieval import PROTOCOL_SCHEMA, RetrievalDataset, RetrievalProtocol

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


def test_explicit_zeros_and_duplicate_coo_entries_in_sparse_input():
    # An explicit stored zero is not a positive; duplicate COO entries sum (scipy's convention).
    coo = sp.coo_matrix(([2.0, 0.0, 0.25, 0.25, 0.5], ([0, 0, 1, 1, 1], [1, 2, 0, 0, 2])), shape=(2, 3))
    r = _build(coo).relevance
    np.testing.assert_array_equal(r.toarray(), [[0, 2.0, 0], [0.5, 0, 0.5]])
    assert r.nnz == 3


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


def test_ids_are_validated_and_duplicates_named():
    assert "duplicate row id 'a'" in _raises(ValidationError, _build, np.array(GRADES), gallery_ids=["a", "b", "a"])
    assert "queries: 3 row ids for 2 rows" in _raises(ValidationError, RetrievalDataset.from_embeddings, _q(), _g(),
                                                      np.array(GRADES), query_ids=["x", "y", "z"], identity=ID)
    assert "must be a str or an int" in _raises(ValidationError, _build, np.array(GRADES), query_ids=[1.5, 2.5])


def test_embeddings_are_validated_naming_endpoint_and_row():
    q = _q()
    q[1, 0] = np.nan
    msg = _raises(ValidationError, RetrievalDataset.from_embeddings, q, _g(), np.array(GRADES),
                  query_ids=Q_IDS, gallery_ids=G_IDS, identity=ID)
    assert msg.startswith("queries:") and "'q2' (index 1)" in msg
    g = _g()
    g[2, 1] = np.inf
    msg = _raises(ValidationError, RetrievalDataset.from_embeddings, _q(), g, np.array(GRADES),
                  query_ids=Q_IDS, gallery_ids=G_IDS, identity=ID)
    assert msg.startswith("gallery:") and "'c' (index 2)" in msg
    msg = _raises(ValidationError, RetrievalDataset.from_embeddings, _q(d=3), _g(d=4), np.array(GRADES), identity=ID)
    assert "3 dimensions" in msg and "have 4" in msg
    build = RetrievalDataset.from_embeddings
    assert "2-D" in _raises(ValidationError, build, np.ones(3), _g(), np.array(GRADES), identity=ID)
    assert "numeric" in _raises(ValidationError, RetrievalDataset.from_embeddings, np.array([["x"]] * 2), _g(d=1),
                                np.array(GRADES), identity=ID)
    assert "identity" in _raises(IdentityError, build, _q(), _g(), np.array(GRADES), identity=None)


def test_sparse_embeddings_stay_sparse():
    queries = sp.random(2, 5, density=0.5, random_state=0)
    ds = RetrievalDataset.from_embeddings(queries, sp.eye(3, 5), np.array(GRADES), identity=ID)
    assert isinstance(ds.queries, sp.csr_matrix) and isinstance(ds.gallery, sp.csr_matrix)


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


# --------------------------------------------------------------------------------------------------------------
# Views: summary, dict, records, transposed
# --------------------------------------------------------------------------------------------------------------


def test_summary_is_hand_checked():
    records = [("q1", "b", 2.0), ("q1", "c", 1.0), ("q2", "a", 1.0), ("q2", "c", 0.5)]
    ds = _build(records, exclusions=[("q1", "b"), ("q2", "b")])
    assert ds.summary() == {
        "identity": "declared:toy-retrieval@1",
        "n_queries": 2,
        "n_gallery": 3,
        "n_positives": 4,
        "n_eligible_positives": 3,
        "mean_positives_per_query": 2.0,
        "mean_eligible_positives_per_query": 1.5,
        "n_exclusions": 2,
        "exclude_same_id": False,
        "grade_min": 0.5,
        "grade_max": 2.0,
        "query_modality": "embedding",
        "gallery_modality": "embedding",
    }
    assert ds.n_queries == 2 and ds.n_gallery == 3 and ds.identity_key() == "declared:toy-retrieval@1"


def test_relevance_dict_and_records():
    ds = _build(np.array(GRADES))
    assert ds.relevance_dict() == {0: {1: 2.0}, 1: {0: 1.0, 2: 0.5}}
    assert ds.relevance_records() == [("q1", "b", 2.0), ("q2", "a", 1.0), ("q2", "c", 0.5)]


def test_transposed_relevance_is_hand_checked():
    # 2 queries x 3 gallery. Forward: q1 -> a (1), b (2); q2 -> c (3). Exclude (q2, a).
    ds = _build([("q1", "a", 1.0), ("q1", "b", 2.0), ("q2", "c", 3.0)], exclusions=[("q2", "a")])
    rev = ds.transposed()
    assert rev.query_ids == ("a", "b", "c") and rev.gallery_ids == ("q1", "q2")
    assert rev.queries is ds.gallery and rev.gallery is ds.queries
    np.testing.assert_array_equal(rev.relevance.toarray(), [[1.0, 0], [2.0, 0], [0, 3.0]])
    np.testing.assert_array_equal(rev.exclusions.toarray(), [[False, True], [False, False], [False, False]])
    assert rev.relevance_dict() == {0: {0: 1.0}, 1: {0: 2.0}, 2: {1: 3.0}}
    assert rev.identity == ds.identity
    # Back again gives the forward protocol.
    _same_csr(rev.transposed().relevance, ds.relevance)


def test_transposed_requires_every_gallery_item_to_have_a_reverse_positive():
    ds = _build(np.array([[0.0, 2.0, 0.0], [0.0, 1.0, 0.0]]))
    msg = _raises(ValidationError, ds.transposed)
    assert msg.startswith("reverse direction") and "2 of 3 queries" in msg and "query ids 'a', 'c'" in msg


# --------------------------------------------------------------------------------------------------------------
# Protocol payload
# --------------------------------------------------------------------------------------------------------------


def test_protocol_payload_round_trips_through_json():
    ds = RetrievalDataset.from_embeddings(
        _q(3), _g(3), [(1, "1", 2.5), ("1", 1, 1.0), ("x", 1, 0.1), ("x", "c", 3.0)],
        query_ids=[1, "1", "x"], gallery_ids=["1", 1, "c"], identity=ID, exclusions=[("x", 1)], exclude_same_id=True,
    )
    payload = ds.protocol_payload()
    assert payload == {
        "schema": PROTOCOL_SCHEMA,
        "query_ids": ["@int:1", "1", "x"],
        "gallery_ids": ["1", "@int:1", "c"],
        "relevance": [["@int:1", "1", 2.5], ["1", "@int:1", 1.0], ["x", "@int:1", 0.1], ["x", "c", 3.0]],
        "exclusions": [["@int:1", "@int:1"], ["1", "1"], ["x", "@int:1"]],
        "exclude_same_id": True,
    }
    back = RetrievalDataset.protocol_from_payload(json.loads(json.dumps(payload)))
    assert isinstance(back, RetrievalProtocol)
    assert back.query_ids == ds.query_ids and back.gallery_ids == ds.gallery_ids and back.exclude_same_id
    _same_csr(back.relevance, ds.relevance)
    np.testing.assert_array_equal(back.exclusions.toarray(), ds.exclusions.toarray())
    assert back.to_payload() == payload


def _payload():
    return _build(np.array(GRADES), exclusions=[("q1", "a")]).protocol_payload()


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (lambda p: p.pop("exclusions"), "missing keys ['exclusions']"),
        (lambda p: p.update(extra=1), "unknown keys ['extra']"),
        (lambda p: p.update(schema="vertebrae.retrieval-protocol/v0"), "is not supported"),
        (lambda p: p.update(query_ids=["q1", "q1"]), "duplicate id 'q1'"),
        (lambda p: p.update(query_ids=["q1", 2]), "list of semantic keys"),
        (lambda p: p.update(gallery_ids=["a", "b", "@int:01"]), "malformed label key"),
        (lambda p: p.update(gallery_ids=["a", "b", "@float:1.0"]), "ids must be str or int"),
        (lambda p: p["relevance"].append(["q9", "a", 1.0]), "unknown query id 'q9'"),
        (lambda p: p["relevance"].append(["q1", "zz", 1.0]), "unknown gallery id 'zz'"),
        (lambda p: p["relevance"].append(["q1", "b", 1.0]), "repeats the pair (query 'q1', gallery 'b')"),
        (lambda p: p["relevance"].append(["q1", "c", 0]), "must be a finite number > 0"),
        (lambda p: p["relevance"].append(["q1", "c", True]), "must be a finite number > 0"),
        (lambda p: p["relevance"].append(["q1", "c"]), "relevance[3] must be a list of 3 items"),
        (lambda p: p["exclusions"].append(["q1", "a"]), "exclusions repeat a pair"),
        (lambda p: p["exclusions"].append(["q1", "b"]), "1 of 2 queries have no eligible positive"),
        (lambda p: p.update(exclude_same_id=1), "must be true or false"),
        (lambda p: p.update(relevance={}), "relevance must be a list"),
    ],
)
def test_malformed_payloads_are_refused(edit, expected):
    payload = _payload()
    edit(payload)
    assert expected in _raises(ValidationError, RetrievalDataset.protocol_from_payload, payload)


def test_payload_with_exclude_same_id_but_missing_pairs_is_refused():
    ds = RetrievalDataset.from_embeddings(_q(2), _g(2), [("x", "y"), ("y", "x")], query_ids=["x", "y"],
                                          gallery_ids=["x", "y"], identity=ID, exclude_same_id=True)
    payload = ds.protocol_payload()
    assert payload["exclusions"] == [["x", "x"], ["y", "y"]]
    payload["exclusions"] = [["x", "x"]]
    assert "lack some same-id pairs" in _raises(ValidationError, RetrievalDataset.protocol_from_payload, payload)


# --------------------------------------------------------------------------------------------------------------
# Identity
# --------------------------------------------------------------------------------------------------------------


def _content(relevance, **kwargs):
    return _build(relevance, identity=DatasetIdentity.from_content(), **kwargs).identity


def test_content_identity_follows_the_content():
    base = _content(np.array(GRADES))
    assert base.kind == "content" and base.resolved
    assert _content([("q1", "b", 2.0), ("q2", "a", 1.0), ("q2", "c", 0.5)]) == base  # same protocol, other spelling
    changed = np.array(GRADES)
    changed[1, 2] = 0.75
    assert _content(changed) != base
    assert _content(np.array(GRADES), exclusions=[("q2", "c")]) != base
    assert _content(np.array(GRADES), query_ids=["q2", "q1"]) != base
    assert _content(np.array(GRADES), exclude_same_id=True) != base  # no shared ids, but another declared protocol
    q = _q()
    q[0, 0] += 1e-9
    other = RetrievalDataset.from_embeddings(q, _g(), np.array(GRADES), query_ids=Q_IDS, gallery_ids=G_IDS,
                                             identity=DatasetIdentity.from_content()).identity
    assert other != base
    # A resolved content identity is checked against the data.
    assert _build(np.array(GRADES), identity=base).identity == base
    assert "does not match" in _raises(IdentityError, _build, changed, identity=base)


def test_declared_identity_is_kept():
    assert _build(np.array(GRADES)).identity is ID


# --------------------------------------------------------------------------------------------------------------
# Raw inputs
# --------------------------------------------------------------------------------------------------------------


def test_from_arrays_keeps_raw_inputs_as_given():
    queries = ["a red cat", "a dog"]
    images = [np.zeros((2, 2, 3), np.uint8), np.ones((2, 2, 3), np.uint8), np.full((2, 2, 3), 7, np.uint8)]
    ds = RetrievalDataset.from_arrays(queries, images, [("t1", "i1"), ("t2", "i3", 2)], query_ids=["t1", "t2"],
                                      gallery_ids=["i1", "i2", "i3"], gallery_modality="image",
                                      identity=DatasetIdentity.from_content())
    assert ds.queries is queries and ds.gallery is images
    assert (ds.query_modality, ds.gallery_modality) == ("text", "image")
    np.testing.assert_array_equal(ds.relevance.toarray(), [[1.0, 0, 0], [0, 0, 2.0]])
    images2 = [img.copy() for img in images]
    images2[1][0, 0, 0] = 9
    other = RetrievalDataset.from_arrays(queries, images2, [("t1", "i1"), ("t2", "i3", 2)], query_ids=["t1", "t2"],
                                         gallery_ids=["i1", "i2", "i3"], gallery_modality="image",
                                         identity=DatasetIdentity.from_content())
    assert other.identity != ds.identity


def test_from_arrays_refusals():
    assert "from_embeddings" in _raises(ValidationError, RetrievalDataset.from_arrays, ["a"], ["b"], [(0, 0)],
                                        query_modality="embedding", identity=ID)
    build = RetrievalDataset.from_arrays
    assert "sequence of rows" in _raises(ValidationError, build, "abc", ["b"], [(0, 0)], identity=ID)
    assert "sized sequence" in _raises(ValidationError, build, iter(["a"]), ["b"], [(0, 0)], identity=ID)
    assert "at least one row" in _raises(ValidationError, RetrievalDataset.from_arrays, [], ["b"], [], identity=ID)
    msg = _raises(IdentityError, RetrievalDataset.from_arrays, [object()], ["b"], [(0, 0)],
                  identity=DatasetIdentity.from_content())
    assert "queries row 0 (index 0)" in msg and "declared" in msg
    ds = RetrievalDataset.from_arrays([object()], ["b"], [(0, 0)], identity=ID)  # declared: nothing is hashed
    assert ds.n_queries == 1


def test_direct_construction_checks_invariants():
    ds = _build(np.array(GRADES))
    bad = ds.relevance.copy()
    bad.data[0] = 0.0  # a stored zero
    assert "grades > 0" in _raises(ValidationError, RetrievalDataset, ds.queries, ds.gallery, ds.query_ids,
                                   ds.gallery_ids, bad, ds.exclusions, ID)
    assert "CSR matrix of float64" in _raises(ValidationError, RetrievalDataset, ds.queries, ds.gallery, ds.query_ids,
                                              ds.gallery_ids, ds.relevance.toarray(), ds.exclusions, ID)
    eye, none = sp.csr_matrix(np.eye(3)), sp.csr_matrix((3, 3), dtype=bool)
    assert "2 rows for 3 ids" in _raises(ValidationError, RetrievalDataset, ds.gallery[:2], ds.gallery, ("x", "y", "z"),
                                         ds.gallery_ids, eye, none, ID)
    assert "must be resolved" in _raises(IdentityError, RetrievalDataset, ds.queries, ds.gallery, ds.query_ids,
                                         ds.gallery_ids, ds.relevance, ds.exclusions, DatasetIdentity.from_content())
    with pytest.raises(AttributeError):
        ds.relevance = None  # frozen
