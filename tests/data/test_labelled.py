"""BenchmarkDataset: every bad input is refused with a vertebrae error naming the culprit; good inputs kept."""

from __future__ import annotations

import datetime as dt
import enum
import uuid

import numpy as np
import pytest
import scipy.sparse as sp

from vertebrae import (
    BenchmarkDataset,
    DatasetIdentity,
    IdentityError,
    LabelError,
    ValidationError,
    VertebraeError,
)

ID = DatasetIdentity.declared("toy", "1")


def _dense(n=4, d=3):
    return np.arange(n * d, dtype=np.float64).reshape(n, d)


def _raises(exc_type, fn, *args, **kwargs) -> str:
    """Run ``fn``; it must raise ``exc_type`` (a vertebrae ValueError); return the message."""
    with pytest.raises(exc_type) as info:
        fn(*args, **kwargs)
    assert isinstance(info.value, VertebraeError)
    assert isinstance(info.value, ValueError)
    return str(info.value)


@pytest.fixture(params=["from_embeddings", "from_arrays"])
def build(request):
    return getattr(BenchmarkDataset, request.param)


# ------------------------------------------------------------------------------------------------ identity


def test_a_dataset_without_identity_is_refused(build):
    message = _raises(IdentityError, build, _dense(), [0, 1, 0, 1], identity=None)
    assert "no identity" in message
    assert "DatasetIdentity.declared" in message


def test_an_identity_of_the_wrong_type_is_refused(build):
    message = _raises(IdentityError, build, _dense(), [0, 1, 0, 1], identity="declared:toy@1")
    assert "str" in message


def test_identity_is_required_as_a_keyword():
    with pytest.raises(TypeError):
        BenchmarkDataset.from_embeddings(_dense(), [0, 1, 0, 1])  # type: ignore[call-arg]


# ----------------------------------------------------------------------------------------- non-finite rows


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_dense_value_names_row_id_and_index(build, bad):
    X = _dense()
    X[2, 1] = bad
    message = _raises(
        ValidationError, build, X, ["a", "b", "a", "b"], identity=ID, row_ids=["img-001", "img-002", "img-003", "img-004"]
    )
    assert "'img-003' (index 2)" in message
    assert "img-001" not in message and "img-002" not in message and "img-004" not in message
    assert "1 row(s)" in message


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_non_finite_sparse_value_names_row_id_and_index(build, bad):
    X = np.zeros((5, 4))
    X[0, 0] = 1.0
    X[3, 2] = bad
    X[4, 1] = 2.0
    message = _raises(
        ValidationError, build, sp.csr_matrix(X), [0, 1, 0, 1, 0], identity=ID, row_ids=["r0", "r1", "r2", "r3", "r4"]
    )
    assert "'r3' (index 3)" in message
    for other in ("r0", "r1", "r2", "r4"):
        assert other not in message


def test_non_finite_values_in_several_rows_are_all_named():
    X = _dense(6, 2)
    X[1, 0] = np.nan
    X[4, 1] = np.inf
    message = _raises(
        ValidationError, BenchmarkDataset.from_embeddings, X, [0, 1] * 3, identity=ID, row_ids=list("uvwxyz")
    )
    assert "2 row(s)" in message
    assert "'v' (index 1)" in message and "'y' (index 4)" in message


def test_non_finite_value_with_default_row_ids_names_the_index():
    X = _dense()
    X[3, 0] = np.nan
    message = _raises(ValidationError, BenchmarkDataset.from_embeddings, X, [0, 1, 0, 1], identity=ID)
    assert "(index 3)" in message
    assert "row id 3 (index 3)" in message  # the default row id of row 3 is the integer 3


def test_non_finite_float32_is_refused():
    X = _dense().astype(np.float32)
    X[0, 0] = np.float32("nan")
    message = _raises(ValidationError, BenchmarkDataset.from_embeddings, X, [0, 1, 0, 1], identity=ID, row_ids=list("abcd"))
    assert "'a' (index 0)" in message


def test_many_non_finite_rows_are_capped_in_the_message():
    X = np.full((30, 2), np.nan)
    message = _raises(ValidationError, BenchmarkDataset.from_embeddings, X, [0, 1] * 15, identity=ID)
    assert "30 row(s)" in message
    assert "(index 9)" in message and "(index 10)" not in message
    assert message.endswith(", ...")


