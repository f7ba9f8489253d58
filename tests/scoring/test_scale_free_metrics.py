"""Issue 48: every built-in labelled metric and every compression method is scale-free.

Property: a candidate multiplied by any of ``SCALES`` (1e-300 .. 1e300) scores what the candidate scores at 1.

Oracle: the same metric (or compression, then the same kNN) at scale 1. How equal, and why:

* **Exactly equal** (``==`` on the whole result document: score, per-sample predictions, per-episode and per-seed
  values, the probe's chosen C): ``knn`` (uniform and temperature), ``few_shot``, ``clustering``, ``linear_probe``
  classification, ``stability`` (OverlapIndex repeats), and the kNN score of every compressed variant. The scale
  rule makes their inputs agree to the multiple's own rounding (one ulp per value: a non-power-of-two factor such
  as 1e100 cannot be applied exactly, whatever vertebrae does); their scores are argmaxes, neighbour orders and
  cluster assignments of those inputs, so they come out identical (lbfgs and k-means iterate, but from inputs that
  agree to 1e-16 they take the same decisions).
* **Within 1e-12 relative**: ``knn`` and ``linear_probe`` regression R² and every compressed value (divided by the
  scale; whitened PCA is scale-free and compared as is). These are continuous in the embedding, so the
  multiple's last-bit rounding shows there, at about 1e-15.
* **Quantization codes exactly equal**: int8, uint8 and float16 store codes calibrated on the reference (its
  per-column max, min and range, or its largest |value|); the codes recovered from the values are compared
  exactly. The values themselves are float32 within 2**+-100 and float64 beyond, so they agree to float32's
  rounding (2**-24), not 1e-12.

Subnormal rows (``SUBNORMAL`` = 1e-310) are handled, not refused: ``np.ldexp`` scales them up exactly. The input
itself has lost bits there (a value of 1e-310 holds about 44 significant bits), so the discrete scores are equal and
the continuous ones agree within 1e-9.
"""

from __future__ import annotations

import functools
import warnings

import numpy as np
import pytest
import scipy.sparse as sp

from vertebrae import ClusteringMetric, FewShotMetric, KNNMetric, LinearProbeMetric
from vertebrae.compression import EmbeddingCompressionConfig as Config, fit_paired_compression
from vertebrae.core.arrays import rows_to_unit_peak, times_power_of_two, to_unit_peak
from vertebrae.core.errors import ValidationError
from vertebrae.data.targets import classification_targets, regression_targets
from vertebrae.scoring.stability import StabilityConfig, run_stability_analysis

SCALES = (1e-300, 1e-170, 1e-100, 1.0, 1e100, 1e200, 1e300)
SUBNORMAL = 1e-310
RNG = np.random.default_rng(0)
Y = np.repeat([0, 1, 2], 30)
X = RNG.normal(size=(3, 6))[Y] + 0.8 * RNG.normal(size=(90, 6))
T = X[:, 0] + 0.3 * RNG.normal(size=90)
CLASSES, VALUES = classification_targets(Y), regression_targets(T)

METRICS = {  # name: (metric, targets, continuous keys of the result document)
    "knn": (KNNMetric(k=5), CLASSES, ()),
    "knn_temperature": (KNNMetric(k=5, weighting="temperature"), CLASSES, ()),
    "knn_regression": (KNNMetric(k=5), VALUES, ("score", "r2")),
    "linear_probe": (LinearProbeMetric(Cs=[0.01, 1.0, 100.0], folds=3, inner_folds=2), CLASSES, ()),
    "linear_probe_regression": (LinearProbeMetric(Cs=[0.01, 1.0, 100.0], folds=3, inner_folds=2), VALUES,
                                ("score", "r2")),
    "few_shot": (FewShotMetric(shots=[1, 5], episodes=8), CLASSES, ()),
    "clustering": (ClusteringMetric(n_init=2, repeats=2), CLASSES, ()),
}

