"""RetrievalDataset (vertebrae.data.retrieval): ids and embeddings validated naming the culprit, the views (summary,
records, the reverse direction), content identity and raw inputs. Expected values are worked out by hand."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from vertebrae import DatasetIdentity, IdentityError, ValidationError
from vertebrae.core.inputs import RawInputs
from vertebrae.data.retrieval import RetrievalDataset
from retrieval_fixtures import G_IDS, GRADES, ID, Q_IDS, _build, _g, _q, _raises, _same_csr


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


def test_relevance_reads_as_query_to_gallery_grades_and_stays_a_csr_matrix():
    """``dataset.relevance`` is the established library's {query_index: {gallery_index: grade}} and the CSR matrix."""
    ds = _build(np.array(GRADES), exclusions=[("q2", "a")])
    relevance = ds.relevance
    assert relevance == {0: {1: 2.0}, 1: {0: 1.0, 2: 0.5}} and relevance != {0: {1: 2.0}}
    assert relevance[0] == {1: 2.0} and relevance[1][2] == 0.5 and relevance.get(5) is None
    assert dict(relevance) == ds.relevance_dict() and list(relevance) == [0, 1] and len(relevance) == 2
    assert list(relevance.keys()) == [0, 1] and relevance.items()[1] == (1, {0: 1.0, 2: 0.5})
    assert 1 in relevance and 2 not in relevance and "q1" not in relevance
    with pytest.raises(KeyError):
        relevance[2]
    # matrix use is unchanged (exclusions are not applied to the declared grades)
    assert isinstance(relevance, sp.csr_matrix) and relevance.dtype == np.float64 and relevance.nnz == 3
    assert relevance[1, 0] == 1.0 and relevance[0, 1] == 2.0
    np.testing.assert_array_equal(relevance.toarray(), GRADES)
    assert type(ds.protocol.relevance) is sp.csr_matrix  # the scorer's input is a plain CSR matrix
    rebuilt = RetrievalDataset(ds.queries, ds.gallery, ds.query_ids, ds.gallery_ids, relevance, ds.exclusions, ID)
    assert rebuilt.relevance == relevance.to_dict() and _build(np.array(GRADES)).transposed().relevance[2] == {1: 0.5}


def test_a_content_identity_of_image_rows_follows_the_image_bytes(tmp_path):
    # before: image rows were hashed as their path strings, so an edited image kept its key (stale results)
    paths = []
    for i in range(2):
        paths.append(tmp_path / f"{i}.png")
        paths[-1].write_bytes(bytes([i]) * 4)

    def key():
        return RetrievalDataset.from_arrays(
            RawInputs.texts(["a", "b"], ["q0", "q1"]), RawInputs.images([str(p) for p in paths], ["g0", "g1"]),
            [("q0", "g0"), ("q1", "g1")], query_ids=["q0", "q1"], gallery_ids=["g0", "g1"], gallery_modality="image",
            identity=DatasetIdentity.from_content()).identity_key()

    before = key()
    paths[1].write_bytes(b"edited")
    assert key() != before
