"""compare_units as a whole: determinism, block-size independence, the document and its JSON round trip."""

import json

import numpy as np
import pytest

from vertebrae.core.errors import ArtifactError, ValidationError
from vertebrae.scoring.paired import (
    COMPARISON_SCHEMA,
    ComparisonConfig,
    PairedComparison,
    PairedUnits,
    compare_units,
    macro_f1_features,
)


def paired(values, unit="query", **kwargs):
    m, n = np.shape(values)[:2]
    return PairedUnits(unit, "ndcg@10", tuple(f"c{i}" for i in range(m)), tuple(f"{unit}{i}" for i in range(n)),
                       values, **kwargs)


def four_candidates(n=300, seed=0):
    rng = np.random.default_rng(seed)
    base = rng.random(n)
    shifts = np.array([0.0, 0.03, 0.031, -0.02])[:, None]
    return np.clip(base + shifts + 0.05 * rng.standard_normal((4, n)), 0, 1)


@pytest.mark.parametrize("interval", ["percentile", "bca"])
def test_same_seed_same_document_other_seed_differs(interval):
    units = paired(four_candidates())
    first = compare_units(units, ComparisonConfig(resamples=400, seed=1, interval=interval))
    again = compare_units(units, ComparisonConfig(resamples=400, seed=1, interval=interval))
    other = compare_units(units, ComparisonConfig(resamples=400, seed=2, interval=interval))
    assert first == again and first.to_dict() == again.to_dict()
    assert [c["ci_low"] for c in first.candidates] != [c["ci_low"] for c in other.candidates]
    assert [p["p_value"] for p in first.pairs] != [p["p_value"] for p in other.pairs]
    assert [c["score"] for c in first.candidates] == [c["score"] for c in other.candidates]


def test_block_size_and_workers_do_not_change_results():
    units = paired(four_candidates(n=700), strata=np.arange(700) % 3)
    config = ComparisonConfig(resamples=1000, interval="bca", seed=4)
    reference = compare_units(units, config, workers=1)
    for block_bytes, workers in [(1, 1), (8 * 16 * 700 * 3, 2), (10 ** 9, 3)]:
        assert compare_units(units, config, block_bytes=block_bytes, workers=workers) == reference


def test_exact_regime_is_block_independent():
    units = paired(four_candidates(n=9))
    config = ComparisonConfig(resamples=600)
    assert compare_units(units, config, block_bytes=1) == compare_units(units, config)


def test_document_json_round_trip_is_exact():
    result = compare_units(paired(four_candidates()), ComparisonConfig(resamples=300, interval="bca"))
    doc = result.to_dict()
    assert doc["schema"] == COMPARISON_SCHEMA
    text = json.dumps(doc, allow_nan=False)
    back = PairedComparison.from_dict(json.loads(text))
    assert back == result and json.dumps(back.to_dict(), allow_nan=False) == text
    assert set(doc["pairs"][0]) == {"a", "b", "delta", "ci_low", "ci_high", "test", "p_value", "p_adjusted",
                                    "min_p_value", "verdict"}
    assert set(doc["candidates"][0]) == {"name", "score", "ci_low", "ci_high"}

    def walk(value):  # plain JSON types only
        assert type(value) in (dict, list, str, int, float, bool, type(None))
        for item in value.values() if isinstance(value, dict) else value if isinstance(value, list) else ():
            walk(item)

    walk(doc)


@pytest.mark.parametrize("edit, message", [
    (lambda d: d.update(schema="vertebrae.comparison/v0"), "schema"),
    (lambda d: d.update(extra=1), r"unknown fields \['extra'\]"),
    (lambda d: d.pop("leader"), r"missing fields \['leader'\]"),
    (lambda d: d["config"].update(resamples=5), "ComparisonConfig.resamples"),
    (lambda d: d["config"].update(colour="red"), "unknown ComparisonConfig fields"),
    (lambda d: d.update(leader="c0"), "leader must be 'c2'"),
    (lambda d: d["pairs"][0].update(test="t-test"), r"pairs\[0\].test"),
    (lambda d: d["pairs"][0].update(p_value=1.5), r"pairs\[0\].p_value must lie in \[0, 1\]"),
    (lambda d: d["pairs"][0].pop("verdict"), r"pairs\[0\] must hold exactly the keys"),
    (lambda d: d["pairs"].reverse(), r"pairs\[0\] must compare 'c0' with 'c1'"),
    (lambda d: d["candidates"][1].update(score="high"), r"candidates\[1\].score must be a finite number"),
])
def test_from_dict_refuses_bad_documents(edit, message):
    doc = json.loads(json.dumps(compare_units(paired(four_candidates()), ComparisonConfig(resamples=200)).to_dict()))
    edit(doc)
    with pytest.raises(ArtifactError, match=message):
        PairedComparison.from_dict(doc)


