"""CallableBranchExtractor (config type ``callable``): branches from importable paths; recipe = paths + identity."""

from __future__ import annotations

import numpy as np
import pytest

from vertebrae.core.errors import ConfigError, ValidationError
from vertebrae.extractors.registry import build_extractor


def test_branches_encode_independently_and_the_recipe_names_the_paths():
    extractor = build_extractor("pair", {"type": "callable", "cache_identity": "v2",
                                         "branches": {"a": "numpy:cumsum", "b": "numpy:negative"}}, where="x.extractors.pair")
    assert extractor.branches == ("a", "b") and extractor.reusable
    rows = np.array([[1.0, 2.0], [3.0, 4.0]])
    assert np.array_equal(extractor.transform(rows, branch="b"), -rows)
    assert extractor.recipe() == {"type": "callable", "paths": {"a": "numpy:cumsum", "b": "numpy:negative"},
                                  "cache_identity": "v2"}
    with pytest.raises(ValidationError, match=r"encodes through branches \['a', 'b'\], got 'c'"):
        extractor.transform(rows, branch="c")


@pytest.mark.parametrize("branches, message", [
    ({}, r"x.branches: give at least one branch"),
    ({"a": "numpy:no_such_function"}, r"x.branches.a: .*has no attribute 'no_such_function'"),
    ({"a": "not a path"}, r"x.branches.a: .*must look like 'package.module:function'"),
    ({"a": "numpy:pi"}, r"x.branches.a: .*not callable"),
])
def test_bad_declarations_name_the_key(branches, message):
    with pytest.raises(ConfigError, match=message):
        build_extractor("e", {"type": "callable", "branches": branches}, where="x")
