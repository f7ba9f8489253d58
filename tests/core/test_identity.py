"""Dataset identities: declared / manifest / content / ephemeral rules, keys and round trips; groups in the key."""

from __future__ import annotations

import hashlib
import os
import re

import numpy as np
import pytest

from vertebrae import BenchmarkDataset, IdentityError, ValidationError
from vertebrae.core.fingerprint import fingerprint
from vertebrae.core.fingerprint import canonical_json
from vertebrae.core.identity import FILES_SCHEMA, KINDS, DatasetIdentity, grouped_key, require_identity
from vertebrae.extractors import PrecomputedExtractor
from vertebrae.scoring.overlap import OverlapScoringConfig
from vertebrae.stages.common import embedding_recipe
from vertebrae.stages.labelled import ScoringPlan, protocol_recipe, score_recipe

LABELS = ["a", "b", "a", "b"]


def _matrix():
    return np.arange(8, dtype=np.float64).reshape(4, 2)


def _content_key(X=None, labels=None, row_ids=None):
    ds = BenchmarkDataset.from_embeddings(
        _matrix() if X is None else X,
        LABELS if labels is None else labels,
        identity=DatasetIdentity.from_content(),
        row_ids=row_ids,
    )
    return ds.identity_key()


# ------------------------------------------------------------------------------------------------- declared


def test_declared_key_is_name_at_revision():
    identity = DatasetIdentity.declared("digits", "1")
    assert identity.kind == "declared"
    assert identity.key() == "declared:digits@1"
    assert identity.resolved and identity.reusable


@pytest.mark.parametrize("bad", ["", "   ", None, 1, b"digits"])
def test_declared_refuses_a_bad_dataset_id_naming_the_field(bad):
    with pytest.raises(IdentityError) as info:
        DatasetIdentity.declared(bad, "1")
    assert "dataset_id" in str(info.value)
    assert repr(bad) in str(info.value)


@pytest.mark.parametrize("bad", ["", "\t", None, 1])
def test_declared_refuses_a_bad_revision_naming_the_field(bad):
    with pytest.raises(IdentityError) as info:
        DatasetIdentity.declared("digits", bad)
    assert "revision" in str(info.value)
    assert "dataset_id" not in str(info.value)


def test_identity_errors_are_validation_and_value_errors():
    with pytest.raises(ValidationError):
        DatasetIdentity.declared("", "1")
    with pytest.raises(ValueError):
        DatasetIdentity.declared("digits", "")


def test_declared_keys_are_unambiguous():
    # Two different (name, revision) pairs must never share a key: the key names every derived artifact.
    pairs = [("a@b", "1"), ("a", "b@1"), ("a", "b"), ("ab", "1"), ("a", "1"), ("a", "1 ")]
    keys = {}
    for name, revision in pairs:
        try:
            keys[(name, revision)] = DatasetIdentity.declared(name, revision).key()
        except IdentityError as exc:  # refusing an ambiguous name is an acceptable way to stay unambiguous
            assert "@" in name and "dataset_id" in str(exc)
    assert len(set(keys.values())) == len(keys), keys


def test_declared_refuses_an_at_sign_in_the_name():
    with pytest.raises(IdentityError) as info:
        DatasetIdentity.declared("a@b", "1")
    assert "dataset_id" in str(info.value) and "'a@b'" in str(info.value)


def test_declared_key_is_the_same_in_any_working_directory(tmp_path, monkeypatch):
    """Paths are never hashed: a declared key depends on name and revision only, not on any file."""
    before = DatasetIdentity.declared("./data/digits.npz", "1").key()
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "digits.npz").write_bytes(b"one content")
    monkeypatch.chdir(tmp_path)
    first = DatasetIdentity.declared("./data/digits.npz", "1").key()
    (tmp_path / "data" / "digits.npz").write_bytes(b"another content entirely")
    second = DatasetIdentity.declared("./data/digits.npz", "1").key()
    os.remove(tmp_path / "data" / "digits.npz")
    third = DatasetIdentity.declared("./data/digits.npz", "1").key()
    assert before == first == second == third == "declared:./data/digits.npz@1"


# ------------------------------------------------------------------------------------------------- manifest


