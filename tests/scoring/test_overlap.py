"""OverlapIndexScorer and OverlapScoringConfig against the real overlapindex package.

The oracle test calls ``overlapindex.OverlapIndex`` directly with the backend the spec fixes
(MiniBatchKMeans, seeded kmeans_kwargs, offline_chunk_size) on sklearn-normalised rows; everything else is
checked against hand-worked values or the definitions documented by overlapindex.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import load_digits
from sklearn.preprocessing import normalize

import overlapindex
from vertebrae.core.errors import ValidationError
from vertebrae.scoring.overlap import OverlapIndexScorer, OverlapScoreResult, OverlapScoringConfig


def _blobs(sizes, *, dim: int = 6, spread: float = 1.0, seed: int = 0):
    """Gaussian blobs, one per ``(label, n)`` pair (a dict works when labels do not compare equal)."""
    rng = np.random.default_rng(seed)
    rows, labels = [], []
    pairs = list(sizes.items()) if isinstance(sizes, dict) else list(sizes)
    for i, (label, n) in enumerate(pairs):
        centre = np.zeros(dim)
        centre[i % dim] = 4.0
        centre[(i + 1) % dim] = 2.0 * (i // dim + 1)
        rows.append(centre + spread * rng.normal(size=(n, dim)))
        labels += [label] * n
    return np.vstack(rows), labels


@pytest.fixture(scope="module")
def digits_subset():
    X, y = load_digits(return_X_y=True)
    keep = y < 5  # five classes, ~900 rows
    return X[keep], y[keep]


# --------------------------------------------------------------------------------------------------
# OverlapScoringConfig validation


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"k": 0}, "k"),
        ({"k": -3}, "k"),
        ({"k": 2.0}, "k"),
        ({"k": True}, "k"),
        ({"k": "automatic"}, "k"),
        ({"k": {}}, "k"),
        ({"k": {"a": 0}}, "k['a']"),
        ({"min_k": 0}, "min_k"),
        ({"min_k": 1.5}, "min_k"),
        ({"max_k": 0}, "max_k"),
        ({"min_samples_per_cluster": 0}, "min_samples_per_cluster"),
        ({"min_samples_per_cluster": False}, "min_samples_per_cluster"),
        ({"offline_chunk_size": 0}, "offline_chunk_size"),
        ({"offline_chunk_size": "big"}, "offline_chunk_size"),
        ({"max_dense_bytes": -1}, "max_dense_bytes"),
        ({"normalize_embeddings": "yes"}, "normalize_embeddings"),
        ({"normalize_embeddings": 1}, "normalize_embeddings"),
        ({"kmeans_kwargs": [("batch_size", 8)]}, "kmeans_kwargs"),
        ({"kmeans_kwargs": {"init": object()}}, "kmeans_kwargs"),
        ({"kmeans_kwargs": {"n_clusters": 4}}, "kmeans_kwargs may not set 'n_clusters'"),
        ({"kmeans_kwargs": {"random_state": 1}}, "kmeans_kwargs may not set 'random_state'"),
        ({"exclude_classes": [object()]}, "exclude_classes"),
        ({"k": {object(): 3}}, "k"),
    ],
)
def test_config_rejects_invalid_field_naming_it(kwargs, field):
    with pytest.raises(ValidationError) as info:
        OverlapScoringConfig(**kwargs)
    assert f"OverlapScoringConfig.{field}" in str(info.value)


def test_config_rejects_max_k_below_min_k():
    with pytest.raises(ValidationError, match="max_k"):
        OverlapScoringConfig(min_k=20, max_k=10)
    # equal bounds are fine
    assert OverlapScoringConfig(min_k=7, max_k=7).max_k == 7


def test_config_from_dict_rejects_unknown_field():
    with pytest.raises(ValidationError, match="n_prototypes"):
        OverlapScoringConfig.from_dict({"n_prototypes": 3})


def test_config_round_trip_with_typed_labels():
    config = OverlapScoringConfig(
        k={1: 3, "1": 4, "@odd": 2, 2.5: 5},
        min_k=2,
        max_k=9,
        min_samples_per_cluster=3,
        kmeans_kwargs={"batch_size": 64},
        offline_chunk_size=500,
        normalize_embeddings=False,
        exclude_classes=1,
        max_dense_bytes=12345,
    )
    document = config.to_dict()
    # typed labels stay distinct: int 1, str "1", a str starting with "@", a float
    assert document["k"] == {"@int:1": 3, "1": 4, "@str:@odd": 2, "@float:2.5": 5}
    assert document["exclude_classes"] == ["@int:1"]
    assert document["kmeans_kwargs"] == {"batch_size": 64}
    restored = OverlapScoringConfig.from_dict(json.loads(json.dumps(document)))
    assert restored.to_dict() == document
    assert restored.min_k == 2 and restored.max_k == 9 and restored.min_samples_per_cluster == 3
    assert restored.offline_chunk_size == 500 and restored.normalize_embeddings is False
    assert restored.max_dense_bytes == 12345


def test_round_tripped_config_scores_like_the_typed_one():
    X, labels = _blobs({1: 30, "1": 30, "@odd": 24, 2.5: 20}, seed=4)
    config = OverlapScoringConfig(k={1: 3, "1": 4, "@odd": 2, 2.5: 3}, exclude_classes=[2.5])
    restored = OverlapScoringConfig.from_dict(json.loads(json.dumps(config.to_dict())))
    a = OverlapIndexScorer(config).score(X, labels, seed=5)
    b = OverlapIndexScorer(restored).score(X, labels, seed=5)
    assert a.k_per_class == b.k_per_class == {"@int:1": 3, "@float:2.5": 3, "1": 4, "@str:@odd": 2}
    assert a.aggregation_classes == b.aggregation_classes
    assert "@float:2.5" not in a.aggregation_classes
    assert a.to_dict() == b.to_dict()


# --------------------------------------------------------------------------------------------------
# Automatic k resolution


def test_auto_k_hand_worked_with_warnings():
    # clip(n // 5, 10, 50), then capped at max(min(2, n), n // 5):
    #   big   200 -> clip(40) = 40, cap 40 -> 40
    #   mid    30 -> clip(6)  = 10, cap  6 ->  6 (reduced)
    #   tiny    7 -> clip(1)  = 10, cap  2 ->  2 (reduced)
    X, labels = _blobs({"big": 200, "mid": 30, "tiny": 7}, seed=1)
    config = OverlapScoringConfig(k="auto", min_k=10, max_k=50, min_samples_per_cluster=5)
    result = OverlapIndexScorer(config).score(X, labels, seed=0)
    assert result.k_per_class == {"big": 40, "mid": 6, "tiny": 2}
    assert result.class_counts == {"big": 200, "mid": 30, "tiny": 7}
    reductions = [w for w in result.warnings if w.startswith("k reduced")]
    assert len(reductions) == 2
    assert any("'mid'" in w and "10 -> 6" in w for w in reductions)
    assert any("'tiny'" in w and "10 -> 2" in w for w in reductions)
    assert not any("'big'" in w for w in reductions)


def test_auto_k_upper_bound_and_fixed_k_reduction():
    X, labels = _blobs({"huge": 400, "small": 12}, seed=2)
    config = OverlapScoringConfig(k="auto", min_k=3, max_k=20, min_samples_per_cluster=4)
    result = OverlapIndexScorer(config).score(X, labels, seed=0)
    # huge: 400 // 4 = 100 -> clipped to 20; small: 12 // 4 = 3 -> 3 (cap 3): no reduction
    assert result.k_per_class == {"huge": 20, "small": 3}
    assert not [w for w in result.warnings if w.startswith("k reduced")]

    fixed = OverlapIndexScorer(OverlapScoringConfig(k=8, min_samples_per_cluster=4)).score(X, labels, seed=0)
    assert fixed.k_per_class == {"huge": 8, "small": 3}
    assert [w for w in fixed.warnings if w.startswith("k reduced")] == [fixed.warnings[0]]
    assert "'small'" in fixed.warnings[0] and "8 -> 3" in fixed.warnings[0]


def test_k_mapping_must_cover_every_class_and_name_known_classes():
    X, labels = _blobs({"a": 20, "b": 20, "c": 20})
    with pytest.raises(ValidationError, match="lacks classes"):
        OverlapIndexScorer(OverlapScoringConfig(k={"a": 2, "b": 2})).score(X, labels)
    with pytest.raises(ValidationError, match="'zzz'"):
        OverlapIndexScorer(OverlapScoringConfig(k={"a": 2, "b": 2, "c": 2, "zzz": 2})).score(X, labels)


# --------------------------------------------------------------------------------------------------
# Oracle: the real OverlapIndex called directly


def _expected_auto_k(counts: dict, min_k=10, max_k=50, per=5) -> dict:
    out = {}
    for key, n in counts.items():
        requested = min(max(n // per, min_k), max_k)
        out[key] = min(requested, max(min(2, n), n // per))
    return out


def test_matches_overlapindex_called_directly_on_digits(digits_subset):
    X, y = digits_subset
    seed = 11
    result = OverlapIndexScorer(OverlapScoringConfig()).score(X, y, seed=seed)

    # int labels become "@int:<n>" keys (the documented semantic-key form)
    keys = np.array([f"@int:{int(v)}" for v in y], dtype=object)
    counts = {f"@int:{c}": int(n) for c, n in enumerate(np.bincount(y))}
    k = _expected_auto_k(counts)
    oracle = overlapindex.OverlapIndex(
        model_type="MiniBatchKMeans",
        kmeans_k=dict(k),
        kmeans_kwargs={"random_state": seed},
        offline_chunk_size=10000,
    )
    oracle.fit(normalize(X), keys)

    assert result.k_per_class == k
    assert result.class_counts == counts
    assert result.macro_score == result.score == float(oracle.index)
    assert result.weighted_score == float(oracle.weighted_index)
    expected_per_class = {str(label): float(v) for label, v in oracle.singleton_index.items()}
    assert result.per_class_scores == expected_per_class
    assert set(result.per_class_scores) == set(counts)
    assert result.labels == {f"@int:{c}": str(c) for c in range(5)}
    assert 0.5 < result.score <= 1.0  # digits 0-4 are well separated in pixel space
    assert result.metadata["backend"] == "MiniBatchKMeans"
    assert result.metadata["seed"] == seed
    assert result.metadata["kmeans_kwargs"] == {"random_state": seed}
    assert result.metadata["offline_chunk_size"] == 10000
    assert result.metadata["normalize_embeddings"] is True
    assert result.metadata["input_sparse"] is False
    assert result.metadata["n_rows"] == X.shape[0] and result.metadata["n_dimensions"] == 64


def test_normalisation_is_applied_only_when_enabled():
    X, labels = _blobs({"a": 40, "b": 40, "c": 40}, spread=1.5, seed=9)
    scale = np.linspace(0.1, 50.0, X.shape[0])[:, None]
    scaled = X * scale  # same directions, very different norms
    on = OverlapScoringConfig(k=4)
    off = OverlapScoringConfig(k=4, normalize_embeddings=False)
    # with L2 normalisation row scaling is invisible
    assert OverlapIndexScorer(on).score(X, labels, seed=2).per_class_scores == pytest.approx(
        OverlapIndexScorer(on).score(scaled, labels, seed=2).per_class_scores, abs=1e-9
    )
    # without it the scorer hands the raw rows to OverlapIndex
    raw = OverlapIndexScorer(off).score(scaled, labels, seed=2)
    oracle = overlapindex.OverlapIndex(
        model_type="MiniBatchKMeans", kmeans_k={"a": 4, "b": 4, "c": 4}, kmeans_kwargs={"random_state": 2},
        offline_chunk_size=10000,
    )
    oracle.fit(scaled, np.array(labels, dtype=object))
    assert raw.score == float(oracle.index)
    assert raw.metadata["normalize_embeddings"] is False


# --------------------------------------------------------------------------------------------------
# Determinism, exclusions, typed labels


def test_same_seed_is_bit_identical_and_recorded():
    X, labels = _blobs({"a": 60, "b": 50, "c": 40}, spread=2.0, seed=3)
    scorer = OverlapIndexScorer(OverlapScoringConfig(k=6, kmeans_kwargs={"batch_size": 32}))
    first = scorer.score(X, labels, seed=123)
    second = scorer.score(X, labels, seed=123)
    assert first.to_dict() == second.to_dict()
    assert first.metadata["seed"] == 123
    assert first.metadata["kmeans_kwargs"] == {"batch_size": 32, "random_state": 123}
    other = scorer.score(X, labels, seed=124)
    assert other.metadata["seed"] == 124


@pytest.mark.parametrize("seed", [-1, 1.5, True, "0"])
def test_seed_must_be_non_negative_int(seed):
    X, labels = _blobs({"a": 10, "b": 10})
    with pytest.raises(ValidationError, match="seed"):
        OverlapIndexScorer(OverlapScoringConfig(k=2)).score(X, labels, seed=seed)


def test_result_json_round_trip():
    X, labels = _blobs({"x": 30, 7: 30}, seed=8)
    result = OverlapIndexScorer(OverlapScoringConfig(k=3)).score(X, labels, seed=1)
    restored = OverlapScoreResult.from_dict(json.loads(json.dumps(result.to_dict())))
    assert restored == result


def test_exclude_classes_keeps_per_class_but_leaves_aggregation():
    # "noisy" sits between the others so its per-class score is low; excluding it changes the macro score
    rng = np.random.default_rng(5)
    a = rng.normal(size=(60, 4)) + [5, 0, 0, 0]
    b = rng.normal(size=(50, 4)) + [0, 5, 0, 0]
    noisy = rng.normal(size=(40, 4)) * 3 + [2.5, 2.5, 0, 0]
    X = np.vstack([a, b, noisy])
    labels = ["a"] * 60 + ["b"] * 50 + ["noisy"] * 40
    base = OverlapScoringConfig(k=4)
    full = OverlapIndexScorer(base).score(X, labels, seed=7)
    excl = OverlapIndexScorer(OverlapScoringConfig(k=4, exclude_classes="noisy")).score(X, labels, seed=7)

    assert full.aggregation_classes == ["a", "b", "noisy"]
    assert excl.aggregation_classes == ["a", "b"]
    assert excl.metadata["excluded_classes"] == ["noisy"]
    # fitting is unchanged: per-class and pairwise diagnostics are identical, "noisy" included
    assert excl.per_class_scores == full.per_class_scores
    assert excl.pairwise_scores == full.pairwise_scores
    assert "noisy" in excl.per_class_scores
    # aggregation follows the aggregation classes only
    per = excl.per_class_scores
    assert excl.macro_score == pytest.approx((per["a"] + per["b"]) / 2, abs=1e-12)
    assert excl.weighted_score == pytest.approx((per["a"] * 60 + per["b"] * 50) / 110, abs=1e-12)
    assert full.macro_score == pytest.approx(sum(per.values()) / 3, abs=1e-12)
    assert per["noisy"] < min(per["a"], per["b"])
    assert excl.macro_score > full.macro_score


def test_exclude_classes_errors():
    X, labels = _blobs({"a": 20, "b": 20})
    with pytest.raises(ValidationError, match="'c'"):
        OverlapIndexScorer(OverlapScoringConfig(k=2, exclude_classes=["c"])).score(X, labels)
    with pytest.raises(ValidationError, match="every class"):
        OverlapIndexScorer(OverlapScoringConfig(k=2, exclude_classes=["a", "b"])).score(X, labels)


def test_typed_labels_int_and_str_are_distinct_classes():
    # True == 1 in Python, so a dict cannot hold both: pass (label, n) pairs; a k mapping cannot either,
    # so the bool class is given through exclude_classes only and k is an int mapping over 1 / "1" / 1.5
    X, labels = _blobs([(1, 40), ("1", 30), (True, 20), (1.5, 25)], seed=6)
    config = OverlapScoringConfig(k={1: 3, "1": 5, 1.5: 4, "@bool:true": 2}, exclude_classes=[True])
    result = OverlapIndexScorer(config).score(X, labels, seed=0)
    assert result.class_counts == {"@bool:true": 20, "@int:1": 40, "@float:1.5": 25, "1": 30}
    assert result.k_per_class == {"@bool:true": 2, "@int:1": 3, "@float:1.5": 4, "1": 5}
    assert set(result.per_class_scores) == {"@bool:true", "@int:1", "@float:1.5", "1"}
    assert result.aggregation_classes == ["@int:1", "@float:1.5", "1"]
    displays = result.labels
    assert len(set(displays.values())) == 4
    assert displays["@int:1"] != displays["1"] != displays["@bool:true"]
    assert "int" in displays["@int:1"] and "str" in displays["1"]


# --------------------------------------------------------------------------------------------------
# Input handling


def test_csr_input_stays_sparse_into_overlapindex(monkeypatch):
    rng = np.random.default_rng(0)
    dense = rng.random((90, 30))
    dense[dense < 0.7] = 0.0
    dense[:30, :10] += 1.0
    dense[30:60, 10:20] += 1.0
    dense[60:, 20:] += 1.0
    X = sp.csr_matrix(dense)
    labels = ["a"] * 30 + ["b"] * 30 + ["c"] * 30
    seen = []
    original = overlapindex.OverlapIndex.fit

    def spy(self, X, *args, **kwargs):
        seen.append((sp.issparse(X), X.format if sp.issparse(X) else None, X.copy()))
        return original(self, X, *args, **kwargs)

    monkeypatch.setattr(overlapindex.OverlapIndex, "fit", spy)
    result = OverlapIndexScorer(OverlapScoringConfig(k=3)).score(X, labels, seed=0)
    assert seen, "OverlapIndex.fit was not called"
    assert seen[0][0] is True and seen[0][1] == "csr"
    passed = seen[0][2]
    norms = np.sqrt(np.asarray(passed.multiply(passed).sum(axis=1)).ravel())
    assert np.allclose(norms, 1.0)
    assert result.metadata["input_sparse"] is True
    assert 0.0 <= result.score <= 1.0
    # the real fit ran: the blocks are well separated
    assert result.score > 0.9


def test_nan_embedding_names_the_row():
    X, labels = _blobs({"a": 10, "b": 10})
    X[13, 2] = np.nan
    ids = [f"img-{i}" for i in range(20)]
    with pytest.raises(ValidationError) as info:
        OverlapIndexScorer(OverlapScoringConfig(k=2)).score(X, labels, row_ids=ids)
    assert "img-13" in str(info.value)
    assert "img-12" not in str(info.value)


def test_inf_in_sparse_embedding_names_the_row():
    X = sp.csr_matrix(np.eye(6))
    X.data[4] = np.inf
    with pytest.raises(ValidationError, match="index 4"):
        OverlapIndexScorer(OverlapScoringConfig(k=2)).score(X, ["a", "a", "a", "b", "b", "b"])


def test_single_class_is_refused():
    X, labels = _blobs({"only": 25})
    with pytest.raises(ValidationError, match="at least 2 classes"):
        OverlapIndexScorer().score(X, labels)


def test_label_count_must_match_rows():
    X, labels = _blobs({"a": 10, "b": 10})
    with pytest.raises(ValidationError, match="20 rows"):
        OverlapIndexScorer().score(X, labels[:-1])


def test_pairwise_and_adjacency_are_consistent():
    # overlapping blobs so that adjacency is non-empty
    X, labels = _blobs({"a": 50, "b": 40, "c": 30, "d": 20}, spread=2.5, seed=12)
    result = OverlapIndexScorer(OverlapScoringConfig(k=4)).score(X, labels, seed=3)
    classes = set(result.per_class_scores)
    assert classes == {"a", "b", "c", "d"}
    assert any(result.sparse_adjacency.values()), "expected some cross-class hits"
    for a in classes:
        competitors = result.pairwise_scores[a]
        assert set(competitors) == classes - {a}
        # per-class score = min over competitors of the directional pairwise score
        assert result.per_class_scores[a] == min(competitors.values())
        for b, score in competitors.items():
            hits = result.sparse_adjacency.get(a, {}).get(b, 0)
            # pairwise(a -> b) = 1 - hits(a -> b) / n_a
            assert math.isclose(score, 1.0 - hits / result.class_counts[a], abs_tol=1e-12)
            assert 0.0 <= score <= 1.0
    for a, row in result.sparse_adjacency.items():
        assert a in classes and a not in row
        assert all(isinstance(h, int) and 0 < h <= result.class_counts[a] for h in row.values())
    assert result.score < 1.0


def test_the_fit_runs_on_one_openmp_thread_and_scores_as_the_unlimited_oracle(monkeypatch, digits_subset):
    from threadpoolctl import threadpool_info, threadpool_limits

    X, y = digits_subset
    openmp_threads = []
    original = overlapindex.OverlapIndex.fit

    def spy(self, *args, **kwargs):
        openmp_threads.extend(p["num_threads"] for p in threadpool_info() if p["user_api"] == "openmp")
        return original(self, *args, **kwargs)

    monkeypatch.setattr(overlapindex.OverlapIndex, "fit", spy)
    with threadpool_limits(limits=2, user_api="openmp"):
        result = OverlapIndexScorer(OverlapScoringConfig(k=4)).score(X, y, seed=5)
    assert openmp_threads and set(openmp_threads) == {1}  # scikit-learn's OpenMP runtime, inside the fit
    monkeypatch.undo()
    with threadpool_limits(limits=2, user_api="openmp"):  # the oracle: overlapindex on two OpenMP threads
        oracle = overlapindex.OverlapIndex(model_type="MiniBatchKMeans", kmeans_k=4, kmeans_kwargs={"random_state": 5},
                                           offline_chunk_size=10000).fit(normalize(X), y)
    assert result.score == float(oracle.index)
