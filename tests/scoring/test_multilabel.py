"""Multi-label OverlapIndex scoring against the real ``overlapindex`` package.

The oracle calls ``overlapindex.OverlapIndex`` directly with the backend the spec fixes (MiniBatchKMeans,
seeded kmeans_kwargs, offline_chunk_size=10000) on sklearn-L2-normalised rows and a hand-built CSR indicator
whose columns follow the catalog; overlapindex names multi-label classes by column index, which the scorer must
map back to catalog keys. Auto k follows the module docstring of vertebrae.scoring.overlap:
``k = clip(n // mspc, min_k, max_k)``, then capped at ``max(min(2, n), n // mspc)``, with n the per-label
occurrence count.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.preprocessing import normalize

import overlapindex
from vertebrae.core.errors import ValidationError
from vertebrae.data.targets import multilabel_targets
from vertebrae.scoring.overlap import OverlapIndexScorer, OverlapScoreResult, OverlapScoringConfig

# Labels: "z" (str) on 200 rows, 7 (int) on 60 rows, "7" (str) on 12 rows. Catalog order is by type, then value:
# int 7 ("@int:7"), str "7" ("7"), str "z" ("z"); the indicator columns are 0, 1, 2 in that order.
N_ROWS = 230
KEYS = ("@int:7", "7", "z")
OCCURRENCES = {"@int:7": 60, "7": 12, "z": 200}
# k = clip(n // 5, 10, 50) capped at max(min(2, n), n // 5):
#   z:  200 // 5 = 40 -> clip 40 -> cap 40 -> 40
#   7:   60 // 5 = 12 -> clip 12 -> cap 12 -> 12
#  "7":  12 // 5 = 2  -> clip 10 -> cap max(2, 2) = 2 -> 2 (reduced, warned)
EXPECTED_K = {"@int:7": 12, "7": 2, "z": 40}
CONFIG = OverlapScoringConfig(k="auto", min_k=10, max_k=50, min_samples_per_cluster=5)


def _label_sets() -> list[tuple]:
    """rows 0-169: z; 170-199: z, 7; 200-217: 7; 218-229: 7, "7"."""
    rows: list[tuple] = []
    for i in range(N_ROWS):
        labels = []
        if i < 200:
            labels.append("z")
        if i >= 170:
            labels.append(7)
        if i >= 218:
            labels.append("7")
        rows.append(tuple(reversed(labels)))  # input order differs from catalog order
    return rows


def _indicator() -> sp.csr_matrix:
    """The same targets as a hand-built 0/1 indicator with columns (int 7, str "7", "z")."""
    Y = np.zeros((N_ROWS, 3), dtype=np.int8)
    Y[170:, 0] = 1
    Y[218:, 1] = 1
    Y[:200, 2] = 1
    return sp.csr_matrix(Y)


def _embeddings(seed: int = 5) -> np.ndarray:
    """Rows drawn around one centre per label combination, so the labels are partly separable."""
    rng = np.random.default_rng(seed)
    Y = _indicator().toarray().astype(np.float64)
    centres = np.array([[3.0, 0.0, 0.0, 1.0, 0.0, 0.0],
                        [0.0, 3.0, 0.0, 0.0, 1.0, 0.0],
                        [0.0, 0.0, 3.0, 0.0, 0.0, 1.0]])
    return Y @ centres + rng.normal(scale=0.8, size=(N_ROWS, 6)) + 0.5


def _oracle(X, seed: int, *, exclude=None) -> overlapindex.OverlapIndex:
    index = overlapindex.OverlapIndex(
        model_type="MiniBatchKMeans",
        kmeans_k={KEYS.index(key): k for key, k in EXPECTED_K.items()},
        kmeans_kwargs={"random_state": seed},
        offline_chunk_size=10000,
        exclude_classes=exclude,
    )
    index.fit(normalize(X), _indicator())
    return index


@pytest.fixture(scope="module")
def X():
    return _embeddings()


@pytest.fixture(scope="module")
def scored(X):
    return OverlapIndexScorer(CONFIG).score(X, _label_sets(), seed=3)


def test_fixture_targets_have_the_planned_occurrences():
    targets = multilabel_targets(_label_sets())
    assert targets.catalog.keys == KEYS
    assert targets.counts() == OCCURRENCES
    np.testing.assert_array_equal(targets.values.toarray(), _indicator().toarray())


def test_auto_k_is_driven_by_per_label_occurrences(scored):
    assert scored.target_type == "multilabel"
    assert scored.class_counts == OCCURRENCES
    assert scored.k_per_class == EXPECTED_K


def test_only_the_reduced_label_is_warned_about(scored):
    reductions = [w for w in scored.warnings if w.startswith("k reduced")]
    assert len(reductions) == 1
    # "7" (str) shares its text with int 7, so its display is type-disambiguated
    assert scored.labels == {"@int:7": "7 [int]", "7": "7 [str]", "z": "z"}
    assert "'7 [str]'" in reductions[0]
    assert "10 -> 2" in reductions[0]
    assert "12 rows" in reductions[0]


def test_score_equals_overlapindex_called_directly_with_the_csr_indicator(X, scored):
    oracle = _oracle(X, seed=3)
    assert scored.score == scored.macro_score == float(oracle.index)
    assert scored.weighted_score == float(oracle.weighted_index)
    expected = {KEYS[int(col)]: float(v) for col, v in oracle.singleton_index.items()}
    assert set(expected) == set(KEYS)
    assert scored.per_class_scores == expected
    assert list(scored.per_class_scores) == list(KEYS)  # catalog order
    # pairwise_index is a lazy mapping: look every ordered pair up (the oracle's own value may be NaN, see below)
    columns = list(oracle.singleton_index)
    for a in columns:
        for b in columns:
            if a != b:
                expected_pair = float(oracle.pairwise_index[(a, b)])
                got = scored.pairwise_scores[KEYS[int(a)]].get(KEYS[int(b)])
                if np.isnan(expected_pair):  # undefined upstream: None, absent or NaN here (serialising is tested below)
                    assert got is None or np.isnan(got), (a, b)
                else:
                    assert got == expected_pair, (a, b)
    assert scored.aggregation_classes == list(KEYS)
    assert scored.metadata["kmeans_kwargs"] == {"random_state": 3}
    assert scored.metadata["offline_chunk_size"] == 10000
    # the fixture is partly separable: the score is neither 0 nor 1, so the comparison is not vacuous
    assert 0.0 < scored.score < 1.0


def test_a_nested_label_result_serialises(X, scored):
    # every row with "7" (str) also has int 7, so overlapindex has no evidence rows for the pair ("7", 7) and
    # reports NaN for it. The result must still be writable as canonical JSON (artifacts, reports): an
    # undefined pair may be None or absent, never a NaN that makes to_dict() raise.
    oracle = _oracle(X, seed=3)
    assert np.isnan(oracle.pairwise_index[(1, 0)])  # the premise: upstream leaves this pair undefined
    document = scored.to_dict()
    text = json.dumps(document, allow_nan=False)
    back = OverlapScoreResult.from_dict(json.loads(text))
    assert back.score == scored.score and back.per_class_scores == scored.per_class_scores
    for row in document["pairwise_scores"].values():
        for value in row.values():
            assert value is None or 0.0 <= value <= 1.0
    assert document["pairwise_scores"]["z"] == {"@int:7": float(oracle.pairwise_index[(2, 0)]),
                                                "7": float(oracle.pairwise_index[(2, 1)])}


def test_dense_and_sparse_indicators_with_label_names_score_like_label_sets(X, scored):
    # columns given in the order "z", "7", 7: the scorer must reorder them to the catalog
    Y = _indicator().toarray()[:, [2, 1, 0]]
    names = ["z", "7", 7]
    for labels in (Y, sp.csr_matrix(Y), Y.astype(bool)):
        result = OverlapIndexScorer(CONFIG).score(X, labels, seed=3, label_names=names)
        assert result.target_type == "multilabel"
        assert result.class_counts == OCCURRENCES
        assert result.k_per_class == EXPECTED_K
        assert result.per_class_scores == scored.per_class_scores
        assert result.score == scored.score
        assert result.weighted_score == scored.weighted_score


@pytest.mark.parametrize(
    ("exclude", "column", "kept"),
    [(7, 0, ["7", "z"]), ("7", 1, ["@int:7", "z"]), ([7], 0, ["7", "z"])],
    ids=["int-7", "str-7", "list"],
)
def test_exclude_classes_with_a_typed_label_leaves_aggregation(X, exclude, column, kept):
    config = OverlapScoringConfig(k="auto", min_k=10, max_k=50, min_samples_per_cluster=5, exclude_classes=exclude)
    result = OverlapIndexScorer(config).score(X, _label_sets(), seed=3)
    oracle = _oracle(X, seed=3, exclude=[column])
    assert result.aggregation_classes == kept
    assert result.metadata["excluded_classes"] == [KEYS[column]]
    assert result.score == float(oracle.index)
    assert result.weighted_score == float(oracle.weighted_index)
    # the excluded label is still fitted and reported
    assert set(result.per_class_scores) == set(KEYS)
    assert result.per_class_scores == {KEYS[int(c)]: float(v) for c, v in oracle.singleton_index.items()}


def test_excluding_a_label_changes_the_aggregate(X, scored):
    config = OverlapScoringConfig(k="auto", min_k=10, max_k=50, min_samples_per_cluster=5, exclude_classes="z")
    result = OverlapIndexScorer(config).score(X, _label_sets(), seed=3)
    assert result.aggregation_classes == ["@int:7", "7"]
    assert result.per_class_scores == scored.per_class_scores
    assert result.score != scored.score


def test_exclude_classes_naming_an_absent_label_is_refused(X):
    config = OverlapScoringConfig(exclude_classes=8)
    with pytest.raises(ValidationError, match="not in the dataset"):
        OverlapIndexScorer(config).score(X, _label_sets(), seed=0)


@pytest.fixture
def fit_spy(monkeypatch):
    """Record, for every real OverlapIndex.fit, whether X and Y are scipy sparse; call the original."""
    calls = []
    original = overlapindex.OverlapIndex.fit

    def recording(self, X, Y):
        calls.append({"X_sparse": sp.issparse(X), "Y_sparse": sp.issparse(Y), "X_format": getattr(X, "format", None),
                      "Y_format": getattr(Y, "format", None), "shape": X.shape, "Y_shape": Y.shape})
        return original(self, X, Y)

    monkeypatch.setattr(overlapindex.OverlapIndex, "fit", recording)
    return calls


def test_a_csr_embedding_matrix_stays_sparse_through_overlapindex(X, fit_spy):
    sparse_X = sp.csr_matrix(np.where(np.abs(X) > 1.0, X, 0.0))  # genuinely sparse
    assert 0 < sparse_X.nnz < sparse_X.shape[0] * sparse_X.shape[1]
    result = OverlapIndexScorer(CONFIG).score(sparse_X, _label_sets(), seed=3)
    assert len(fit_spy) == 1
    call = fit_spy[0]
    assert call["X_sparse"] and call["X_format"] == "csr"
    assert call["Y_sparse"] and call["Y_format"] == "csr"
    assert call["shape"] == (N_ROWS, 6) and call["Y_shape"] == (N_ROWS, 3)
    assert result.metadata["input_sparse"] is True
    # the same scores as a direct call on the normalised sparse matrix
    oracle = overlapindex.OverlapIndex(
        model_type="MiniBatchKMeans",
        kmeans_k={KEYS.index(key): k for key, k in EXPECTED_K.items()},
        kmeans_kwargs={"random_state": 3},
        offline_chunk_size=10000,
    )
    oracle.fit(normalize(sparse_X), _indicator())  # goes through the spy too: a second, sparse record
    assert [(c["X_sparse"], c["Y_sparse"]) for c in fit_spy] == [(True, True), (True, True)]
    assert result.score == float(oracle.index)
    assert result.per_class_scores == {KEYS[int(c)]: float(v) for c, v in oracle.singleton_index.items()}


def test_a_dense_embedding_matrix_gets_a_csr_indicator(X, fit_spy):
    result = OverlapIndexScorer(CONFIG).score(X, _label_sets(), seed=3)
    assert [(c["X_sparse"], c["Y_sparse"], c["Y_format"]) for c in fit_spy] == [(False, True, "csr")]
    assert result.metadata["input_sparse"] is False


def test_sparse_embeddings_with_a_sparse_indicator_and_names(X, fit_spy):
    sparse_X = sp.csr_matrix(X)
    Y = sp.csc_matrix(_indicator().toarray()[:, [2, 1, 0]])
    result = OverlapIndexScorer(CONFIG).score(sparse_X, Y, seed=3, label_names=["z", "7", 7])
    assert [(c["X_sparse"], c["Y_sparse"], c["Y_format"]) for c in fit_spy] == [(True, True, "csr")]
    assert result.k_per_class == EXPECTED_K
    assert result.class_counts == OCCURRENCES
