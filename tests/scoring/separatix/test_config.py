"""SeparatixConfig: validation naming the field, defaults, strict round trip, the whole-MiB dense budget."""

from __future__ import annotations

import json

import pytest

from vertebrae.core.errors import ValidationError
from vertebrae.scoring.separatix.config import SeparatixConfig


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"enabled": 1}, "enabled"),
        ({"overlap_threshold": 1.5}, "overlap_threshold"),
        ({"overlap_threshold": float("nan")}, "overlap_threshold"),
        ({"overlap_threshold": True}, "overlap_threshold"),
        ({"regression_overlap_threshold": -0.1}, "regression_overlap_threshold"),
        ({"random_state": None}, "random_state"),
        ({"random_state": -1}, "random_state"),
        ({"random_state": 2**32}, "random_state"),
        ({"random_state": 1.0}, "random_state"),
        ({"budget": "slow"}, "budget"),
        ({"densify_policy": "ignore"}, "densify_policy"),
        ({"max_dense_bytes": 0}, "max_dense_bytes"),
        ({"max_dense_bytes": 1.5}, "max_dense_bytes"),
        ({"max_samples": 0}, "max_samples"),
        ({"mlp_probes": "yes"}, "mlp_probes"),
    ],
)
def test_config_validation_names_the_field(kwargs, field):
    with pytest.raises(ValidationError, match=field):
        SeparatixConfig(**kwargs)


def test_config_defaults_and_round_trip():
    config = SeparatixConfig()
    assert config.to_dict() == {
        "enabled": True, "overlap_threshold": 0.80, "regression_overlap_threshold": 0.30, "random_state": 0,
        "budget": "fast", "densify_policy": "warn_and_sample", "max_dense_bytes": None, "max_samples": None,
        "mlp_probes": False,
    }
    custom = SeparatixConfig(overlap_threshold=1, random_state=42, budget="standard", densify_policy="skip",
                             max_dense_bytes=5 * 2**20, max_samples=1000, mlp_probes=True)
    assert isinstance(custom.overlap_threshold, float)
    assert SeparatixConfig.from_dict(json.loads(json.dumps(custom.to_dict()))) == custom
    with pytest.raises(ValidationError, match="unknown SeparatixConfig fields"):
        SeparatixConfig.from_dict({"enabled": True, "k": 3})


def test_max_dense_mb_is_whole_mib_with_fallback():
    assert SeparatixConfig().max_dense_mb(2_000_000_000) == 2_000_000_000 // 2**20 == 1907
    assert SeparatixConfig(max_dense_bytes=3 * 2**20 + 5).max_dense_mb(2_000_000_000) == 3
    assert SeparatixConfig(max_dense_bytes=3 * 2**20 - 1).max_dense_mb(2_000_000_000) == 2
    assert SeparatixConfig(max_dense_bytes=10).max_dense_mb(2_000_000_000) == 1
    with pytest.raises(ValidationError, match="fallback_max_dense_bytes"):
        SeparatixConfig().max_dense_mb(0)