# ----------------------------------------------------------------------------------------------- shape, counts


def test_label_count_must_equal_row_count(build):
    message = _raises(ValidationError, build, _dense(4), [0, 1, 0], identity=ID)
    assert "4 rows" in message and "3 labels" in message
    message = _raises(ValidationError, build, _dense(4), [0, 1, 0, 1, 0], identity=ID)
    assert "4 rows" in message and "5 labels" in message


def test_label_count_is_checked_for_sparse_and_numpy_labels():
    message = _raises(
        ValidationError, BenchmarkDataset.from_embeddings, sp.csr_matrix(_dense(4)), np.array([0, 1]), identity=ID
    )
    assert "4 rows" in message and "2 labels" in message


def test_a_string_is_not_a_sequence_of_labels():
    # "ab" would otherwise be read as the two labels "a" and "b"
    message = _raises(ValidationError, BenchmarkDataset.from_embeddings, _dense(2), "ab", identity=ID)
    assert "str" in message


def test_row_id_count_must_equal_row_count():
    message = _raises(ValidationError, BenchmarkDataset.from_embeddings, _dense(4), [0, 1, 0, 1], identity=ID, row_ids=["a", "b"])
    assert "2 row ids" in message and "4 rows" in message


@pytest.mark.parametrize("shape", [(4,), (2, 2, 1), ()])
def test_non_2d_input_is_refused_with_its_shape(build, shape):
    X = np.ones(shape)
    labels = [0, 1, 0, 1][: (shape[0] if shape else 1)]
    message = _raises(ValidationError, build, X, labels, identity=ID)
    assert "2-D" in message
    assert str(shape) in message


def test_non_numeric_input_is_refused_with_its_dtype():
    message = _raises(
        ValidationError, BenchmarkDataset.from_embeddings, np.array([["a", "b"], ["c", "d"]]), [0, 1], identity=ID
    )
    assert "numeric" in message and "<U1" in message


def test_an_empty_dataset_is_refused():
    message = _raises(ValidationError, BenchmarkDataset.from_embeddings, np.zeros((0, 3)), [], identity=ID)
    assert "no rows" in message


# ---------------------------------------------------------------------------------------------------- labels


def test_a_single_class_is_refused_naming_it(build):
    message = _raises(ValidationError, build, _dense(), ["cat"] * 4, identity=ID)
    assert "single class" in message and "'cat'" in message


def test_a_single_typed_class_is_named_by_its_display():
    message = _raises(ValidationError, BenchmarkDataset.from_embeddings, _dense(), [dt.date(2024, 5, 1)] * 4, identity=ID)
    assert "'2024-05-01'" in message


@pytest.mark.parametrize("bad", [object(), {"a": 1}, [1, 2], float("nan"), None, b"x"],
                         ids=["object", "dict", "list", "nan", "None", "bytes"])
def test_an_unsupported_label_names_the_row(build, bad):
    labels = ["a", "b", "a", bad]
    message = _raises(LabelError, build, _dense(), labels, identity=ID)
    assert "row 3" in message
    assert type(bad).__name__ in message


def test_unsupported_label_names_the_first_bad_row():
    message = _raises(LabelError, BenchmarkDataset.from_embeddings, _dense(), ["a", object(), "b", {}], identity=ID)
    assert "row 1" in message and "row 3" not in message


def test_int_and_str_are_two_classes():
    ds = BenchmarkDataset.from_embeddings(_dense(), [1, "1", 1, "1"], identity=ID)
    assert len(ds.catalog) == 2
    assert ds.class_counts() == {"@int:1": 2, "1": 2}
    assert ds.summary()["labels"] == {"@int:1": "1 [int]", "1": "1 [str]"}
    assert list(ds.label_keys) == ["@int:1", "1", "@int:1", "1"]


def test_bool_int_and_float_are_distinct_classes():
    ds = BenchmarkDataset.from_embeddings(_dense(), [True, 1, 1.0, 1], identity=ID)
    assert ds.class_counts() == {"@bool:true": 1, "@int:1": 2, "@float:1.0": 1}


class Split(enum.Enum):
    TRAIN = "train"
    TEST = "test"


