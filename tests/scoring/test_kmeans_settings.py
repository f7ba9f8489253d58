"""MiniBatchKMeans settings from Python (issue 48): a value scikit-learn would refuse in a score job is refused where
the config is made, naming the key. Oracle: the config schema's ``$defs/kmeans_kwargs`` (jsonschema), which
``vertebrae validate`` applies to a config file; both must accept and refuse the same values."""

from __future__ import annotations

import jsonschema
import pytest
import yaml

from vertebrae import ContinuousOverlapScoringConfig, OverlapScoringConfig
from vertebrae.core.errors import ValidationError
from vertebrae.scoring.kmeans_settings import FORBIDDEN_KMEANS_KWARGS, KMEANS_KWARGS, check_kmeans_kwargs
from vertebrae.planning.config import SCHEMA_PATH

SCHEMA = yaml.safe_load(SCHEMA_PATH.read_text(encoding="utf-8"))
DEF = SCHEMA["$defs"]["kmeans_kwargs"]
PROBES = [None, True, False, 0, 1, 7, -1, 0.0, 0.5, 2.5, -0.1, float("inf"), "auto", "k-means++", "random", "os:system",
          [1, 2], {"a": 1}]
# as jsonschema.validate builds it, once: validate() re-checks the whole schema against the metaschema per call
_KMEANS_SCHEMA = {**DEF, "$defs": SCHEMA["$defs"]}
jsonschema.validators.validator_for(_KMEANS_SCHEMA).check_schema(_KMEANS_SCHEMA)
VALIDATOR = jsonschema.validators.validator_for(_KMEANS_SCHEMA)(_KMEANS_SCHEMA)


def _schema_accepts(key, value):
    return VALIDATOR.is_valid({key: value})


def test_the_keys_are_the_schemas():
    assert set(KMEANS_KWARGS) | set(FORBIDDEN_KMEANS_KWARGS) == set(DEF["properties"])


@pytest.mark.parametrize("key", sorted(KMEANS_KWARGS))
def test_each_value_is_judged_as_the_schema_judges_it(key):
    for value in PROBES:
        accepted = KMEANS_KWARGS[key][0](value)
        if value == float("inf"):
            assert not accepted  # JSON has no infinity: a YAML .inf is refused by both, here by the check
            continue
        if isinstance(value, float) and value.is_integer() and "integer" in str(DEF["properties"][key]):
            assert not accepted  # JSON Schema counts 0.0 as an integer; scikit-learn's integer settings do not
            continue
        assert accepted == _schema_accepts(key, value), (key, value)


@pytest.mark.parametrize("config_cls", [OverlapScoringConfig, ContinuousOverlapScoringConfig])
def test_a_config_made_in_python_refuses_a_bad_value_naming_the_key(config_cls):
    with pytest.raises(ValidationError, match=r"kmeans_kwargs\.init must be one of \['k-means\+\+', 'random'\], got "
                                              r"'os:system'"):
        config_cls(kmeans_kwargs={"init": "os:system"})
    with pytest.raises(ValidationError, match=r"kmeans_kwargs\.batch_size must be an integer >= 1, got 0"):
        config_cls(kmeans_kwargs={"batch_size": 0})
    with pytest.raises(ValidationError, match=r"kmeans_kwargs may not set 'random_state'; pass seed="):
        config_cls(kmeans_kwargs={"random_state": 1})
    assert config_cls(kmeans_kwargs={"init": "random", "n_init": "auto"}).kmeans_kwargs == {"init": "random",
                                                                                           "n_init": "auto"}


def test_unknown_keys_and_non_mappings_are_refused():
    with pytest.raises(ValidationError, match=r"X\.kmeans_kwargs: unknown key\(s\) \['bogus'\]"):
        check_kmeans_kwargs({"bogus": 1}, "X")
    with pytest.raises(ValidationError, match=r"X\.kmeans_kwargs must be a mapping, got list"):
        check_kmeans_kwargs([1], "X")
