"""SeparatixScorer against the real separatix package (small data, budget "fast"): gate, runs, probe summaries.

Every run here is a real ``separatix.diagnose`` call; the spy only counts and records calls and always
delegates to the real function.
"""

from __future__ import annotations

import importlib.util
import json
import math

import numpy as np
import pytest
import scipy.sparse as sp

from vertebrae.core.errors import BudgetError, ValidationError
from vertebrae.data.targets import build_targets
from vertebrae.scoring.separatix import SeparatixConfig, SeparatixResult, SeparatixScorer

HAS_TORCH = importlib.util.find_spec("torch") is not None


def _blobs(n: int = 300, dim: int = 8, n_classes: int = 3, spread: float = 1.0, seed: int = 0):
    """Gaussian blobs: class c is shifted by 3 along axis c."""
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(n_classes), n // n_classes)
    X = spread * rng.normal(size=(y.size, dim))
    X[np.arange(y.size), y] += 3.0
    return X, y


def _class_targets(y):
    return build_targets(np.array(["ant", "bee", "cat", "dog"])[y])


def _multilabel_targets(X, y):
    Y = np.zeros((y.size, 3), dtype=int)
    Y[np.arange(y.size), y] = 1
    Y[:, 2] |= (X[:, 3] > 0).astype(int)
    return build_targets(sp.csr_matrix(Y), "multilabel", label_names=["red", "green", "blue"])


def _regression_targets(X, seed: int = 0):
    rng = np.random.default_rng(seed)
    return build_targets(X[:, 0] ** 2 + X[:, 1] + 0.3 * rng.normal(size=X.shape[0]), "regression")


def _sparse_blobs(n: int = 240, dim: int = 600, seed: int = 0):
    """CSR rows whose dense form (n x dim float64 = 1.1 MiB) exceeds a 1 MiB budget."""
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(3), n // 3)
    X = sp.random(n, dim, density=0.03, random_state=seed, format="lil")
    for c in range(3):
        rows = np.flatnonzero(y == c)
        for j in range(c * 5, c * 5 + 5):
            X[rows, j] = 1.0 + rng.random(rows.size)
    return sp.csr_matrix(X), y


def _all_keys(obj):
    if isinstance(obj, dict):
        for key, value in obj.items():
            yield key
            yield from _all_keys(value)
    elif isinstance(obj, list):
        for item in obj:
            yield from _all_keys(item)


def _strip_runtime(obj):
    if isinstance(obj, dict):
        return {k: _strip_runtime(v) for k, v in obj.items() if "runtime" not in k and "seconds" not in k}
    if isinstance(obj, list):
        return [_strip_runtime(v) for v in obj]
    return obj


def _roundtrip(result: SeparatixResult) -> None:
    data = result.to_dict()
    text = json.dumps(data, allow_nan=False)
    again = SeparatixResult.from_dict(json.loads(text))
    assert again.to_dict() == data


@pytest.fixture
def diagnose_calls(monkeypatch):
    """Record every separatix.diagnose call; the spy delegates to the real function."""
    import separatix

    real = separatix.diagnose
    calls: list[tuple[tuple, dict]] = []

    def spy(*args, **kwargs):
        calls.append((args, kwargs))
        return real(*args, **kwargs)

    monkeypatch.setattr(separatix, "diagnose", spy)
    return calls


# --------------------------------------------------------------------------------------------------
# gate


def test_gate_not_passed_skips_without_calling_separatix(diagnose_calls):
    X, y = _blobs()
    result = SeparatixScorer(SeparatixConfig(overlap_threshold=0.8)).run(X, _class_targets(y), overlap_score=0.75)
    assert not result.ran and diagnose_calls == []
    assert result.gate == {"metric": "overlap", "score": 0.75, "threshold": 0.8, "passed": False}
    assert "gate not passed" in result.skipped_reason
    assert "0.75" in result.skipped_reason and "0.8" in result.skipped_reason
    assert result.report is None and result.probe_summary is None
    _roundtrip(result)


def test_disabled_skips_even_when_gate_passes(diagnose_calls):
    X, y = _blobs()
    result = SeparatixScorer(SeparatixConfig(enabled=False)).run(X, _class_targets(y), overlap_score=0.99)
    assert not result.ran and diagnose_calls == []
    assert "disabled" in result.skipped_reason
    assert result.gate["passed"] is True
    _roundtrip(result)