def test_manifest_key_is_the_hash_of_the_canonical_manifest():
    identity = DatasetIdentity.from_manifest("digits", {"b.npz": "sha256:22", "a.npz": "sha256:11"})
    canonical = '{"a.npz":"sha256:11","b.npz":"sha256:22"}'
    digest = hashlib.sha256(canonical.encode()).hexdigest()
    assert identity.kind == "manifest"
    assert identity.digest == digest
    assert identity.key() == f"manifest:digits:{digest}"
    assert identity.reusable and identity.resolved


def test_manifest_key_ignores_key_order_even_nested():
    a = DatasetIdentity.from_manifest("d", {"x": {"p": 1, "q": [1, 2]}, "y": "z"})
    b = DatasetIdentity.from_manifest("d", {"y": "z", "x": {"q": [1, 2], "p": 1}})
    assert a.key() == b.key()
    assert a == b


def test_manifest_key_changes_with_any_value():
    base = {"train.npz": "sha256:aa", "labels.csv": "sha256:bb"}
    key = DatasetIdentity.from_manifest("d", base).key()
    assert DatasetIdentity.from_manifest("d", {**base, "labels.csv": "sha256:bc"}).key() != key
    assert DatasetIdentity.from_manifest("d", {**base, "extra": "x"}).key() != key
    assert DatasetIdentity.from_manifest("d", {"train.npz": "sha256:aa"}).key() != key
    assert DatasetIdentity.from_manifest("e", base).key() != key


def test_manifest_never_reads_the_files_it_names(tmp_path):
    path = tmp_path / "rows.npz"
    manifest = {str(path): "sha256:fixed"}
    before = DatasetIdentity.from_manifest("d", manifest).key()
    path.write_bytes(b"content")
    during = DatasetIdentity.from_manifest("d", manifest).key()
    path.write_bytes(b"changed content")
    after = DatasetIdentity.from_manifest("d", manifest).key()
    assert before == during == after


@pytest.mark.parametrize("manifest", [{}, None, [], [("a", "b")], "a=b"])
def test_from_manifest_refuses_an_empty_or_non_mapping_manifest(manifest):
    with pytest.raises(IdentityError) as info:
        DatasetIdentity.from_manifest("digits", manifest)
    assert "manifest" in str(info.value) and "'digits'" in str(info.value)


def test_from_manifest_refuses_an_empty_name():
    with pytest.raises(IdentityError) as info:
        DatasetIdentity.from_manifest("", {"a": "b"})
    assert "dataset_id" in str(info.value)


def test_from_manifest_refuses_non_json_values_naming_the_path():
    with pytest.raises(ValidationError) as info:
        DatasetIdentity.from_manifest("d", {"files": [1.0, float("nan")]})
    assert "$.files[1]" in str(info.value)


# -------------------------------------------------------------------------------------------------- content


def test_unresolved_content_identity_has_no_key():
    identity = DatasetIdentity.from_content()
    assert identity.kind == "content"
    assert not identity.resolved
    assert identity.reusable
    with pytest.raises(IdentityError) as info:
        identity.key()
    assert "from_content" in str(info.value)


def test_dataset_resolves_a_content_identity_by_hashing_the_content():
    key = _content_key()
    assert re.fullmatch(r"content:[0-9a-f]{64}", key)
    assert _content_key() == key  # same content, same key, in a fresh dataset
    assert _content_key(X=_matrix().copy(order="F")) == key  # memory layout is not content


def test_content_key_changes_with_one_value_one_label_or_one_row_id():
    key = _content_key()
    X = _matrix()
    X[2, 1] += 1e-12
    assert _content_key(X=X) != key
    assert _content_key(labels=["a", "b", "b", "b"]) != key
    assert _content_key(labels=["a", "b", "a", "c"]) != key
    assert _content_key(row_ids=[0, 1, 2, 4]) != key
    assert _content_key(row_ids=[0, 1, 2, "3"]) != key  # 3 and "3" are different row ids
    assert _content_key(row_ids=[0, 1, 2, 3]) == key  # the default row ids are the row order


def test_content_key_distinguishes_typed_labels():
    assert _content_key(labels=[1, 2, 1, 2]) != _content_key(labels=["1", "2", "1", "2"])


