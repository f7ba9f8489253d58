"""RetrievalProtocol (vertebrae.data.relevance): its strict JSON payload round trips, and a malformed
payload is refused naming what is wrong."""

from __future__ import annotations

import json

import numpy as np
import pytest

from vertebrae import ValidationError
from vertebrae.data.retrieval import RetrievalDataset
from vertebrae.data.relevance import PROTOCOL_SCHEMA, RetrievalProtocol
from retrieval_fixtures import GRADES, ID, _build, _g, _q, _raises, _same_csr


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