def test_typed_labels_are_accepted():
    u1 = uuid.UUID("00000000-0000-0000-0000-000000000001")
    u2 = uuid.UUID("00000000-0000-0000-0000-000000000002")
    ds = BenchmarkDataset.from_embeddings(_dense(3), [u2, u1, u2], identity=ID)
    assert ds.class_counts() == {f"@uuid:{u1}": 1, f"@uuid:{u2}": 2}

    ds = BenchmarkDataset.from_embeddings(_dense(3), [dt.date(2024, 1, 2), dt.date(2023, 12, 31), dt.date(2024, 1, 2)], identity=ID)
    assert ds.class_counts() == {"@date:2023-12-31": 1, "@date:2024-01-02": 2}
    assert ds.summary()["labels"] == {"@date:2023-12-31": "2023-12-31", "@date:2024-01-02": "2024-01-02"}

    ds = BenchmarkDataset.from_embeddings(_dense(3), [Split.TEST, Split.TRAIN, Split.TEST], identity=ID)
    prefix = f"@enum:{Split.__module__}.Split"
    # enum members are ordered by declaration, not by name
    assert ds.class_counts() == {f"{prefix}.TRAIN": 1, f"{prefix}.TEST": 2}
    assert list(ds.summary()["labels"].values()) == ["Split.TRAIN", "Split.TEST"]


def test_numpy_labels_are_accepted():
    ds = BenchmarkDataset.from_embeddings(_dense(), np.array([3, 1, 3, 3]), identity=ID)
    assert ds.class_counts() == {"@int:1": 1, "@int:3": 3}


# --------------------------------------------------------------------------------------------------- row ids


def test_duplicate_row_ids_are_refused_naming_the_id(build):
    message = _raises(ValidationError, build, _dense(), [0, 1, 0, 1], identity=ID, row_ids=["a", "dup", "c", "dup"])
    assert "duplicate row id 'dup'" in message
    assert "[1, 3]" in message


def test_duplicate_int_row_ids_are_refused():
    message = _raises(ValidationError, BenchmarkDataset.from_embeddings, _dense(), [0, 1, 0, 1], identity=ID, row_ids=np.array([7, 8, 7, 9]))
    assert "duplicate row id 7" in message


def test_int_and_str_row_ids_are_different_ids():
    ds = BenchmarkDataset.from_embeddings(_dense(), [0, 1, 0, 1], identity=ID, row_ids=[1, "1", 2, "2"])
    assert ds.row_ids == ("@int:1", "1", "@int:2", "2")


@pytest.mark.parametrize("bad", [1.5, None, True, ("a",)], ids=repr)
def test_unsupported_row_ids_are_refused_naming_the_index(bad):
    message = _raises(ValidationError, BenchmarkDataset.from_embeddings, _dense(), [0, 1, 0, 1], identity=ID, row_ids=["a", "b", bad, "d"])
    assert "index 2" in message and repr(bad) in message


def test_numpy_integer_row_ids_are_ints():
    ds = BenchmarkDataset.from_embeddings(_dense(), [0, 1, 0, 1], identity=ID, row_ids=list(np.arange(10, 14)))
    assert ds.row_ids == ("@int:10", "@int:11", "@int:12", "@int:13")
    same = BenchmarkDataset.from_embeddings(_dense(), [0, 1, 0, 1], identity=ID, row_ids=[10, 11, 12, 13])
    assert same.row_ids == ds.row_ids


def test_default_row_ids_are_the_row_order():
    ds = BenchmarkDataset.from_embeddings(_dense(), [0, 1, 0, 1], identity=ID)
    assert ds.row_ids == ("@int:0", "@int:1", "@int:2", "@int:3")


# ------------------------------------------------------------------------------------------------ good paths


def test_csr_input_stays_csr():
    X = sp.random(20, 50, density=0.1, format="csr", random_state=0, dtype=np.float32)
    ds = BenchmarkDataset.from_embeddings(X, [0, 1] * 10, identity=ID)
    assert sp.issparse(ds.inputs) and ds.inputs.format == "csr"
    assert ds.is_sparse
    assert ds.inputs.dtype == np.float32
    assert (ds.inputs != X).nnz == 0
    assert ds.summary()["sparse"] is True


@pytest.mark.parametrize("fmt", ["csc", "coo", "lil"])
def test_other_sparse_formats_become_csr(fmt):
    X = sp.random(6, 5, density=0.3, format=fmt, random_state=1)
    ds = BenchmarkDataset.from_arrays(X, [0, 1] * 3, identity=ID)
    assert sp.issparse(ds.inputs) and ds.inputs.format == "csr"
    np.testing.assert_array_equal(ds.inputs.toarray(), X.toarray())