def test_content_key_for_sparse_input():
    import scipy.sparse as sp

    dense = np.array([[0.0, 1.0], [2.0, 0.0], [0.0, 0.0], [3.0, 4.0]])
    key = _content_key(X=sp.csr_matrix(dense))
    assert _content_key(X=sp.csr_matrix(dense)) == key
    assert _content_key(X=sp.coo_matrix(dense)) == key  # same CSR content however it was built
    changed = dense.copy()
    changed[3, 1] = 5.0
    assert _content_key(X=sp.csr_matrix(changed)) != key


def test_with_content_digest_only_for_content_identities():
    resolved = DatasetIdentity.from_content().with_content_digest("ab" * 32)
    assert resolved.key() == "content:" + "ab" * 32
    with pytest.raises(IdentityError) as info:
        DatasetIdentity.declared("d", "1").with_content_digest("ab" * 32)
    assert "'declared'" in str(info.value)
    with pytest.raises(IdentityError):
        DatasetIdentity.from_content().with_content_digest("")


@pytest.mark.parametrize("digest", ["", "   ", "not hex!", "ABC:def"])
def test_content_identity_refuses_a_malformed_digest(digest):
    with pytest.raises(IdentityError) as info:
        DatasetIdentity.from_dict({"kind": "content", "digest": digest})
    assert "digest" in str(info.value)


def test_manifest_keys_are_unambiguous_even_from_dicts():
    # "manifest:{id}:{digest}" is only injective while a digest cannot hold a ":".
    with pytest.raises(IdentityError):
        DatasetIdentity.from_dict({"kind": "manifest", "dataset_id": "a", "digest": "b:c"})
    a = DatasetIdentity.from_dict({"kind": "manifest", "dataset_id": "a:b", "digest": "c"})
    assert a.key() == "manifest:a:b:c"


def test_a_stale_content_digest_is_not_trusted():
    """A content identity claims the digest of the content; a dataset built from other content refuses it."""
    good = BenchmarkDataset.from_embeddings(_matrix(), LABELS, identity=DatasetIdentity.from_content()).identity
    again = BenchmarkDataset.from_embeddings(_matrix(), LABELS, identity=good)
    assert again.identity == good
    X = _matrix()
    X[0, 0] = 99.0
    with pytest.raises(IdentityError) as info:
        BenchmarkDataset.from_embeddings(X, LABELS, identity=good)
    assert good.digest in str(info.value)


# ------------------------------------------------------------------------------------------------ ephemeral


def test_ephemeral_identities_differ_per_call_and_are_not_reusable():
    a, b = DatasetIdentity.ephemeral(), DatasetIdentity.ephemeral()
    assert a.kind == b.kind == "ephemeral"
    assert a.key() != b.key()
    assert a.key().startswith("ephemeral:") and b.key().startswith("ephemeral:")
    assert not a.reusable and not b.reusable
    assert a.resolved


def test_ephemeral_dataset_is_not_reusable():
    ds = BenchmarkDataset.from_embeddings(_matrix(), LABELS, identity=DatasetIdentity.ephemeral())
    assert not ds.identity.reusable


def test_only_ephemeral_is_not_reusable():
    assert DatasetIdentity.declared("d", "1").reusable
    assert DatasetIdentity.from_manifest("d", {"a": 1}).reusable
    assert DatasetIdentity.from_content().reusable


# -------------------------------------------------------------------------------------------------- files


def test_a_files_identity_hashes_its_recipe_under_a_versioned_key():
    recipe = {"type": "npz", "path": {"sha256": "ab" * 32}, "features_key": "embeddings"}
    identity = DatasetIdentity.from_files(recipe)
    expected = hashlib.sha256(canonical_json({"schema": FILES_SCHEMA, "files": recipe}).encode()).hexdigest()
    assert identity.kind == "files" and identity.digest == expected
    assert identity.key() == f"files:v1:{expected}" and FILES_SCHEMA.endswith("/v1")
    assert identity.resolved and identity.reusable
    assert DatasetIdentity.from_dict(identity.to_dict()) == identity
    # another file digest, or another option over the same file, is another dataset
    assert DatasetIdentity.from_files({**recipe, "path": {"sha256": "cd" * 32}}).key() != identity.key()
    assert DatasetIdentity.from_files({**recipe, "features_key": "other"}).key() != identity.key()


@pytest.mark.parametrize("bad", [{}, None, ["path"]])
def test_a_files_identity_needs_a_recipe(bad):
    with pytest.raises(IdentityError, match="files recipe"):
        DatasetIdentity.from_files(bad)


