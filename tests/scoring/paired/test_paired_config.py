"""ComparisonConfig: defaults, validation with named keys, strict JSON round trip."""

import json

import pytest

from vertebrae.core.errors import ConfigError
from vertebrae.scoring.paired import ComparisonConfig


def test_defaults_and_round_trip():
    config = ComparisonConfig()
    assert (config.resamples, config.confidence_level, config.interval, config.adjustment, config.alpha,
            config.seed, config.enabled) == (10_000, 0.95, "percentile", "holm", 0.05, 0, True)
    other = ComparisonConfig(resamples=500, confidence_level=0.9, interval="bca", adjustment="none", alpha=0.01,
                             seed=7, enabled=False)
    assert ComparisonConfig.from_dict(json.loads(json.dumps(other.to_dict()))) == other


@pytest.mark.parametrize("field, value", [
    ("resamples", 99), ("resamples", 1000.0), ("resamples", True), ("confidence_level", 1.0),
    ("confidence_level", 0), ("confidence_level", float("nan")), ("interval", "basic"), ("adjustment", "fdr"),
    ("alpha", 0.0), ("alpha", "0.05"), ("seed", -1), ("seed", 1.5), ("enabled", 1),
])
def test_bad_values_are_refused_by_name(field, value):
    with pytest.raises(ConfigError, match=f"ComparisonConfig.{field}"):
        ComparisonConfig(**{field: value})


def test_from_dict_is_strict():
    with pytest.raises(ConfigError, match=r"unknown ComparisonConfig fields: \['resample'\]"):
        ComparisonConfig.from_dict({"resample": 100})
    with pytest.raises(ConfigError, match="must be a mapping"):
        ComparisonConfig.from_dict([("seed", 1)])