def test_dense_input_stays_dense_and_float_dtype_is_kept():
    X = _dense().astype(np.float32)
    ds = BenchmarkDataset.from_embeddings(X, [0, 1, 0, 1], identity=ID)
    assert isinstance(ds.inputs, np.ndarray) and not ds.is_sparse
    assert ds.inputs.dtype == np.float32
    np.testing.assert_array_equal(ds.inputs, X)


def test_integer_input_becomes_float64():
    ds = BenchmarkDataset.from_arrays(np.array([[1, 2], [3, 4]]), ["x", "y"], identity=ID)
    assert ds.inputs.dtype == np.float64
    np.testing.assert_array_equal(ds.inputs, [[1.0, 2.0], [3.0, 4.0]])


def test_class_counts_follow_catalog_order():
    ds = BenchmarkDataset.from_embeddings(_dense(6, 2), ["b", "a", "c", "b", "b", "a"], identity=ID)
    assert list(ds.class_counts().items()) == [("a", 2), ("b", 3), ("c", 1)]
    assert sum(ds.class_counts().values()) == ds.n_rows


def test_summary_contents():
    ds = BenchmarkDataset.from_arrays(
        _dense(5, 3), ["b", "a", "b", "@x", "a"], identity=DatasetIdentity.declared("toy", "7"), row_ids=list("pqrst")
    )
    assert ds.summary() == {
        "identity": "declared:toy@7",
        "n_rows": 5,
        "n_features": 3,
        "groups": None,
        "modality": "features",
        "target_type": "classification",
        "sparse": False,
        "n_classes": 3,
        "class_counts": {"@str:@x": 1, "a": 2, "b": 2},
        "labels": {"@str:@x": "@x", "a": "a", "b": "b"},
    }


def test_modality_defaults_and_refusals():
    assert BenchmarkDataset.from_embeddings(_dense(), [0, 1, 0, 1], identity=ID).modality == "embedding"
    assert BenchmarkDataset.from_arrays(_dense(), [0, 1, 0, 1], identity=ID).modality == "features"
    message = _raises(ValidationError, BenchmarkDataset.from_arrays, _dense(), [0, 1, 0, 1], identity=ID, modality="audio")
    assert "'audio'" in message
    message = _raises(ValidationError, BenchmarkDataset.from_embeddings, _dense(), [0, 1, 0, 1], identity=ID, target_type="ordinal")
    assert "'ordinal'" in message


def test_metadata_is_copied():
    meta = {"source": "toy"}
    ds = BenchmarkDataset.from_embeddings(_dense(), [0, 1, 0, 1], identity=ID, metadata=meta)
    meta["source"] = "changed"
    assert ds.metadata == {"source": "toy"}


def test_content_identity_is_resolved_when_built():
    ds = BenchmarkDataset.from_embeddings(_dense(), [0, 1, 0, 1], identity=DatasetIdentity.from_content())
    assert ds.identity.resolved
    assert ds.identity_key().startswith("content:")
    assert ds.summary()["identity"] == ds.identity_key()
    sparse = BenchmarkDataset.from_embeddings(sp.csr_matrix(_dense()), [0, 1, 0, 1], identity=DatasetIdentity.from_content())
    assert sparse.identity.resolved and sparse.identity_key() != ds.identity_key()


def test_rows_slices_keep_the_format():
    ds = BenchmarkDataset.from_embeddings(sp.csr_matrix(_dense()), [0, 1, 0, 1], identity=ID)
    block = ds.rows(1, 3)
    assert sp.issparse(block) and block.shape == (2, 3)
    np.testing.assert_array_equal(block.toarray(), _dense()[1:3])


def test_with_groups_names_the_row_of_an_unsupported_group():
    dataset = BenchmarkDataset.from_embeddings(_dense(3), ["a", "b", "a"], identity=ID, row_ids=["r0", "r1", "r2"])
    with pytest.raises(LabelError, match=r"^group of row 'r1': "):
        dataset.with_groups(["g", object(), "g"])
    assert dataset.with_groups([1, "g", 1]).groups == ("@int:1", "g", "@int:1")