def test_regression_uses_its_own_threshold(diagnose_calls):
    X, _ = _blobs()
    targets = _regression_targets(X)
    scorer = SeparatixScorer(SeparatixConfig(overlap_threshold=0.8, regression_overlap_threshold=0.3))
    below = scorer.run(X, targets, overlap_score=0.29)
    assert not below.ran and below.gate["threshold"] == 0.3 and diagnose_calls == []
    assert "regression" in below.skipped_reason
    above = scorer.run(X, targets, overlap_score=0.3)  # the threshold itself passes
    assert above.ran and above.gate == {"metric": "overlap", "score": 0.3, "threshold": 0.3, "passed": True}
    assert len(diagnose_calls) == 1


def test_overlap_score_must_be_finite():
    X, y = _blobs()
    with pytest.raises(ValidationError, match="overlap_score"):
        SeparatixScorer().run(X, _class_targets(y), overlap_score=float("nan"))


# --------------------------------------------------------------------------------------------------
# runs per target type


def test_classification_run(diagnose_calls):
    X, y = _blobs()
    targets = _class_targets(y)
    result = SeparatixScorer(SeparatixConfig(random_state=3)).run(X, targets, overlap_score=0.9)
    assert result.ran and result.skipped_reason is None
    (args, kwargs), = diagnose_calls
    assert kwargs["target_mode"] == "singlelabel" and kwargs["return_report"] is True
    assert kwargs["random_state"] == 3 and kwargs["budget"] == "fast"
    assert kwargs["densify_policy"] == "warn_and_sample" and kwargs["max_dense_mb"] == 1907
    assert kwargs["max_samples"] is None and kwargs["mlp_probes"] is False and kwargs["groups"] is None
    passed_X, passed_y = args
    assert passed_y.ndim == 1 and passed_y.tolist() == [str(k) for k in targets.values]
    np.testing.assert_allclose(np.linalg.norm(passed_X, axis=1), 1.0)  # normalised like overlap scoring

    report = result.report
    assert report["config"]["target_mode"] == "singlelabel" and result.target_mode == "singlelabel"
    assert result.recommendation == report["recommendation"] and result.confidence == report["confidence"]
    assert result.decision_path == report["decision_path"] and result.scores == report["scores"]
    assert result.preprocessing == report["preprocessing"]
    assert set(report["class_summary"]["classes"]) == set(targets.values.tolist())

    summary = result.probe_summary
    assert summary["primary_metric"] == "balanced_accuracy"
    assert summary["primary_metric_source"] == "baseline_contract"
    baseline = report["metrics"]["baseline"]
    assert summary["best_probe"]["name"] == baseline["best_probe"]
    assert summary["best_probe"]["score"] == baseline["best_probe_score"]
    for name, probe in report["metrics"]["probes"].items():
        if "balanced_accuracy" in probe:
            assert summary["probes"][name]["metrics"]["balanced_accuracy"] == probe["balanced_accuracy"]
            assert summary["probes"][name]["metrics"]["accuracy"] == probe["accuracy"]
    comparison = summary["linear_vs_nonlinear"]
    assert comparison["status"] == "available" and comparison["direction"] == "larger_is_better"
    assert comparison["improvement"] == pytest.approx(comparison["nonlinear_score"] - comparison["linear_score"])
    assert summary["evaluation"]["n_splits"] == 3 and summary["sampling"]["budget"] == "fast"
    assert summary["skips"]["probes"]["kernel_approx"] == "kernel probe disabled for this budget"
    _roundtrip(result)


def test_multilabel_run(diagnose_calls):
    X, y = _blobs()
    targets = _multilabel_targets(X, y)
    result = SeparatixScorer().run(X, targets, overlap_score=0.85)
    assert result.ran
    (args, kwargs), = diagnose_calls
    assert kwargs["target_mode"] == "multilabel"
    assert sp.issparse(args[1]) and (args[1] != targets.values).nnz == 0
    report = result.report
    assert report["config"]["target_mode"] == "multilabel" and report["class_summary"]["target_type"] == "multilabel"

    summary = result.probe_summary
    assert summary["primary_metrics"] == ["micro_f1", "macro_f1", "sample_jaccard"]
    assert summary["primary_metric"] == "micro_f1" and summary["primary_metric_source"] == "probe_declaration"
    best = report["metrics"]["baseline"]["best_by_metric"]["micro_f1"]
    assert summary["best_probe"]["name"] == best["probe"] and summary["best_probe"]["score"] == best["score"]
    keys = set(_all_keys(summary))
    assert not keys & {"accuracy", "balanced_accuracy"}
    assert "accuracy" not in summary["primary_metric"]
    for name, probe in summary["probes"].items():
        for metric, value in probe["metrics"].items():
            if "." not in metric:
                assert report["metrics"]["probes"][name][metric] == value
    _check_comparison_against_report(summary, report)
    _roundtrip(result)