def test_a_files_identity_needs_a_hex_digest():
    with pytest.raises(IdentityError, match="digest"):
        DatasetIdentity("files", digest="XYZ")
    with pytest.raises(IdentityError, match="digest"):
        DatasetIdentity("files")


# ------------------------------------------------------------------------------------------ kinds and dicts


def test_kinds():
    assert KINDS == ("declared", "manifest", "content", "ephemeral", "files")
    with pytest.raises(IdentityError) as info:
        DatasetIdentity("guessed", "d", "1")
    assert "'guessed'" in str(info.value)


@pytest.mark.parametrize(
    "identity",
    [
        DatasetIdentity.declared("digits", "1"),
        DatasetIdentity.from_manifest("digits", {"a": "b", "n": [1, 2]}),
        DatasetIdentity.from_content().with_content_digest("0f" * 32),
        DatasetIdentity.from_content(),
        DatasetIdentity.ephemeral(),
    ],
    ids=["declared", "manifest", "content", "unresolved-content", "ephemeral"],
)
def test_to_dict_from_dict_round_trip(identity):
    data = identity.to_dict()
    assert set(data) == {"kind", "dataset_id", "revision", "digest"}
    import json

    assert json.loads(json.dumps(data)) == data  # plain JSON
    back = DatasetIdentity.from_dict(data)
    assert back == identity
    assert back.resolved == identity.resolved
    assert back.reusable == identity.reusable
    if identity.resolved:
        assert back.key() == identity.key()


def test_to_dict_values():
    assert DatasetIdentity.declared("digits", "1").to_dict() == {
        "kind": "declared", "dataset_id": "digits", "revision": "1", "digest": None,
    }


def test_from_dict_refuses_unknown_fields_and_kinds():
    with pytest.raises(IdentityError) as info:
        DatasetIdentity.from_dict({"kind": "declared", "dataset_id": "d", "revision": "1", "path": "/data"})
    assert "path" in str(info.value)
    with pytest.raises(IdentityError):
        DatasetIdentity.from_dict({"dataset_id": "d", "revision": "1"})
    with pytest.raises(IdentityError) as info:
        DatasetIdentity.from_dict({"kind": "declared", "dataset_id": "d"})
    assert "revision" in str(info.value)
    with pytest.raises(IdentityError) as info:
        DatasetIdentity.from_dict({"kind": "ephemeral"})
    assert "digest" in str(info.value)


def test_identities_are_frozen_and_hashable():
    identity = DatasetIdentity.declared("d", "1")
    with pytest.raises(AttributeError):
        identity.revision = "2"  # type: ignore[misc]
    assert {identity, DatasetIdentity.declared("d", "1")} == {identity}


# ----------------------------------------------------------------------------------------- require_identity


def test_require_identity_refuses_none_and_explains_the_choices():
    with pytest.raises(IdentityError) as info:
        require_identity(None)
    message = str(info.value)
    for name in ("declared", "from_manifest", "from_content", "ephemeral"):
        assert name in message
    assert message.startswith("dataset has no identity")


def test_require_identity_names_what_lacks_it():
    with pytest.raises(IdentityError) as info:
        require_identity(None, what="gallery endpoint")
    assert "gallery endpoint" in str(info.value)


@pytest.mark.parametrize("bad", ["declared:digits@1", {"kind": "declared"}, ("digits", "1"), 0])
def test_require_identity_refuses_non_identities(bad):
    with pytest.raises(IdentityError) as info:
        require_identity(bad)
    assert type(bad).__name__ in str(info.value)


def test_require_identity_returns_the_identity_unchanged():
    identity = DatasetIdentity.declared("d", "1")
    assert require_identity(identity) is identity


# ------------------------------------------------------------------------------------------------- groups
# Independence groups are part of what a dataset is: a grouped dataset's key (and every fingerprint built on it)
# differs from the ungrouped one's and from another grouping's; an ungrouped dataset's key is unchanged.

DIGITS = DatasetIdentity.declared("sklearn-digits", "1")
GOLDEN_PROTOCOL = "8dcca8c193fa0516"  # tests/core/test_fingerprint.py: the ungrouped digits protocol, pinned earlier
SITES = ["s1", "s1", 7, 7, "s2", "s2"]


