"""Canonical JSON and recipe fingerprints: golden strings, golden hashes and refusals.

The hex strings below are the contract: a fingerprint names a file on disk, so it must never drift silently.
If one of these tests fails after a change, the change altered every artifact name vertebrae writes; bump the
schema version in SCHEMAS on purpose instead of editing the golden value.
"""

from __future__ import annotations

import hashlib
import re

import numpy as np
import pytest

from vertebrae import IdentityError, PrecomputedExtractor, SklearnExtractor, ValidationError, VertebraeError
from vertebrae.core import fingerprint as fp_module
from vertebrae.core.fingerprint import SCHEMAS, canonical_json, fingerprint, sha256_hex, to_json_value
from vertebrae.core.identity import DatasetIdentity
from vertebrae.stages.common import embedding_recipe, fit_recipe
from vertebrae.stages.labelled import protocol_recipe

DIGITS = "declared:sklearn-digits@1"
PCA_STEPS = [
    {"estimator": "sklearn.preprocessing.StandardScaler"},
    {"estimator": "sklearn.decomposition.PCA", "params": {"n_components": 8, "whiten": False}},
]


def _sha16(text: str) -> str:
    """Independent reference: the first 16 hex digits of SHA-256 over the UTF-8 text."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


# --------------------------------------------------------------------------------------------- canonical JSON


def test_canonical_json_sorts_keys_recursively_and_is_compact():
    assert canonical_json({"b": 1, "a": [1, 2, (3, "x")], "c": {"z": None, "y": True}}) == (
        '{"a":[1,2,[3,"x"]],"b":1,"c":{"y":true,"z":null}}'
    )


def test_canonical_json_sorts_by_code_point_not_locale():
    # "B" (0x42) < "_" (0x5f) < "a" (0x61) < "é" (0xe9)
    assert canonical_json({"é": 4, "a": 3, "_": 2, "B": 1}) == '{"B":1,"_":2,"a":3,"é":4}'


def test_canonical_json_keeps_non_ascii_text_as_utf8():
    text = canonical_json({"name": "Zürich – 東京", "emoji": "🦴"})
    assert text == '{"emoji":"🦴","name":"Zürich – 東京"}'
    assert "\\u" not in text


def test_canonical_json_escapes_only_what_json_requires():
    assert canonical_json(['a"b', "c\\d", "e\nf"]) == r'["a\"b","c\\d","e\nf"]'


def test_canonical_json_scalars():
    assert canonical_json(None) == "null"
    assert canonical_json(True) == "true"
    assert canonical_json(0) == "0"
    assert canonical_json(-12) == "-12"
    assert canonical_json(1.5) == "1.5"
    assert canonical_json(2.0) == "2.0"
    assert canonical_json("") == '""'
    assert canonical_json(10**30) == "1000000000000000000000000000000"


def test_tuples_become_lists():
    assert canonical_json((1, (2, 3), [])) == "[1,[2,3],[]]"
    assert canonical_json({"t": ()}) == '{"t":[]}'
    assert to_json_value((1, (2,))) == [1, [2]]
    assert canonical_json((1, 2)) == canonical_json([1, 2])


def test_numpy_scalars_become_plain_json():
    value = to_json_value(
        {"i": np.int64(7), "i8": np.int8(-3), "u": np.uint32(5), "f": np.float32(0.5), "d": np.float64(0.25),
         "b": np.bool_(True), "nb": np.bool_(False), "s": np.str_("x")}
    )
    assert value == {"i": 7, "i8": -3, "u": 5, "f": 0.5, "d": 0.25, "b": True, "nb": False, "s": "x"}
    assert type(value["i"]) is int and type(value["i8"]) is int and type(value["u"]) is int
    assert type(value["f"]) is float and type(value["d"]) is float
    assert type(value["b"]) is bool and type(value["nb"]) is bool
    assert type(value["s"]) is str
    assert canonical_json({"i": np.int64(7), "f": np.float32(0.5), "b": np.bool_(False), "s": np.str_("x")}) == (
        '{"b":false,"f":0.5,"i":7,"s":"x"}'
    )


def test_numpy_bool_is_a_bool_not_an_int():
    assert canonical_json([np.bool_(True), True, 1]) == "[true,true,1]"


def test_float32_is_written_as_its_exact_double_value():
    # float32(0.1) is not 0.1; canonical JSON writes the value it holds, identically every time.
    assert canonical_json(np.float32(0.1)) == "0.10000000149011612"


def test_numpy_arrays_become_nested_lists():
    assert canonical_json(np.arange(3)) == "[0,1,2]"
    assert canonical_json(np.array([[1.5, 2.0], [3.0, 4.0]])) == "[[1.5,2.0],[3.0,4.0]]"
    assert canonical_json(np.array([True, False])) == "[true,false]"
    assert canonical_json(np.array(["a", "é"])) == '["a","é"]'
    assert canonical_json(np.zeros((2, 0))) == "[[],[]]"
    assert canonical_json({"a": np.array([1, 2], dtype=np.uint8)}) == '{"a":[1,2]}'


def test_numpy_str_keys_are_accepted_as_strings():
    assert canonical_json({np.str_("b"): 1, "a": 2}) == '{"a":2,"b":1}'


def test_numpy_and_python_values_give_the_same_text():
    numpy_side = {"n": np.int64(3), "x": np.float64(0.5), "v": np.array([1, 2]), "flag": np.bool_(True)}
    python_side = {"n": 3, "x": 0.5, "v": [1, 2], "flag": True}
    assert canonical_json(numpy_side) == canonical_json(python_side)


def test_plain_data_converts_as_the_general_walk_does():
    """to_json_value's fast path (plain dicts, lists, tuples, str, int, bool, None, float) equals the walk that
    tracks JSON paths for its error messages; anything else (numpy, subclasses) takes that walk."""
    obj = {"a": [1, 2.5, (True, None)], "b": {"c": "x", "d": [[], {}]}, "e": -0.0, "f": 10 ** 30}
    assert to_json_value(obj) == fp_module._to_json_value(obj, "$") == {
        "a": [1, 2.5, [True, None]], "b": {"c": "x", "d": [[], {}]}, "e": -0.0, "f": 10 ** 30}
    mixed = {"a": [1, np.int64(2)], "b": (np.float32(0.5),)}
    assert to_json_value(mixed) == {"a": [1, 2], "b": [0.5]}


def test_key_order_does_not_change_canonical_json():
    a = {"x": 1, "y": {"p": [1, 2], "q": "z"}}
    b = {"y": {"q": "z", "p": [1, 2]}, "x": 1}
    assert canonical_json(a) == canonical_json(b)


# ------------------------------------------------------------------------------------------------- refusals


@pytest.mark.parametrize(
    ("obj", "path"),
    [
        (float("nan"), "$"),
        ({"a": [1.0, float("nan")]}, "$.a[1]"),
        ({"a": {"b": float("inf")}}, "$.a.b"),
        ([0, [1, -float("inf")]], "$[1][1]"),
        ({"x": np.float32("nan")}, "$.x"),
        ({"x": np.float64("inf")}, "$.x"),
        ({"arr": np.array([1.0, np.nan])}, "$.arr[1]"),
        ({"arr": np.array([[1.0, 2.0], [np.inf, 0.0]])}, "$.arr[1][0]"),
    ],
)
def test_non_finite_numbers_are_refused_naming_the_path(obj, path):
    with pytest.raises(ValidationError) as info:
        canonical_json(obj)
    message = str(info.value)
    assert re.search(rf"at {re.escape(path)}(\s|$)", message), message
    assert "non-finite" in message


@pytest.mark.parametrize(
    ("obj", "path", "culprit"),
    [
        ({1: "a"}, "$", "1"),
        ({"a": {2.5: "b"}}, "$.a", "2.5"),
        ({"a": [{None: 1}]}, "$.a[0]", "None"),
        ({"a": {(1, 2): 0}}, "$.a", "(1, 2)"),
    ],
)
def test_non_string_keys_are_refused_naming_the_path(obj, path, culprit):
    with pytest.raises(ValidationError) as info:
        canonical_json(obj)
    message = str(info.value)
    assert f"at {path} " in message, message
    assert culprit in message


class Opaque:
    pass


@pytest.mark.parametrize(
    ("obj", "path", "type_name"),
    [
        (Opaque(), "$", "Opaque"),
        ({"a": [1, Opaque()]}, "$.a[1]", "Opaque"),
        ({"a": {1, 2}}, "$.a", "set"),
        ({"a": b"bytes"}, "$.a", "bytes"),
        ({"a": 1 + 2j}, "$.a", "complex"),
        ({"a": {"b": object()}}, "$.a.b", "object"),
        ({"a": np.array([object()], dtype=object)}, "$.a", "object"),
        ({"a": np.array([1 + 1j])}, "$.a", "complex"),
    ],
)
def test_unknown_objects_are_refused_naming_the_path(obj, path, type_name):
    with pytest.raises(ValidationError) as info:
        canonical_json(obj)
    message = str(info.value)
    assert f"at {path} " in message, message
    assert type_name in message


def test_refusals_are_vertebrae_errors_and_value_errors():
    with pytest.raises(ValueError):
        canonical_json({"a": float("nan")})
    with pytest.raises(VertebraeError):
        canonical_json({"a": object()})
    with pytest.raises(ValidationError):
        fingerprint("embedding", {"a": float("inf")})


# ---------------------------------------------------------------------------------------------- fingerprints


# (kind, recipe, the canonical document written out by hand, golden fingerprint)
GOLDEN = [
    (
        "embedding",
        {"dataset": "declared:digits@1", "endpoint": "samples", "extractor": {"type": "precomputed"}},
        '{"kind":"embedding","recipe":{"dataset":"declared:digits@1","endpoint":"samples",'
        '"extractor":{"type":"precomputed"}},"schema":"vertebrae.embedding/v1"}',
        "b66934cd7dd7c95d",
    ),
    (
        "plan",
        {},
        '{"kind":"plan","recipe":{},"schema":"vertebrae.plan/v1"}',
        "afd50edb62fd2840",
    ),
    (
        "score",
        {"y": None, "x": [1, 2.5, "ü"]},
        '{"kind":"score","recipe":{"x":[1,2.5,"ü"],"y":null},"schema":"vertebrae.score/v1"}',
        "ab4d605ce3db98a4",
    ),
    (
        "protocol",
        {"target_type": "classification", "dataset": "declared:digits@1"},
        '{"kind":"protocol","recipe":{"dataset":"declared:digits@1","target_type":"classification"},'
        '"schema":"vertebrae.labelled-protocol/v1"}',
        "71b76a16615fcc98",
    ),
]


@pytest.mark.parametrize(("kind", "recipe", "document", "golden"), GOLDEN, ids=[g[0] for g in GOLDEN])
def test_golden_fingerprints(kind, recipe, document, golden):
    assert canonical_json({"kind": kind, "schema": SCHEMAS[kind], "recipe": recipe}) == document
    assert _sha16(document) == golden  # the golden value is the hash of the hand-written document
    assert fingerprint(kind, recipe) == golden


def test_fingerprint_format():
    value = fingerprint("plan", {"a": 1})
    assert re.fullmatch(r"[0-9a-f]{16}", value)
    assert fp_module.FINGERPRINT_LENGTH == 16


def test_sha256_hex_of_text_is_of_its_utf8_bytes():
    assert sha256_hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    assert sha256_hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    assert sha256_hex("é") == sha256_hex("é".encode("utf-8")) == hashlib.sha256(b"\xc3\xa9").hexdigest()


def test_schema_table_is_pinned():
    assert SCHEMAS == {
        "embedding": "vertebrae.embedding/v1",
        # v2: the scale rule (issue 48): quantize float16 calibrated by the reference's largest |value|, so its
        # stored values change; every compressed fingerprint (and the scores built on them) changes with it
        "compressed": "vertebrae.compressed-embedding/v2",
        "fitted-extractor": "vertebrae.fitted-extractor/v1",
        "plan": "vertebrae.plan/v1",
        "protocol": "vertebrae.labelled-protocol/v1",
        "score": "vertebrae.score/v1",
        "report": "vertebrae.report/v1",
        "comparison": "vertebrae.comparison-artifact/v1",  # a new kind: no existing fingerprint changes
        # v2: partial files moved under their candidate's merge fingerprint (results/retrieval/partials/{merge}/),
        # so the partial rule's input is a pattern, not a function evaluated per job
        "retrieval-partial": "vertebrae.retrieval-partial/v2",
        # v2: the fan-out inputs also name the protocol's relevance rows by query and by gallery item (HDF5 beside
        # it), which partial jobs read by range instead of the whole protocol; no fingerprint of a recipe changes
        # v3: it is the inputs.json of a fan-out bundle folder (stages.fanout_bundle) that holds the merge spec, the
        # endpoints and the relevance rows, named relative to it, with their content hashes; the partial jobs'
        # one declared input; no fingerprint of a recipe changes
        "retrieval-fanout": "vertebrae.retrieval-fanout/v3",
        "embedding-sweep": "vertebrae.embedding-sweep/v1",  # a new kind (layer sweep jobs): no fingerprint changes
        "labelled-partial": "vertebrae.labelled-partial/v1",  # a new kind (one metric's job): no fingerprint changes
        "views": "vertebrae.views/v1",  # a new kind (a benchmark's target views report): no fingerprint changes
    }


def test_key_order_of_the_recipe_does_not_change_the_fingerprint():
    a = {"dataset": "d", "endpoint": "samples", "extractor": {"type": "x", "params": {"k": 1, "m": [1, 2]}}}
    b = {"extractor": {"params": {"m": [1, 2], "k": 1}, "type": "x"}, "endpoint": "samples", "dataset": "d"}
    assert fingerprint("embedding", a) == fingerprint("embedding", b)


def test_every_recipe_value_matters():
    base = {"dataset": "d", "endpoint": "samples", "extractor": {"type": "x", "k": 1}}
    variants = [
        {**base, "dataset": "e"},
        {**base, "endpoint": "queries"},
        {**base, "extractor": {"type": "x", "k": 2}},
        {**base, "extractor": {"type": "x", "k": 1.0}},  # 1 and 1.0 are different recipes
        {**base, "extractor": {"type": "x", "k": "1"}},
        {**base, "extractor": {"type": "x", "k": True}},
        {**base, "extra": None},
    ]
    prints = {fingerprint("embedding", v) for v in variants} | {fingerprint("embedding", base)}
    assert len(prints) == len(variants) + 1


def test_numpy_values_fingerprint_like_plain_values():
    assert fingerprint("plan", {"n": np.int64(4), "v": np.array([0.5, 1.5])}) == fingerprint(
        "plan", {"n": 4, "v": [0.5, 1.5]}
    )


def test_the_kind_is_part_of_the_fingerprint():
    recipe = {"dataset": "d"}
    prints = {fingerprint(kind, recipe) for kind in SCHEMAS}
    assert len(prints) == len(SCHEMAS)


@pytest.mark.parametrize("kind", ["", "Embedding", "embeddings", "unknown", None])
def test_unknown_kind_is_refused(kind):
    with pytest.raises(ValidationError) as info:
        fingerprint(kind, {})
    assert repr(kind) in str(info.value)
    assert "embedding" in str(info.value)  # lists the known kinds


def test_schema_version_is_part_of_the_fingerprint(monkeypatch):
    recipe = {"dataset": "declared:digits@1", "endpoint": "samples", "extractor": {"type": "precomputed"}}
    before = fingerprint("embedding", recipe)
    assert before == "b66934cd7dd7c95d"
    monkeypatch.setitem(SCHEMAS, "embedding", "vertebrae.embedding/v2")
    after = fingerprint("embedding", recipe)
    assert after != before
    assert after == _sha16(
        '{"kind":"embedding","recipe":{"dataset":"declared:digits@1","endpoint":"samples",'
        '"extractor":{"type":"precomputed"}},"schema":"vertebrae.embedding/v2"}'
    )
    # other kinds are unaffected
    assert fingerprint("plan", {}) == "afd50edb62fd2840"
    monkeypatch.undo()
    assert fingerprint("embedding", recipe) == before


def test_fingerprint_refuses_a_recipe_that_is_not_json_naming_the_path():
    with pytest.raises(ValidationError) as info:
        fingerprint("embedding", {"extractor": {"params": [1, object()]}})
    assert "$.recipe.extractor.params[1]" in str(info.value)


# ------------------------------------------------------------------------------- recipes vertebrae builds


def test_golden_precomputed_embedding_recipe():
    recipe = embedding_recipe(DIGITS, "samples", PrecomputedExtractor("pixels"))
    assert recipe == {"dataset": DIGITS, "endpoint": "samples", "extractor": {"type": "precomputed"}}
    document = (
        '{"kind":"embedding","recipe":{"dataset":"declared:sklearn-digits@1","endpoint":"samples",'
        '"extractor":{"type":"precomputed"}},"schema":"vertebrae.embedding/v1"}'
    )
    assert _sha16(document) == "09f6d8a4296b789a"
    assert fingerprint("embedding", recipe) == "09f6d8a4296b789a"


def test_precomputed_embedding_fingerprint_ignores_the_extractor_name():
    a = fingerprint("embedding", embedding_recipe(DIGITS, "samples", PrecomputedExtractor("pixels")))
    b = fingerprint("embedding", embedding_recipe(DIGITS, "samples", PrecomputedExtractor("other-name")))
    assert a == b


def test_embedding_fingerprint_depends_on_dataset_identity_and_endpoint():
    ex = PrecomputedExtractor()
    base = fingerprint("embedding", embedding_recipe(DIGITS, "samples", ex))
    assert fingerprint("embedding", embedding_recipe("declared:sklearn-digits@2", "samples", ex)) != base
    assert fingerprint("embedding", embedding_recipe(DIGITS, "queries", ex)) != base
    key = DatasetIdentity.declared("sklearn-digits", "1").key()
    assert key == DIGITS
    assert fingerprint("embedding", embedding_recipe(key, "samples", ex)) == base


PCA_IDENTITY = (
    '{"steps":[{"estimator":"sklearn.preprocessing.StandardScaler","params":{}},'
    '{"estimator":"sklearn.decomposition.PCA","params":{"n_components":8,"whiten":false}}]}'
)
PCA_EXTRACTOR_RECIPE = {
    "type": "sklearn",
    "identity": PCA_IDENTITY,
    "random_state": 0,
    "allow_sparse": True,
    "already_fitted": False,
}


def test_golden_sklearn_pipeline_recipes():
    extractor = SklearnExtractor.from_steps("pca8", PCA_STEPS)
    assert extractor.recipe() == PCA_EXTRACTOR_RECIPE

    fit = fit_recipe(DIGITS, "samples", extractor)
    assert fit == {"dataset": DIGITS, "endpoint": "samples", "extractor": PCA_EXTRACTOR_RECIPE}
    assert fingerprint("fitted-extractor", fit) == "3ee3a9f9df651491"

    recipe = embedding_recipe(DIGITS, "samples", extractor)
    assert recipe == {**fit, "fit": "3ee3a9f9df651491"}
    assert fingerprint("embedding", recipe) == "23a4490fd3a989c3"


def test_golden_sklearn_fit_fingerprint_from_hand_written_document():
    identity_json = PCA_IDENTITY.replace('"', '\\"')
    document = (
        '{"kind":"fitted-extractor","recipe":{"dataset":"declared:sklearn-digits@1","endpoint":"samples",'
        '"extractor":{"allow_sparse":true,"already_fitted":false,"identity":"' + identity_json + '",'
        '"random_state":0,"type":"sklearn"}},"schema":"vertebrae.fitted-extractor/v1"}'
    )
    assert _sha16(document) == "3ee3a9f9df651491"


def test_sklearn_declared_steps_fingerprint_ignores_param_order_and_name():
    reordered = [
        {"estimator": "sklearn.preprocessing.StandardScaler", "params": {}},
        {"params": {"whiten": False, "n_components": 8}, "estimator": "sklearn.decomposition.PCA"},
    ]
    a = SklearnExtractor.from_steps("pca8", PCA_STEPS)
    b = SklearnExtractor.from_steps("another-name", reordered)
    assert fingerprint("embedding", embedding_recipe(DIGITS, "samples", a)) == "23a4490fd3a989c3"
    assert fingerprint("embedding", embedding_recipe(DIGITS, "samples", b)) == "23a4490fd3a989c3"


def test_sklearn_recipe_changes_with_params_seed_and_sparsity():
    def fp(extractor):
        return fingerprint("embedding", embedding_recipe(DIGITS, "samples", extractor))

    base = fp(SklearnExtractor.from_steps("p", PCA_STEPS))
    other_k = [PCA_STEPS[0], {"estimator": "sklearn.decomposition.PCA", "params": {"n_components": 9, "whiten": False}}]
    variants = [
        fp(SklearnExtractor.from_steps("p", other_k)),
        fp(SklearnExtractor.from_steps("p", PCA_STEPS, random_state=1)),
        fp(SklearnExtractor.from_steps("p", PCA_STEPS, allow_sparse=False)),
        fp(SklearnExtractor.from_steps("p", PCA_STEPS[1:])),
    ]
    assert base not in variants
    assert len(set(variants)) == len(variants)


def test_live_sklearn_estimator_without_cache_identity_never_shares_a_fingerprint():
    from sklearn.decomposition import PCA

    a = SklearnExtractor("pca", PCA(n_components=2))
    b = SklearnExtractor("pca", PCA(n_components=2))
    assert not a.reusable
    assert fingerprint("embedding", embedding_recipe(DIGITS, "samples", a)) != fingerprint(
        "embedding", embedding_recipe(DIGITS, "samples", b)
    )


def test_golden_protocol_recipe():
    declaration = {"target_type": "classification", "label_names": None, "target_names": None}
    recipe = protocol_recipe(DIGITS, declaration)
    assert recipe == {"dataset": DIGITS, "targets": declaration}
    document = (
        '{"kind":"protocol","recipe":{"dataset":"declared:sklearn-digits@1","targets":{"label_names":null,'
        '"target_names":null,"target_type":"classification"}},"schema":"vertebrae.labelled-protocol/v1"}'
    )
    assert _sha16(document) == "8dcca8c193fa0516"
    assert fingerprint("protocol", recipe) == "8dcca8c193fa0516"
    assert fingerprint("protocol", protocol_recipe("declared:sklearn-digits@2", declaration)) != "8dcca8c193fa0516"
    regression = {**declaration, "target_type": "regression"}
    assert fingerprint("protocol", protocol_recipe(DIGITS, regression)) != "8dcca8c193fa0516"


def test_unresolved_content_identity_cannot_name_an_artifact():
    with pytest.raises(IdentityError):
        embedding_recipe(DatasetIdentity.from_content().key(), "samples", PrecomputedExtractor())


def test_recipe_data_holding_itself_is_refused_naming_its_path():
    # issue 32: a self-referencing recipe recursed until Python's RecursionError
    from vertebrae.core.errors import ValidationError
    from vertebrae.core.fingerprint import canonical_json

    params = {"alpha": 1}
    params["again"] = params
    with pytest.raises(ValidationError, match=r"\$\.params\.again contains itself"):
        canonical_json({"params": params})
    looped: list = [1.5]
    looped.append(looped)
    with pytest.raises(ValidationError, match=r"\$\[1\] contains itself"):
        canonical_json(looped)
    deep: list = []
    inner = deep
    for _ in range(5000):
        inner.append([])
        inner = inner[0]
    with pytest.raises(ValidationError, match="nested more than 200 levels"):
        canonical_json(deep)
    shared = [1]
    assert canonical_json({"a": shared, "b": shared}) == '{"a":[1],"b":[1]}'  # shared, not cyclic: fine