def test_regression_run_respects_smaller_is_better(diagnose_calls):
    X, _ = _blobs()
    targets = _regression_targets(X)
    result = SeparatixScorer().run(X, targets, overlap_score=0.5)
    assert result.ran
    (args, kwargs), = diagnose_calls
    assert kwargs["target_mode"] == "regression" and args[1].dtype == np.float64
    report = result.report
    assert report["config"]["target_mode"] == "regression" and report["class_summary"]["target_type"] == "regression"

    summary = result.probe_summary
    assert summary["primary_metrics"] == ["r2_variance_weighted", "r2_uniform_average"]
    assert summary["primary_metric"] == "r2_variance_weighted"
    assert not any("accuracy" in key for key in _all_keys(summary))
    comparison = summary["linear_vs_nonlinear"]
    assert comparison["status"] == "available"
    rmse = comparison["metrics"]["normalized_rmse_mean"]
    assert rmse["direction"] == "smaller_is_better"
    _check_comparison_against_report(summary, report)
    # the quadratic target: the nonlinear probe has the lower RMSE and is favoured on it
    assert rmse["nonlinear"] < rmse["linear"] and rmse["improvement"] > 0 and rmse["favored_family"] == "nonlinear"
    _roundtrip(result)


def _check_comparison_against_report(summary, report):
    """Every compared metric follows its direction, checked against the raw probe values in the report."""
    comparison = summary["linear_vs_nonlinear"]
    probes = report["metrics"]["probes"]
    linear, nonlinear = probes["linear"], probes[comparison["nonlinear_probe"]]
    assert comparison["metrics"], "no metric was compared"
    for metric, entry in comparison["metrics"].items():
        raw_linear, raw_nonlinear = linear[metric], nonlinear[metric]
        assert (entry["linear"], entry["nonlinear"]) == (raw_linear, raw_nonlinear)
        if entry["direction"] == "smaller_is_better":
            expected = raw_linear - raw_nonlinear
        else:
            expected = raw_nonlinear - raw_linear
        assert entry["improvement"] == pytest.approx(expected)
        favoured = "nonlinear" if expected > 0 else "linear" if expected < 0 else "tie"
        assert entry["favored_family"] == favoured
    primary = comparison["metrics"][comparison["metric"]]
    assert comparison["improvement"] == primary["improvement"]
    assert comparison["favored_family"] == primary["favored_family"]
    if comparison["paired"] is not None:
        assert comparison["paired"]["point"] == pytest.approx(comparison["improvement"])
        assert comparison["paired"]["lower_95"] <= comparison["paired"]["upper_95"]


# --------------------------------------------------------------------------------------------------
# groups


def test_groups_are_forwarded(diagnose_calls):
    X, y = _blobs()
    groups = np.array([f"site-{i}" for i in np.random.default_rng(1).integers(0, 10, y.size)])
    result = SeparatixScorer().run(X, _class_targets(y), overlap_score=0.9, groups=groups)
    assert result.ran
    (_, kwargs), = diagnose_calls
    assert kwargs["groups"].tolist() == groups.tolist()
    grouping = result.report["grouping"]
    assert grouping["provided"] is True and grouping["group_count"] == 10
    assert grouping["effective_supervised_evaluation_mode"] == "group_cross_validation"
    assert result.grouping == grouping
    assert result.probe_summary["grouping"]["group_count"] == 10
    assert result.probe_summary["grouping"]["skipped_singlelabel_classes_count"] == 0
    assert result.probe_summary["evaluation"]["group_aware"] is True
    _roundtrip(result)


@pytest.mark.parametrize("kind", ["classification", "multilabel"])
def test_group_without_cross_group_support_is_skipped_not_retried(diagnose_calls, kind):
    X, y = _blobs()
    targets = _class_targets(y) if kind == "classification" else _multilabel_targets(X, y)
    groups = np.array([f"g{c}" for c in y])  # each class lives in a single group
    if kind == "multilabel":
        targets = build_targets(sp.csr_matrix(np.eye(3, dtype=int)[y]), "multilabel", label_names=["r", "g", "b"])
    result = SeparatixScorer().run(X, targets, overlap_score=0.95, groups=groups)
    assert len(diagnose_calls) == 1  # never retried without groups
    assert diagnose_calls[0][1]["groups"] is not None
    assert not result.ran and result.report is None
    assert result.skipped_reason.startswith("grouped diagnostic skipped:")
    assert "distinct groups" in result.skipped_reason
    assert result.grouping == {"provided": True, "group_count": 3}
    _roundtrip(result)


def test_groups_must_align_with_rows():
    X, y = _blobs()
    with pytest.raises(ValidationError, match="groups"):
        SeparatixScorer().run(X, _class_targets(y), overlap_score=0.9, groups=["a"] * 5)