def _six(identity=DIGITS):
    return BenchmarkDataset.from_embeddings(np.arange(12, dtype=np.float64).reshape(6, 2), ["a", "b"] * 3,
                                            identity=identity)


def _fingerprints(dataset):
    """(protocol, embedding, score) fingerprints of a precomputed candidate on ``dataset``."""
    protocol_fp = fingerprint("protocol", protocol_recipe(dataset.identity_key(), dataset.target_declaration))
    embed_fp = fingerprint("embedding", embedding_recipe(dataset.identity_key(), "samples", PrecomputedExtractor()))
    score_fp = fingerprint("score", score_recipe(embed_fp, protocol_fp, ScoringPlan(OverlapScoringConfig(k=2))))
    return protocol_fp, embed_fp, score_fp


def test_grouped_key_by_hand():
    document = ('{"groups":["a","@int:1"],"identity":"declared:d@1","name":"site",'
                '"schema":"vertebrae.groups/v1"}')
    expected = "declared:d@1|groups:" + hashlib.sha256(document.encode()).hexdigest()
    assert grouped_key("declared:d@1", "site", ["a", "@int:1"]) == expected


@pytest.mark.parametrize("bad", [[], ["a", 1], "ab"])
def test_grouped_key_refuses_groups_that_are_not_keys(bad):
    with pytest.raises(IdentityError, match="declared:d@1"):
        grouped_key("declared:d@1", "site", bad)


def test_ungrouped_keys_are_unchanged():
    # values computed before groups joined the identity
    assert _six().identity_key() == "declared:sklearn-digits@1"
    assert _fingerprints(_six())[0] == GOLDEN_PROTOCOL
    content = _six(DatasetIdentity.from_content())
    assert content.identity_key() == "content:d6bb0c7c3350e604591bd5e601946bff3891fd302ea5089c40856842789b3792"
    small = BenchmarkDataset.from_embeddings(np.arange(12, dtype=np.float64).reshape(6, 2), ["a", "b"] * 3,
                                             identity=DatasetIdentity.declared("d", "1"))
    assert small.subset([0, 1, 2, 3]).identity_key() == (
        "manifest:d.subset:86f097649c9d9c9ced6b893c2020701bbcbac19da6ddb0bdf1d01ce73f46d34f")


def test_groups_change_the_key_and_every_fingerprint_under_it():
    plain = _six()
    grouped = plain.with_groups(SITES, name="site")
    regrouped = plain.with_groups(["s1", "s2", 7, 7, "s2", "s1"], name="site")  # another partition
    renamed = plain.with_groups(SITES, name="hospital")
    keys = [d.identity_key() for d in (plain, grouped, regrouped, renamed)]
    assert len(set(keys)) == 4
    assert grouped.identity_key().startswith("declared:sklearn-digits@1|groups:")
    assert grouped.identity_key() == plain.with_groups(list(SITES), name="site").identity_key()  # deterministic
    assert grouped.identity.key() == plain.identity.key()  # the declared identity itself is untouched
    prints = [_fingerprints(d) for d in (plain, grouped, regrouped, renamed)]
    for column in zip(*prints):  # protocol, embedding and score fingerprints each differ across groupings
        assert len(set(column)) == 4
    assert grouped.summary()["identity"] == grouped.identity_key()


def test_typed_groups_are_distinct_from_their_text():
    plain = _six()
    assert plain.with_groups([1, 1, 2, 2, 3, 3]).identity_key() != plain.with_groups(["1", "1", "2", "2", "3", "3"]).identity_key()


def test_groups_fold_into_content_and_subset_identities():
    content = _six(DatasetIdentity.from_content())
    grouped = content.with_groups(SITES)
    assert grouped.identity_key() != content.identity_key()
    assert grouped.identity_key().startswith(content.identity_key() + "|groups:")
    sub, grouped_sub = content.subset([0, 3, 4]), grouped.subset([0, 3, 4])
    assert grouped_sub.groups == ("s1", "@int:7", "s2")  # groups follow their rows
    assert grouped_sub.identity_key() != sub.identity_key()
    assert grouped_sub.identity_key().startswith(sub.identity_key() + "|groups:")


def test_with_groups_refuses_an_empty_name():
    with pytest.raises(ValidationError, match="name"):
        _six().with_groups(SITES, name=" ")
