"""Targets: inference, the three target types, subsets, counts and payload round trips; BenchmarkDataset wiring.

Every expectation is worked out by hand from the documented contract (vertebrae/data/targets.py, spec
scoring.md): catalogs are ordered by type (bool < int < float < ... < str) then by natural value, never by
input order, and multi-label indicator columns follow the catalog.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import scipy.sparse as sp

from vertebrae import BenchmarkDataset, DatasetIdentity, LabelError, ValidationError, VertebraeError
from vertebrae.data.targets import (
    Targets,
    build_targets,
    classification_targets,
    infer_target_type,
    multilabel_targets,
    regression_targets,
)

ID = DatasetIdentity.declared("targets-toy", "1")


def _raises(exc_type, fn, *args, **kwargs) -> str:
    """``fn`` must raise ``exc_type`` (a vertebrae ValueError); return its message."""
    with pytest.raises(exc_type) as info:
        fn(*args, **kwargs)
    assert isinstance(info.value, VertebraeError)
    assert isinstance(info.value, ValueError)
    return str(info.value)


def _dense(targets: Targets) -> np.ndarray:
    assert sp.isspmatrix_csr(targets.values) or isinstance(targets.values, sp.csr_array)
    return targets.values.toarray()


def _roundtrip(targets: Targets) -> Targets:
    return Targets.from_payload(json.loads(json.dumps(targets.to_payload())))


# ------------------------------------------------------------------------------------------------ inference


@pytest.mark.parametrize(
    "y",
    [
        ["a", "b", "a"],
        np.array(["a", "b", "a"]),
        [0, 1, 2, 1],
        np.array([0, 1, 2, 1]),
        [0.5, 1.5, 0.5],
        np.array([0.25, 3.75, 1e6, -2.0]),  # continuous-looking floats are still classes unless declared
        (1, 2, 1),
        [True, False],
    ],
)
def test_one_dimensional_labels_are_classification_never_regression(y):
    assert infer_target_type(y) == "classification"
    assert build_targets(y).target_type == "classification"


@pytest.mark.parametrize(
    "y",
    [
        [("a",), ("a", "b"), ("b",)],
        [{"a"}, {"a", "b"}, {"b"}],
        [["a"], ["b", "a"]],
        [frozenset({1}), (2, 1)],
        np.array([[1, 0], [0, 1], [1, 1]]),
        np.array([[True, False], [False, True]]),
        sp.csr_matrix(np.array([[1, 0], [0, 1]])),
        sp.csc_matrix(np.array([[1, 0], [0, 1]])),
        sp.coo_matrix(np.array([[1, 0], [0, 1]])),
    ],
)
def test_label_collections_and_2d_indicators_are_multilabel(y):
    assert infer_target_type(y) == "multilabel"


def test_a_mixture_of_collections_and_scalars_is_not_multilabel():
    assert infer_target_type([("a",), "b"]) == "classification"


# ------------------------------------------------------------------------------------------------ multilabel from collections


def test_label_collections_give_a_catalog_ordered_indicator():
    rows = [("c", "a"), ("b",), ("a", "c", "a"), ("c",)]
    targets = multilabel_targets(rows)
    assert targets.target_type == "multilabel"
    assert targets.catalog.keys == ("a", "b", "c")
    assert isinstance(targets.values, sp.csr_matrix)
    assert targets.values.dtype == np.int8
    #                           a  b  c
    expected = np.array([[1, 0, 1],   # ("c", "a")
                         [0, 1, 0],   # ("b",)
                         [1, 0, 1],   # ("a", "c", "a"): the duplicate "a" collapses
                         [0, 0, 1]])  # ("c",)
    np.testing.assert_array_equal(_dense(targets), expected)
    assert targets.counts() == {"a": 2, "b": 1, "c": 3}
    assert targets.n_rows == 4


def test_catalog_does_not_depend_on_input_order():
    first = multilabel_targets([("c", "a"), ("b",), ("a", "c"), ("c",)])
    second = multilabel_targets([("a", "c"), ("b",), ("c", "a"), ("c",)])
    third = multilabel_targets([{"c", "a"}, ["b"], frozenset({"a", "c"}), ("c",)])
    assert first.catalog == second.catalog == third.catalog
    assert first.catalog.keys == ("a", "b", "c")
    np.testing.assert_array_equal(_dense(first), _dense(second))
    np.testing.assert_array_equal(_dense(first), _dense(third))


def test_duplicates_inside_a_row_collapse_to_a_single_one():
    targets = multilabel_targets([("a", "a", "a"), ("b", "a", "b")])
    np.testing.assert_array_equal(_dense(targets), [[1, 0], [1, 1]])
    assert targets.values.data.tolist() == [1, 1, 1]
    assert targets.counts() == {"a": 2, "b": 1}


def test_typed_labels_stay_distinct():
    # int 1 and str "1" are two labels; ints sort before strs
    targets = multilabel_targets([(1,), ("1",), (1, "1"), (2,)])
    assert targets.catalog.keys == ("@int:1", "@int:2", "1")
    #                            @int:1 @int:2 "1"
    np.testing.assert_array_equal(_dense(targets), [[1, 0, 0],
                                                    [0, 0, 1],
                                                    [1, 0, 1],
                                                    [0, 1, 0]])
    assert targets.counts() == {"@int:1": 2, "@int:2": 1, "1": 2}
    # bool and int are distinct types too (bool sorts first)
    both = multilabel_targets([(True, 1), (1,)])
    assert both.catalog.keys == ("@bool:true", "@int:1")
    np.testing.assert_array_equal(_dense(both), [[1, 1], [0, 1]])


def test_an_empty_row_is_refused_naming_it():
    message = _raises(ValidationError, multilabel_targets, [("a",), ("b",), (), ("a", "b")])
    assert "[2]" in message
    assert "at least one label" in message


@pytest.mark.parametrize(("bad", "shown"), [("b", "'b'"), (7, "7"), (None, "None"), ({"b": 1}, "{'b': 1}")])
def test_a_row_that_is_not_a_collection_is_refused_naming_it(bad, shown):
    message = _raises(ValidationError, multilabel_targets, [("a",), bad, ("a", "b")])
    assert "row 1" in message
    assert shown in message


def test_an_unsupported_label_inside_a_row_is_a_label_error():
    _raises(LabelError, multilabel_targets, [("a",), (object(),)])


def test_a_single_label_is_refused():
    message = _raises(ValidationError, multilabel_targets, [("a",), ("a",), ("a", "a")])
    assert "at least 2 labels" in message


# ------------------------------------------------------------------------------------------------ multilabel from indicators

# columns named in the order c, a, b; the catalog is a, b, c
_NAMES = ["c", "a", "b"]
_INDICATOR = np.array([[1, 0, 0],
                       [1, 1, 1],
                       [1, 1, 0],
                       [0, 0, 1]])
#                    a  b  c
_REORDERED = np.array([[0, 0, 1],
                       [1, 1, 1],
                       [1, 0, 1],
                       [0, 1, 0]])


@pytest.mark.parametrize(
    "convert",
    [
        lambda m: m,
        lambda m: m.astype(bool),
        lambda m: m.astype(np.float32),
        sp.csr_matrix,
        lambda m: sp.csr_matrix(m.astype(bool)),
        sp.csc_matrix,
        sp.coo_matrix,
        sp.csr_array,
    ],
    ids=["dense-int", "dense-bool", "dense-float", "csr", "csr-bool", "csc", "coo", "csr_array"],
)
def test_indicator_columns_are_reordered_to_the_catalog(convert):
    targets = multilabel_targets(convert(_INDICATOR), label_names=_NAMES)
    assert targets.catalog.keys == ("a", "b", "c")
    assert isinstance(targets.values, sp.csr_matrix)
    assert targets.values.dtype == np.int8
    np.testing.assert_array_equal(targets.values.toarray(), _REORDERED)
    assert targets.counts() == {"a": 2, "b": 2, "c": 3}


def test_indicator_and_collections_agree():
    collections = [("c",), ("c", "a", "b"), ("c", "a"), ("b",)]
    from_sets = multilabel_targets(collections)
    from_indicator = multilabel_targets(_INDICATOR, label_names=_NAMES)
    assert from_sets.catalog == from_indicator.catalog
    np.testing.assert_array_equal(_dense(from_sets), _dense(from_indicator))


def test_typed_label_names_order_the_columns():
    # names "1" (str) and 1 (int): the int sorts first, so the columns swap
    indicator = np.array([[1, 0], [0, 1], [1, 1]])
    targets = multilabel_targets(indicator, label_names=["1", 1])
    assert targets.catalog.keys == ("@int:1", "1")
    np.testing.assert_array_equal(_dense(targets), [[0, 1], [1, 0], [1, 1]])


@pytest.mark.parametrize(
    ("value", "row"),
    [(2, 2), (-1, 3), (0.5, 1)],
)
@pytest.mark.parametrize("sparse", [False, True])
def test_indicator_values_other_than_0_and_1_are_refused_naming_the_row(value, row, sparse):
    indicator = _INDICATOR.astype(np.float64)
    indicator[row, 2] = value
    message = _raises(ValidationError, multilabel_targets, sp.csr_matrix(indicator) if sparse else indicator,
                      label_names=_NAMES)
    assert f"row {row}" in message
    assert "0/1" in message


@pytest.mark.parametrize("names", [None, ["c", "a"], ["c", "a", "b", "d"]])
@pytest.mark.parametrize("sparse", [False, True])
def test_label_names_must_name_every_column(names, sparse):
    indicator = sp.csr_matrix(_INDICATOR) if sparse else _INDICATOR
    message = _raises(ValidationError, multilabel_targets, indicator, label_names=names)
    assert "label_names" in message
    assert "3 columns" in message


@pytest.mark.parametrize("sparse", [False, True])
def test_duplicate_label_names_are_refused(sparse):
    indicator = sp.csr_matrix(_INDICATOR) if sparse else _INDICATOR
    message = _raises(ValidationError, multilabel_targets, indicator, label_names=["c", "a", "c"])
    assert "duplicate" in message


@pytest.mark.parametrize("sparse", [False, True])
def test_a_label_that_never_occurs_is_refused_naming_it(sparse):
    indicator = np.column_stack([_INDICATOR, np.zeros(4, dtype=int)])
    names = _NAMES + ["never"]
    message = _raises(ValidationError, multilabel_targets, sp.csr_matrix(indicator) if sparse else indicator,
                      label_names=names)
    assert "never" in message
    assert "never occur" in message


def test_an_explicitly_stored_zero_is_not_an_occurrence():
    # column "z" holds only a stored 0: it never occurs
    data = np.array([1, 1, 0, 1])
    indices = np.array([0, 1, 2, 0])
    indptr = np.array([0, 1, 3, 4])
    indicator = sp.csr_matrix((data, indices, indptr), shape=(3, 3))
    message = _raises(ValidationError, multilabel_targets, indicator, label_names=["x", "y", "z"])
    assert "'z'" in message


def test_an_indicator_row_without_labels_is_refused_naming_it():
    indicator = _INDICATOR.copy()
    indicator[1] = 0
    message = _raises(ValidationError, multilabel_targets, sp.csr_matrix(indicator), label_names=_NAMES)
    assert "[1]" in message


def test_a_single_column_indicator_is_refused():
    message = _raises(ValidationError, multilabel_targets, np.ones((3, 1), dtype=int), label_names=["only"])
    assert "at least 2 labels" in message


def test_building_targets_leaves_the_callers_sparse_indicator_untouched():
    # row 0 stores an explicit 0 for column "b"; the caller's matrix must not be rewritten in place
    data = np.array([1, 0, 1, 1])
    indices = np.array([0, 1, 1, 0])
    indptr = np.array([0, 2, 3, 4])
    indicator = sp.csr_matrix((data, indices, indptr), shape=(3, 2))
    before = (indicator.data.copy(), indicator.indices.copy(), indicator.indptr.copy(), indicator.nnz)
    targets = multilabel_targets(indicator, label_names=["a", "b"])
    np.testing.assert_array_equal(_dense(targets), [[1, 0], [0, 1], [1, 0]])
    assert indicator.nnz == before[3]
    np.testing.assert_array_equal(indicator.data, before[0])
    np.testing.assert_array_equal(indicator.indices, before[1])
    np.testing.assert_array_equal(indicator.indptr, before[2])


# ------------------------------------------------------------------------------------------------ regression


def test_regression_1d_targets_are_float64_with_a_default_name():
    targets = regression_targets([3, 1, 2, 5])
    assert targets.target_type == "regression"
    assert targets.values.dtype == np.float64
    assert targets.values.shape == (4,)
    np.testing.assert_array_equal(targets.values, [3.0, 1.0, 2.0, 5.0])
    assert targets.names == ("target_0",)
    assert targets.catalog is None


def test_regression_2d_targets_get_one_default_name_per_column():
    values = np.array([[0.5, 10.0, -1.0], [1.5, 20.0, -1.0], [2.5, 10.0, -3.0]])
    targets = regression_targets(values)
    assert targets.values.shape == (3, 3)
    np.testing.assert_array_equal(targets.values, values)
    assert targets.names == ("target_0", "target_1", "target_2")


def test_regression_custom_names_are_kept_and_length_checked():
    values = np.array([[0.5, 10.0], [1.5, 20.0], [2.5, 10.0]])
    assert regression_targets(values, target_names=["price", "size"]).names == ("price", "size")
    assert regression_targets([1.0, 2.0], target_names=["y"]).names == ("y",)
    for names in (["price"], ["price", "size", "extra"], ["price", "price"]):
        message = _raises(ValidationError, regression_targets, values, target_names=names)
        assert "2 distinct names" in message
    _raises(ValidationError, regression_targets, [1.0, 2.0], target_names=["a", "b"])


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_nonfinite_regression_targets_are_refused_naming_the_rows(bad):
    message = _raises(ValidationError, regression_targets, [1.0, bad, 2.0, bad, 3.0])
    assert "[1, 3]" in message
    values = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, bad]])
    message = _raises(ValidationError, regression_targets, values)
    assert "[2]" in message


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize(
    "values",
    [
        [4.0, 4.0, 4.0],
        [[1.0, 2.0], [1.0, 2.0], [1.0, 2.0]],
        np.full(5, 7, dtype=int),
        [1e308, 1e308, 1e308],  # finite, constant; its sum overflows to inf, which must not hide the constancy
    ],
    ids=["float", "2d", "int", "huge"],
)
def test_a_constant_regression_target_is_refused(values):
    message = _raises(ValidationError, regression_targets, values)
    assert "constant" in message


@pytest.mark.parametrize(
    "values",
    [["a", "b", "c"], np.array(["1.0", "2.0"]), [1 + 2j, 3 + 0j], np.array([1.0, "x"], dtype=object),
     np.zeros((2, 2, 2))],
)
def test_non_numeric_or_3d_regression_targets_are_refused(values):
    message = _raises(ValidationError, regression_targets, values)
    assert "numeric 1-D or 2-D" in message


def test_regression_is_only_ever_explicit():
    assert build_targets([1, 2, 3]).target_type == "classification"
    assert build_targets([1, 2, 3], "regression").target_type == "regression"
    _raises(ValidationError, build_targets, [1, 2, 3], "ordinal")


# ------------------------------------------------------------------------------------------------ subset / counts


def test_classification_subset_keeps_the_catalog_and_slices_values():
    targets = classification_targets(["b", "a", "c", "a", "b"])
    part = targets.subset([4, 1, 0])
    assert part.target_type == "classification"
    assert part.catalog is targets.catalog
    assert part.values.tolist() == ["b", "a", "b"]
    assert targets.counts() == {"a": 2, "b": 2, "c": 1}
    # a class absent from the subset still appears, with 0
    assert part.counts() == {"a": 1, "b": 2, "c": 0}


def test_multilabel_subset_stays_csr_and_counts_occurrences():
    targets = multilabel_targets([("c", "a"), ("b",), ("a", "c"), ("c",)])
    part = targets.subset(np.array([3, 0]))
    assert part.target_type == "multilabel"
    assert part.catalog is targets.catalog
    assert isinstance(part.values, sp.csr_matrix)
    np.testing.assert_array_equal(part.values.toarray(), [[0, 0, 1], [1, 0, 1]])
    assert part.counts() == {"a": 1, "b": 0, "c": 2}


def test_regression_subset_keeps_names_and_counts_are_empty():
    targets = regression_targets(np.array([[1.0, 9.0], [2.0, 8.0], [3.0, 7.0]]), target_names=["u", "v"])
    part = targets.subset([2, 0])
    assert part.target_type == "regression"
    assert part.names == ("u", "v")
    assert part.catalog is None
    np.testing.assert_array_equal(part.values, [[3.0, 7.0], [1.0, 9.0]])
    assert targets.counts() == {} and part.counts() == {}


# ------------------------------------------------------------------------------------------------ payload


def test_classification_payload_round_trip():
    targets = classification_targets([2, "2", 1, 2, 1.5])
    back = _roundtrip(targets)
    assert back.target_type == "classification"
    assert back.catalog == targets.catalog
    assert back.catalog.keys == ("@int:1", "@int:2", "@float:1.5", "2")
    assert back.values.tolist() == targets.values.tolist() == ["@int:2", "2", "@int:1", "@int:2", "@float:1.5"]
    assert back.counts() == targets.counts()


def test_multilabel_payload_round_trip():
    targets = multilabel_targets([(1, "1"), ("b",), (1,), ("b", "1")])
    back = _roundtrip(targets)
    assert back.target_type == "multilabel"
    assert back.catalog == targets.catalog
    assert isinstance(back.values, sp.csr_matrix)
    assert back.values.shape == targets.values.shape == (4, 3)
    np.testing.assert_array_equal(back.values.toarray(), targets.values.toarray())
    np.testing.assert_array_equal(back.values.toarray(), [[1, 1, 0], [0, 0, 1], [1, 0, 0], [0, 1, 1]])
    assert back.counts() == targets.counts() == {"@int:1": 2, "1": 2, "b": 2}


@pytest.mark.parametrize(
    ("values", "names"),
    [
        (np.array([0.1, 1 / 3, -2.5e10, 1e-300, 7.0]), None),
        (np.array([[0.1, 2 / 3], [1e-17, -0.0], [np.pi, 1e150]]), ["p", "q"]),
    ],
)
def test_regression_payload_round_trip_is_exact(values, names):
    targets = regression_targets(values, target_names=names)
    back = _roundtrip(targets)
    assert back.target_type == "regression"
    assert back.names == targets.names
    assert back.values.dtype == np.float64
    assert back.values.shape == values.shape
    assert back.values.tobytes() == values.astype(np.float64).tobytes()  # bit-exact floats


def test_from_payload_refuses_an_unknown_target_type():
    for kind in ("ordinal", None):
        message = _raises(ValidationError, Targets.from_payload, {"target_type": kind, "values": [1.0, 2.0]})
        assert "unknown target type" in message


def test_from_payload_refuses_class_keys_outside_the_catalog():
    payload = json.loads(json.dumps(classification_targets(["x", "y", "x"]).to_payload()))
    payload["label_keys"][1] = "q"
    message = _raises(ValidationError, Targets.from_payload, payload)
    assert "'q'" in message


@pytest.mark.parametrize("bad_index", [3, 7, -1])
def test_from_payload_refuses_multilabel_indices_outside_the_catalog(bad_index):
    payload = json.loads(json.dumps(multilabel_targets([("a",), ("b", "c"), ("c",)]).to_payload()))
    assert payload["indices"] == [0, 1, 2, 2]
    payload["indices"][2] = bad_index  # row 1 would name a label beyond the 3-label catalog
    _raises(ValidationError, Targets.from_payload, payload)


@pytest.mark.parametrize(
    ("indptr", "indices"),
    [([0, 1, 1, 4], [0, 1, 2, 2]),   # row 1 empty, row 2 names "c" twice (a stored 2)
     ([0, 1, 3, 4], [0, 1, 1, 2])],  # row 1 names "b" twice
    ids=["empty-row", "repeated-label"],
)
def test_from_payload_refuses_a_multilabel_indicator_that_breaks_the_invariants(indptr, indices):
    payload = json.loads(json.dumps(multilabel_targets([("a",), ("b", "c"), ("c",)]).to_payload()))
    payload.update(indptr=indptr, indices=indices)
    _raises(ValidationError, Targets.from_payload, payload)


# ------------------------------------------------------------------------------------------------ BenchmarkDataset


def _X(n: int, d: int = 3) -> np.ndarray:
    return np.arange(n * d, dtype=np.float64).reshape(n, d) % 7 + 1.0


def test_dataset_integer_targets_are_classification_by_default():
    dataset = BenchmarkDataset.from_embeddings(_X(4), [3, 1, 3, 2], identity=ID)
    assert dataset.target_type == "classification"
    assert dataset.label_keys.tolist() == ["@int:3", "@int:1", "@int:3", "@int:2"]
    assert dataset.class_counts() == {"@int:1": 1, "@int:2": 1, "@int:3": 2}
    assert dataset.target_declaration == {"target_type": "classification", "label_names": None, "target_names": None}


@pytest.mark.parametrize("build", ["from_embeddings", "from_arrays"])
def test_dataset_explicit_regression_with_integer_targets(build):
    y = np.array([3, 1, 3, 2])
    dataset = getattr(BenchmarkDataset, build)(_X(4), y, identity=ID, target_type="regression")
    assert dataset.target_type == "regression"
    assert dataset.targets.values.dtype == np.float64
    np.testing.assert_array_equal(dataset.targets.values, [3.0, 1.0, 3.0, 2.0])
    assert dataset.class_counts() == {}
    assert dataset.catalog is None
    assert dataset.target_declaration == {"target_type": "regression", "label_names": None, "target_names": None}
    with pytest.raises(ValidationError):
        dataset.label_keys  # noqa: B018


def test_dataset_regression_summary_and_declaration_record_target_names():
    y = np.array([[1.0, 5.0], [2.0, 4.0], [3.0, 6.0]])
    dataset = BenchmarkDataset.from_embeddings(_X(3), y, identity=ID, target_type="regression",
                                               target_names=["price", "size"])
    assert dataset.target_declaration == {"target_type": "regression", "label_names": None,
                                          "target_names": ["price", "size"]}
    summary = dataset.summary()
    assert summary["target_type"] == "regression"
    assert summary["target_names"] == ["price", "size"]
    assert summary["n_rows"] == 3
    assert "class_counts" not in summary


def test_dataset_multilabel_indicator_declaration_records_label_names_as_semantic_keys():
    dataset = BenchmarkDataset.from_embeddings(_X(4), _INDICATOR, identity=ID, label_names=["c", 1, "@b"])
    assert dataset.target_type == "multilabel"
    # typed names become semantic keys: int 1 -> "@int:1", a str starting with "@" is escaped
    assert dataset.target_declaration == {"target_type": "multilabel", "label_names": ["c", "@int:1", "@str:@b"],
                                          "target_names": None}
    # catalog: int 1 first, then strs "@b" < "c"; column order follows
    assert dataset.catalog.keys == ("@int:1", "@str:@b", "c")
    np.testing.assert_array_equal(dataset.targets.values.toarray(), _INDICATOR[:, [1, 2, 0]])


def test_dataset_multilabel_summary():
    rows = [("c", "a"), ("b",), ("a", "c"), ("c",)]
    dataset = BenchmarkDataset.from_embeddings(sp.csr_matrix(_X(4)), rows, identity=ID)
    assert dataset.target_type == "multilabel"
    assert dataset.target_declaration == {"target_type": "multilabel", "label_names": None, "target_names": None}
    summary = dataset.summary()
    assert summary["target_type"] == "multilabel"
    assert summary["n_classes"] == 3
    assert summary["class_counts"] == {"a": 2, "b": 1, "c": 3}
    assert summary["labels"] == {"a": "a", "b": "b", "c": "c"}
    assert summary["sparse"] is True
    assert "target_names" not in summary


def test_dataset_refuses_a_target_length_mismatch_for_every_type():
    _raises(ValidationError, BenchmarkDataset.from_embeddings, _X(5), _INDICATOR, identity=ID, label_names=_NAMES)
    _raises(ValidationError, BenchmarkDataset.from_embeddings, _X(3), [1.0, 2.0], identity=ID,
            target_type="regression")
    _raises(ValidationError, BenchmarkDataset.from_embeddings, _X(4), _INDICATOR, identity=ID,
            target_type="ordinal", label_names=_NAMES)


def test_indicator_with_reordered_columns_survives_a_payload_round_trip():
    """label_names out of catalog order force a column permutation; the payload must still be canonical."""
    y = np.array([[1, 0, 1], [0, 1, 1], [1, 1, 0]])
    targets = multilabel_targets(y, label_names=["z", "a", 7])
    assert targets.catalog.keys == ("@int:7", "a", "z")
    np.testing.assert_array_equal(targets.values.toarray(), [[1, 0, 1], [1, 1, 0], [0, 1, 1]])
    back = Targets.from_payload(json.loads(json.dumps(targets.to_payload())))
    np.testing.assert_array_equal(back.values.toarray(), targets.values.toarray())
