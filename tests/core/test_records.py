"""The strict-record helpers: messages name the class and field, types are strict, values come back plain."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from vertebrae.core.errors import ConfigError, ValidationError
from vertebrae.core.records import (
    check_bool,
    cutoffs,
    from_record,
    is_int,
    is_real,
    non_negative_int,
    one_of,
    positive_int,
    probability,
    record_fields,
)


@dataclass(frozen=True)
class Toy:
    ks: tuple[int, ...] = (1,)
    name: str = "a"


def test_record_fields_refuses_non_mappings_and_unknown_keys():
    assert record_fields(Toy, {"name": "b"}) == {"name": "b"}
    with pytest.raises(ConfigError, match=r"^Toy must be a mapping, got list$"):
        record_fields(Toy, ["name"])
    with pytest.raises(ConfigError, match=r"^unknown Toy fields: \['bogus', 'k'\]$"):
        record_fields(Toy, {"k": 1, "bogus": 2, "name": "b"})
    with pytest.raises(ValidationError) as info:
        record_fields(Toy, {"k": 1}, error=ValidationError)
    assert type(info.value) is ValidationError


def test_from_record_builds_the_class_and_restores_tuples():
    assert from_record(Toy, {"ks": [1, 2], "name": "b"}, tuples=("ks",)) == Toy(ks=(1, 2), name="b")
    assert from_record(Toy, {"ks": [1, 2]}).ks == [1, 2]  # lists stay lists unless named
    assert from_record(Toy, {}) == Toy()


def test_type_tests_exclude_bools_and_include_numpy_scalars():
    assert is_int(3) and is_int(np.int64(3)) and not is_int(True) and not is_int(np.bool_(True)) and not is_int(3.0)
    assert is_real(3) and is_real(2.5) and is_real(np.float32(1)) and not is_real(False) and not is_real("1")


def test_positive_and_non_negative_ints():
    value = positive_int(np.int64(4), "Cfg", "size")
    assert value == 4 and type(value) is int
    assert positive_int(None, "Cfg", "size", optional=True) is None
    with pytest.raises(ConfigError, match=r"^Cfg\.size must be a positive integer, got 0$"):
        positive_int(0, "Cfg", "size")
    with pytest.raises(ConfigError, match=r"^Cfg\.size must be a positive integer or None, got True$"):
        positive_int(True, "Cfg", "size", optional=True)
    with pytest.raises(ConfigError, match=r"^Cfg\.size must be a positive integer, got None$"):
        positive_int(None, "Cfg", "size")
    assert non_negative_int(0, "Cfg", "n") == 0
    with pytest.raises(ConfigError, match=r"^Cfg\.n must be a non-negative integer, got -1$"):
        non_negative_int(-1, "Cfg", "n")


def test_probability_bool_and_choices():
    value = probability(1, "Cfg", "p")
    assert value == 1.0 and type(value) is float
    with pytest.raises(ValidationError, match=r"^Cfg\.p must be a number in \[0, 1\], got 2\.0$"):
        probability(2, "Cfg", "p", error=ValidationError)
    for bad in (True, float("nan"), "0.5"):
        with pytest.raises(ConfigError, match=r"Cfg\.p must be a number in \[0, 1\]"):
            probability(bad, "Cfg", "p")
    assert check_bool(False, "Cfg", "flag") is False
    with pytest.raises(ConfigError, match=r"^Cfg\.flag must be a bool, got 1$"):
        check_bool(1, "Cfg", "flag")
    assert one_of("dot", ("cosine", "dot"), "Cfg", "similarity") == "dot"
    with pytest.raises(ConfigError, match=r"^Cfg\.similarity must be one of \('cosine', 'dot'\), got 'l1'$"):
        one_of("l1", ("cosine", "dot"), "Cfg", "similarity")


def test_cutoffs_are_sorted_distinct_positive_ints():
    assert cutoffs([10, np.int64(1), 5], "Cfg", "ks") == (1, 5, 10)
    assert cutoffs(np.array([3, 2]), "Cfg", "ks") == (2, 3)
    for bad in ((), "15", 5, None):
        with pytest.raises(ConfigError, match=r"^Cfg\.ks must be a non-empty sequence of positive integers"):
            cutoffs(bad, "Cfg", "ks")
    with pytest.raises(ConfigError, match=r"^Cfg\.ks must hold positive integers, got 0$"):
        cutoffs([1, 0], "Cfg", "ks")
    with pytest.raises(ConfigError, match=r"^Cfg\.ks holds duplicates: \[5, 1, 5\]$"):
        cutoffs([5, 1, 5], "Cfg", "ks")