def test_versus_leader_and_ties():
    result = compare_units(paired(four_candidates(n=2000)), ComparisonConfig(resamples=1000))
    assert result.leader == "c2"  # c1 and c2 differ by 0.001: a statistical tie; c0 and c3 are behind
    rows = result.versus_leader()
    assert [row["name"] for row in rows] == ["c1", "c0", "c3"]
    scores = result.scores()
    for row in rows:
        assert row["delta"] == pytest.approx(scores[row["name"]] - scores["c2"], abs=1e-15)
        assert row["ci_low"] <= row["delta"] <= row["ci_high"]
        assert set(row) == {"name", "score", "delta", "ci_low", "ci_high", "p_adjusted", "verdict"}
    assert [row["verdict"] for row in rows] == ["indistinguishable", "behind", "behind"]
    assert result.tied_with_leader() == ["c2", "c1"]
    forward = result.pair("c1", "c2")
    backward = result.pair("c2", "c1")
    assert backward["delta"] == -forward["delta"] and backward["ci_low"] == -forward["ci_high"]


def test_leader_ties_go_to_the_earliest_candidate():
    values = np.array([[0.2, 0.4], [0.5, 0.5], [0.5, 0.5]])
    result = compare_units(paired(values), ComparisonConfig(resamples=100))
    assert result.leader == "c1"
    assert result.versus_leader()[0]["name"] == "c2"


def test_classes_note_says_how_coarse_the_test_is():
    rng = np.random.default_rng(3)
    values = rng.random((4, 10))
    result = compare_units(paired(values, unit="class"), ComparisonConfig())
    assert {p["test"] for p in result.pairs} == {"randomization-exact"}
    assert result.min_p_value == 2 / 1024
    text = " ".join(result.notes)
    assert "Only 10 classes:" in text
    # 6 pairs: Holm's first threshold 0.05 / 6 = 0.0083 > 2/1024: reachable, no coarseness sentence
    assert "cannot be called different" not in text
    few = compare_units(paired(rng.random((4, 6)), unit="class"), ComparisonConfig())
    assert any("2^6 = 64 swaps" in note and "2/64" in note and "cannot be called different" in note
               for note in few.notes)


def test_bca_with_a_single_unit_stratum_falls_back_to_percentile():
    values = four_candidates(n=21)
    strata = np.array([0] * 20 + [1])
    result = compare_units(paired(values, strata=strata), ComparisonConfig(resamples=200, interval="bca"))
    assert any("BCa needs at least 2 units" in note for note in result.notes)


def test_macro_f1_comparison_runs_and_points_are_the_reported_scores():
    rng = np.random.default_rng(5)
    y = rng.integers(0, 4, size=120)
    preds = [np.where(rng.random(120) < q, y, rng.integers(0, 4, size=120)) for q in (0.5, 0.8)]
    units = PairedUnits("sample", "macro_f1", ("weak", "strong"), tuple(map(str, range(120))),
                        np.stack([macro_f1_features(y, p, 4) for p in preds]), reducer="macro_f1")
    result = compare_units(units, ComparisonConfig(resamples=500, interval="bca"))
    assert result.leader == "strong"
    assert [c["score"] for c in result.candidates] == units.point_values().tolist()
    assert result.pairs[0]["test"] == "randomization"
    assert result.pairs[0]["verdict"] == "behind"


def test_bad_arguments_are_refused():
    units = paired(four_candidates(n=20))
    with pytest.raises(ValidationError, match="needs a ComparisonConfig"):
        compare_units(units, {"resamples": 100})
    with pytest.raises(ValidationError, match="needs PairedUnits"):
        compare_units(four_candidates(n=20), ComparisonConfig())
    with pytest.raises(ValidationError, match="workers must be a positive integer"):
        compare_units(units, ComparisonConfig(resamples=100), workers=0)