# --------------------------------------------------------------------------------------------------
# sparse input and densify policies (1 MiB budget; the dense CSR is 1.1 MiB)


def _sparse_run(policy):
    X, y = _sparse_blobs()
    config = SeparatixConfig(densify_policy=policy, max_dense_bytes=4096)
    return SeparatixScorer(config).run(X, _class_targets(y), overlap_score=0.9)


def test_warn_and_sample_records_events_and_warnings(diagnose_calls):
    result = _sparse_run("warn_and_sample")
    (args, kwargs), = diagnose_calls
    assert sp.issparse(args[0]) and args[0].format == "csr"  # CSR kept at the boundary
    np.testing.assert_allclose(sp.linalg.norm(args[0], axis=1), 1.0)
    assert kwargs["max_dense_mb"] == 1 and kwargs["densify_policy"] == "warn_and_sample"
    assert result.preprocessing["is_sparse"] is True
    events = result.densification_events
    assert events and all(e["status"] == "performed_on_subsample" and e["max_dense_mb"] == 1 for e in events)
    assert all(e["n_used"] < e["n_original"] for e in events)
    assert any("subsampled then densified" in w for w in result.warnings)
    assert result.probe_summary["sampling"]["dense_alignment_sampling"] is True
    _roundtrip(result)


def test_skip_records_skipped_diagnostics(diagnose_calls):
    result = _sparse_run("skip")
    assert len(diagnose_calls) == 1 and result.ran
    assert any(e["status"] == "skipped" for e in result.densification_events)
    names = {entry["name"] for entry in result.skipped_diagnostics}
    assert "smooth_nonlinear_probe" in names
    summary = result.probe_summary
    assert summary["probes"]["smooth_poly"]["status"] == "skipped"
    assert summary["skips"]["probes"]["smooth_poly"] == "dense conversion unavailable under current policy"
    assert any(d["name"] == "smooth_nonlinear_probe" for d in summary["skips"]["diagnostics"])
    _roundtrip(result)


def test_fail_raises_budget_error(diagnose_calls):
    from separatix.exceptions import DensificationError

    with pytest.raises(BudgetError, match="1 MiB") as info:
        _sparse_run("fail")
    assert isinstance(info.value, MemoryError)
    assert isinstance(info.value.__cause__, DensificationError)
    assert len(diagnose_calls) == 1


# --------------------------------------------------------------------------------------------------
# determinism, MLP option, serialisation


def test_fixed_random_state_is_deterministic():
    X, y = _blobs(spread=1.5)
    targets = _class_targets(y)
    scorer = SeparatixScorer(SeparatixConfig(random_state=11))
    first = scorer.run(X, targets, overlap_score=0.9)
    second = scorer.run(X, targets, overlap_score=0.9)
    assert first.probe_summary == second.probe_summary
    assert _strip_runtime(first.report) == _strip_runtime(second.report)
    assert (first.recommendation, first.confidence, first.scores) == (second.recommendation, second.confidence, second.scores)


def test_mlp_probes_option_is_forwarded(diagnose_calls):
    rng = np.random.default_rng(5)
    X = rng.normal(size=(300, 8))
    y = rng.integers(0, 3, 300)  # no signal: simpler probes miss the MLP trigger threshold
    result = SeparatixScorer(SeparatixConfig(mlp_probes=True)).run(X, _class_targets(y), overlap_score=0.9)
    assert diagnose_calls[0][1]["mlp_probes"] is True
    mlp = result.probe_summary["mlp"]
    assert mlp["requested"] is True and mlp["status"] != "not_requested"
    if not HAS_TORCH:
        assert mlp["status"] == "dependency_unavailable"
        assert any(d["name"] == "mlp_probes" for d in result.probe_summary["skips"]["diagnostics"])
    _roundtrip(result)


def test_result_json_is_strict_and_round_trips():
    X, y = _blobs()
    result = SeparatixScorer().run(X, _class_targets(y), overlap_score=0.9)
    data = result.to_dict()
    text = json.dumps(data, allow_nan=False)
    assert SeparatixResult.from_dict(json.loads(text)) == SeparatixResult.from_dict(data)
    # the full terse report is preserved, without row-level arrays
    assert set(data["report"]) >= {"recommendation", "metrics", "scores", "decision_path", "config", "grouping"}
    assert "predictions" not in set(_all_keys(data["report"]))
    with pytest.raises(ValidationError, match="unknown SeparatixResult fields"):
        SeparatixResult.from_dict({**data, "extra": 1})
    assert all(not (isinstance(v, float) and not math.isfinite(v)) for v in data["scores"].values())