COMPRESSIONS = {
    "none": Config(enabled=False, method="none"),
    "pca": Config(method="pca", n_components=3),
    "pca_whiten": Config(method="pca", n_components=3, whiten=True),
    "pca_variance": Config(method="pca", preserve_variance=0.8),
    "incremental_pca": Config(method="incremental_pca", n_components=3, batch_size=30),
    "truncated_svd": Config(method="truncated_svd", n_components=3),
    "truncated_svd_csr": Config(method="truncated_svd", n_components=3),
    "gaussian_random_projection": Config(method="gaussian_random_projection", n_components=4),
    "sparse_random_projection": Config(method="sparse_random_projection", n_components=4),
    "prefix_truncate": Config(method="prefix_truncate", n_components=3, assume_matryoshka=True),
    "float16": Config(method="quantize", precision="float16"),
    "int8": Config(method="quantize", precision="int8"),
    "int8_csr": Config(method="quantize", precision="int8"),
    "uint8": Config(method="quantize", precision="uint8"),
}


@functools.cache
def _metric(name, scale):
    metric, targets, _ = METRICS[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the probe's ConvergenceWarning is recorded in the result, equal or not
        return metric.compute(X * scale, targets, row_ids=None, seed=0).to_dict()


@functools.cache
def _stability(scale):
    config = StabilityConfig(mode="subsample", subsample_fraction=0.8, repeats=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return run_stability_analysis(X * scale, CLASSES, stability_config=config, seed=0).to_dict()


@functools.cache
def _compressed(name, scale):
    """(compressed reference as float64, transformed paired rows, metadata, kNN score of the compressed rows)."""
    reference = X * scale
    if name.endswith("_csr"):
        reference = sp.csr_matrix(np.where(np.abs(X) > 0.5, reference, 0.0))
    fitted = fit_paired_compression(reference, COMPRESSIONS[name])
    dense = [m.toarray() if sp.issparse(m) else np.asarray(m) for m in
             (fitted.compressed_reference, fitted.transform(reference[:7] * 1.5))]
    score = KNNMetric(k=5).compute(dense[0], CLASSES, row_ids=None, seed=0).score
    return dense[0].astype(np.float64), dense[1].astype(np.float64), fitted.metadata, score


def _close(a, b, rel):
    return a == b or abs(a - b) <= rel * max(abs(a), abs(b))


def _equal_but_continuous(scaled, base, keys, rel):
    """The result documents are equal, but for ``keys`` (score, diagnostics) which agree within ``rel``."""
    for key in keys:
        got, want = (scaled[key], base[key]) if key == "score" else (scaled["diagnostics"][key], base["diagnostics"][key])
        assert _close(got, want, rel), (key, got, want)
    strip = {"score": None, "diagnostics": {k: v for k, v in scaled["diagnostics"].items() if k not in keys}}
    assert {**scaled, **strip} == {**base, "score": None,
                                   "diagnostics": {k: v for k, v in base["diagnostics"].items() if k not in keys}}


@pytest.mark.parametrize("scale", [s for s in SCALES if s != 1.0])
@pytest.mark.parametrize("name", list(METRICS))
def test_every_builtin_metric_scores_a_multiple_as_the_candidate(name, scale):
    _equal_but_continuous(_metric(name, scale), _metric(name, 1.0), METRICS[name][2], 1e-12)


@pytest.mark.parametrize("name", list(METRICS))
def test_subnormal_rows_are_scaled_up_not_refused(name):
    _equal_but_continuous(_metric(name, SUBNORMAL), _metric(name, 1.0), METRICS[name][2], 1e-9)


@pytest.mark.parametrize("scale", [s for s in (*SCALES, SUBNORMAL) if s != 1.0])
def test_stability_repeats_score_a_multiple_as_the_candidate(scale):
    scaled, base = _stability(scale), _stability(1.0)  # OverlapIndex already rescales (issue 32): not affected
    np.testing.assert_allclose(scaled["scores"], base["scores"], rtol=1e-12, atol=0)
    assert {**scaled, "scores": None, "summary": None} == {**base, "scores": None, "summary": None}


def _codes(values, metadata, method):
    """The stored quantization codes, recovered from the scored values and the calibration."""
    calibration = metadata["calibration"]
    if method == "float16":
        return (values / calibration["scale"]).astype(np.float16)
    if method == "int8":
        return np.rint(values / np.asarray(calibration["scale"]) * 127)
    return np.rint((values - np.asarray(calibration["min"])) / np.asarray(calibration["range"]) * 255)


@pytest.mark.parametrize("scale", [s for s in (*SCALES, SUBNORMAL) if s != 1.0])
@pytest.mark.parametrize("name", list(COMPRESSIONS))
def test_every_compression_of_a_multiple_is_the_multiple_of_the_compression(name, scale):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        reference, paired, metadata, score = _compressed(name, scale)
        base_reference, base_paired, base_metadata, base_score = _compressed(name, 1.0)
    assert score == base_score  # the kNN score of the compressed rows, exactly
    rel = 1e-9 if scale == SUBNORMAL else 1e-12
    method = COMPRESSIONS[name].precision if COMPRESSIONS[name].method == "quantize" else name
    for got, want in ((reference, base_reference), (paired, base_paired)):
        if method in ("float16", "int8", "uint8"):
            got_codes, want_codes = _codes(got, metadata, method), _codes(want, base_metadata, method)
            np.testing.assert_array_equal(got_codes, want_codes)
            np.testing.assert_allclose(got / scale, want, rtol=2.0 ** -23, atol=0)  # float32 at 1, float64 beyond
            continue
        unit = 1.0 if name == "pca_whiten" else scale  # whitened components have unit variance at every scale
        assert np.max(np.abs(got / unit - want)) <= rel * np.max(np.abs(want)), name
    assert metadata["compressed_dim"] == base_metadata["compressed_dim"]
    if "explained_variance_ratio_sum" in base_metadata:
        assert _close(metadata["explained_variance_ratio_sum"], base_metadata["explained_variance_ratio_sum"], rel)
    assert metadata["dtype"] == (base_metadata["dtype"] if method not in ("float16", "int8", "uint8")
                                 else "float32" if scale == 1.0 else "float64")


def test_a_zero_row_is_refused_naming_its_row_id_as_the_user_knows_it():
    x = X.copy()
    x[4] = 0.0
    ids = [f"img{i:03d}" for i in range(90)]
    for metric in (KNNMetric(k=5), FewShotMetric(shots=[1], episodes=2), ClusteringMetric(n_init=1, repeats=1)):
        with pytest.raises(ValidationError, match=r"1 embedding row\(s\) are all zero .*row id 'img004' \(index 4\)"):
            metric.compute(x * 1e-170, CLASSES, row_ids=ids, seed=0)
    with pytest.raises(ValidationError, match=r"row id 4 \(index 4\)") as info:  # integer ids, never '@int:4'
        KNNMetric(k=5).compute(x, CLASSES, row_ids=None, seed=0)
    assert "@" not in str(info.value)


def test_the_scale_helpers_are_exact_and_keep_dtype_and_sparsity():
    x = np.array([[3.0, -1.5e-310, 0.0], [0.0, 0.0, 0.0], [1e-320, 2e-320, -5e-321]])
    rows = rows_to_unit_peak(x)
    peaks = np.abs(rows).max(axis=1)
    assert peaks[0] == 0.75 and peaks[1] == 0.0 and 0.5 <= peaks[2] < 1  # peaks in [0.5, 1); a zero row stays zero
    np.testing.assert_array_equal(np.ldexp(rows[2], np.frexp(2e-320)[1]), x[2])  # subnormal: scaled up exactly
    assert to_unit_peak(np.float32([[6.0, 1.0]])).dtype == np.float32
    assert np.abs(to_unit_peak(X * 1e300)).max() < 1 and np.abs(to_unit_peak(X * 1e-300)).max() >= 0.5
    csr = times_power_of_two(sp.csr_matrix(x), 10)
    assert sp.issparse(csr) and csr.nnz == sp.csr_matrix(x).nnz
    np.testing.assert_array_equal(times_power_of_two(csr, -10).toarray(), x)
