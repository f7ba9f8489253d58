"""Paired compression against independent computations.

Fitted methods are compared with the scikit-learn estimator fitted directly on the reference (or numpy SVD);
quantization with hand-worked 3x3 matrices; the no-op rule, sparsity, dtypes and config errors directly.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.decomposition import PCA, IncrementalPCA, TruncatedSVD
from sklearn.random_projection import GaussianRandomProjection, SparseRandomProjection

from vertebrae.compression import (
    EmbeddingCompressionConfig as Config,
    compress_pair,
    fit_paired_compression,
    variant_name,
)
from vertebrae.core.errors import ValidationError
from vertebrae.core.fingerprint import canonical_json

ALWAYS = {"enabled", "method", "applied", "original_dim", "compressed_dim", "input_sparse", "output_sparse",
          "dtype", "warnings", "recipe"}


@pytest.fixture()
def pair():
    """A 60x10 reference with decaying column scales and a 7x10 paired endpoint."""
    rng = np.random.default_rng(0)
    scales = np.array([5.0, 4.0, 3.0, 2.0, 1.5, 1.0, 0.5, 0.3, 0.2, 0.1])
    return rng.normal(size=(60, 10)) * scales, rng.normal(size=(7, 10)) * scales


@pytest.fixture()
def sparse_pair():
    reference = sp.random(50, 12, density=0.3, format="csr", random_state=1)
    other = sp.random(6, 12, density=0.3, format="csr", random_state=2)
    return reference, other


# ------------------------------------------------------------------------------------------ fitted methods


@pytest.mark.parametrize("whiten", [False, True])
def test_pca_paired_transform_equals_sklearn_fitted_on_reference(pair, whiten):
    reference, other = pair
    fitted = fit_paired_compression(reference, Config(method="pca", n_components=4, whiten=whiten))
    oracle = PCA(n_components=4, whiten=whiten, random_state=0).fit(reference)
    np.testing.assert_allclose(fitted.transform(other), oracle.transform(other), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(fitted.compressed_reference, oracle.transform(reference), rtol=1e-10, atol=1e-12)
    # explained variance by numpy SVD of the centred reference
    s = np.linalg.svd(reference - reference.mean(axis=0), compute_uv=False)
    meta = fitted.metadata
    assert meta["explained_variance_ratio_sum"] == pytest.approx((s[:4] ** 2).sum() / (s**2).sum(), rel=1e-10)
    assert meta["applied"] is True and meta["compressed_dim"] == 4 and meta["original_dim"] == 10
    assert meta["resident_bytes"] == 60 * 4 * 8 and meta["compression_ratio"] == pytest.approx(10 / 4)
    assert meta["dtype"] == "float64" and meta["output_sparse"] is False


def test_pca_transform_is_not_refitted_on_the_paired_endpoint(pair):
    reference, other = pair
    fitted = fit_paired_compression(reference, Config(method="pca", n_components=3))
    refit_on_other = PCA(n_components=3).fit(other).transform(other)
    assert not np.allclose(np.abs(fitted.transform(other)), np.abs(refit_on_other))


@pytest.mark.parametrize("fraction", [0.3, 0.6, 0.8, 0.95, 0.999])
def test_preserve_variance_picks_the_smallest_k_reaching_the_fraction(pair, fraction):
    reference, other = pair
    s = np.linalg.svd(reference - reference.mean(axis=0), compute_uv=False)
    cumulative = np.cumsum(s**2) / (s**2).sum()
    expected_k = next(i + 1 for i, c in enumerate(cumulative) if c >= fraction)
    fitted = fit_paired_compression(reference, Config(method="pca", preserve_variance=fraction))
    assert fitted.compressed_dim == expected_k
    assert fitted.metadata["explained_variance_ratio_sum"] >= fraction
    oracle = PCA(n_components=expected_k, svd_solver="full").fit(reference)
    np.testing.assert_allclose(fitted.transform(other), oracle.transform(other), rtol=1e-10, atol=1e-12)


def test_preserve_variance_reaching_exactly_counts():
    # two orthogonal directions with equal variance: explained ratios are exactly 0.5, 0.5, 0
    reference = np.array([[1.0, 0, 0], [-1, 0, 0], [0, 1, 0], [0, -1, 0]])
    fitted = fit_paired_compression(reference, Config(method="pca", preserve_variance=0.5))
    assert fitted.compressed_dim == 1


def test_incremental_pca_equals_sklearn(pair):
    reference, other = pair
    fitted = fit_paired_compression(reference, Config(method="incremental_pca", n_components=3, batch_size=20))
    oracle = IncrementalPCA(n_components=3, batch_size=20).fit(reference)
    np.testing.assert_allclose(fitted.transform(other), oracle.transform(other), rtol=1e-10, atol=1e-12)
    assert fitted.metadata["explained_variance_ratio_sum"] == pytest.approx(oracle.explained_variance_ratio_.sum())


def test_truncated_svd_accepts_sparse_and_outputs_dense(sparse_pair):
    reference, other = sparse_pair
    fitted = fit_paired_compression(reference, Config(method="truncated_svd", n_components=5, random_state=3))
    oracle = TruncatedSVD(n_components=5, random_state=3).fit(reference)
    out = fitted.transform(other)
    assert isinstance(out, np.ndarray) and out.shape == (6, 5)
    np.testing.assert_allclose(out, oracle.transform(other), rtol=1e-10, atol=1e-12)
    meta = fitted.metadata
    assert meta["input_sparse"] is True and meta["output_sparse"] is False
    assert meta["explained_variance_ratio_sum"] == pytest.approx(oracle.explained_variance_ratio_.sum())


def test_gaussian_random_projection_equals_sklearn_and_is_seeded(pair):
    reference, other = pair
    fitted = fit_paired_compression(reference, Config(method="gaussian_random_projection", n_components=4,
                                                      random_state=7))
    oracle = GaussianRandomProjection(n_components=4, random_state=7).fit(reference)
    np.testing.assert_allclose(fitted.transform(other), oracle.transform(other), rtol=1e-12)
    again = fit_paired_compression(reference, Config(method="gaussian_random_projection", n_components=4,
                                                     random_state=7))
    np.testing.assert_array_equal(again.transform(other), fitted.transform(other))
    other_seed = fit_paired_compression(reference, Config(method="gaussian_random_projection", n_components=4,
                                                          random_state=8))
    assert not np.allclose(other_seed.transform(other), fitted.transform(other))


def test_sparse_random_projection_keeps_csr(sparse_pair):
    reference, other = sparse_pair
    config = Config(method="sparse_random_projection", n_components=4, random_state=5)
    fitted = fit_paired_compression(reference, config)
    out = fitted.transform(other)
    assert sp.issparse(fitted.compressed_reference) and fitted.compressed_reference.format == "csr"
    assert sp.issparse(out) and out.format == "csr" and out.shape == (6, 4)
    oracle = SparseRandomProjection(n_components=4, dense_output=False, random_state=5).fit(reference)
    np.testing.assert_allclose(out.toarray(), oracle.transform(other).toarray(), rtol=1e-12)
    assert fitted.metadata["output_sparse"] is True
    ref = fitted.compressed_reference
    assert fitted.metadata["resident_bytes"] == ref.data.nbytes + ref.indices.nbytes + ref.indptr.nbytes
    dense = fit_paired_compression(reference.toarray(), config)
    assert isinstance(dense.compressed_reference, np.ndarray)
    np.testing.assert_allclose(dense.compressed_reference, ref.toarray(), rtol=1e-12)


# ------------------------------------------------------------------------------------------ prefix truncation


@pytest.mark.parametrize("sparse", [False, True])
def test_prefix_truncate_keeps_prefix_sparsity_and_dtype(sparse):
    rng = np.random.default_rng(2)
    dense = rng.normal(size=(5, 6)).astype(np.float32)
    reference = sp.csr_matrix(dense) if sparse else dense
    fitted = fit_paired_compression(reference, Config(method="prefix_truncate", n_components=2))
    out = fitted.compressed_reference
    assert sp.issparse(out) == sparse and out.dtype == np.float32
    np.testing.assert_array_equal(out.toarray() if sparse else out, dense[:, :2])
    (warning,) = fitted.metadata["warnings"]
    assert "Matryoshka" in warning
    quiet = fit_paired_compression(reference, Config(method="prefix_truncate", n_components=2, assume_matryoshka=True))
    assert quiet.metadata["warnings"] == []


# ------------------------------------------------------------------------------------------ quantization


def test_int8_hand_worked():
    reference = np.array([[127.0, -254.0, 0.0], [-63.4, 100.0, 0.0], [10.0, 0.0, 0.0]])
    fitted = fit_paired_compression(reference, Config(method="quantize", precision="int8"))
    # scale = (127, 254, 0 -> 1); codes col0 = 127, -63, 10; col1 = -127, 50, 0; col2 = 0
    expected = np.array([[127, -254, 0], [-63, 100, 0], [10, 0, 0]], dtype=np.float32)
    out = fitted.compressed_reference
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, expected)
    meta = fitted.metadata
    assert meta["calibration"] == {"scale": [127.0, 254.0, 1.0]}
    assert meta["resident_bytes"] == 9 and meta["compression_ratio"] == 8.0 and meta["compressed_dim"] == 3
    # paired endpoint uses the reference calibration: +-300 clip to codes +-127; 128 -> code 64 -> 128;
    # 0.6 -> code 76 -> 76 / 127; -1 -> code -127 -> -1
    paired = fitted.transform(np.array([[300.0, 128.0, 0.6], [-300.0, -254.0, -1.0]]))
    expected = np.array([[127.0, 128.0, 76 / 127], [-127.0, -254.0, -1.0]], dtype=np.float32)
    np.testing.assert_array_equal(paired, expected)


def test_int8_keeps_csr_and_zero():
    reference = np.array([[127.0, -254.0, 0.0], [-63.4, 100.0, 0.0], [10.0, 0.0, 0.0]])
    fitted = fit_paired_compression(sp.csr_matrix(reference), Config(method="quantize", precision="int8"))
    out = fitted.compressed_reference
    assert sp.issparse(out) and out.format == "csr" and out.dtype == np.float32 and out.nnz == 5
    np.testing.assert_array_equal(out.toarray(), [[127, -254, 0], [-63, 100, 0], [10, 0, 0]])
    assert fitted.metadata["calibration"] == {"scale": [127.0, 254.0, 1.0]}


def test_uint8_hand_worked():
    reference = np.array([[0.0, 10.0, 3.0], [255.0, 20.0, 3.0], [51.0, 10.0, 3.0]])
    fitted = fit_paired_compression(reference, Config(method="quantize", precision="uint8"))
    # min = (0, 10, 3), range = (255, 10, 0 -> 1): every reference value is exactly representable
    np.testing.assert_array_equal(fitted.compressed_reference, reference.astype(np.float32))
    assert fitted.compressed_reference.dtype == np.float32
    assert fitted.metadata["calibration"] == {"min": [0.0, 10.0, 3.0], "range": [255.0, 10.0, 1.0]}
    # -5 clips to code 0; (14 - 10) / 10 * 255 = code 102 -> 14; (3.2 - 3) * 255 -> code 51 -> 3 + 51/255
    paired = fitted.transform(np.array([[-5.0, 14.0, 3.2]]))
    np.testing.assert_array_equal(paired, np.array([[0.0, 14.0, 3 + 51 / 255]], dtype=np.float32))
    with pytest.raises(ValidationError, match="sparse"):
        fit_paired_compression(sp.csr_matrix(reference), Config(method="quantize", precision="uint8"))


def test_float16_round_trip(pair):
    reference, other = pair
    fitted = fit_paired_compression(reference, Config(method="quantize", precision="float16"))
    peak = np.abs(reference).max()  # float16 codes of x / P: the grid follows any multiple of the reference

    def expected(x):
        return ((x / peak).astype(np.float16).astype(np.float64) * peak).astype(np.float32)

    assert fitted.compressed_reference.dtype == np.float32
    np.testing.assert_array_equal(fitted.compressed_reference, expected(reference))
    assert not np.array_equal(fitted.compressed_reference, reference.astype(np.float32))
    np.testing.assert_array_equal(fitted.transform(other), expected(other))
    assert fitted.metadata["calibration"] == {"scale": float(peak)}
    assert fitted.metadata["resident_bytes"] == 60 * 10 * 2 and fitted.metadata["compression_ratio"] == 4.0
    with pytest.raises(ValidationError, match="float16 range"):
        fitted.transform(np.full((1, 10), 70000.0 * peak))


# ------------------------------------------------------------------------------------------ no-op rule


NOOP_METHODS = ["pca", "incremental_pca", "truncated_svd", "gaussian_random_projection",
                "sparse_random_projection", "prefix_truncate"]


@pytest.mark.parametrize("method", NOOP_METHODS)
@pytest.mark.parametrize("sparse", [False, True])
def test_noop_when_n_components_reaches_width(method, sparse):
    rng = np.random.default_rng(4)
    dense = rng.normal(size=(8, 10)).astype(np.float32)
    reference = sp.csr_matrix(dense) if sparse else dense
    other = sp.csr_matrix(dense[:3]) if sparse else dense[:3].copy()
    config = Config(method=method, n_components=12)
    fitted = fit_paired_compression(reference, config)
    for before, after in ((reference, fitted.compressed_reference), (other, fitted.transform(other))):
        assert sp.issparse(after) == sparse and after.dtype == np.float32
        if sparse:
            assert after.format == "csr" and (after != before).nnz == 0
        else:
            np.testing.assert_array_equal(after, before)
    meta = fitted.metadata
    assert meta["applied"] is False and meta["compressed_dim"] == meta["original_dim"] == 10
    assert meta["output_sparse"] == sparse and meta["dtype"] == "float32"
    assert "resident_bytes" not in meta
    (warning,) = meta["warnings"]
    assert "12" in warning and "10" in warning
    assert config.variant_suffix() == f"{method}_12"
    canonical_json(meta)


def test_noop_at_exact_width_keeps_same_object(pair):
    reference, _ = pair
    fitted = fit_paired_compression(reference, Config(method="pca", n_components=10))
    assert fitted.compressed_reference is reference and fitted.applied is False


@pytest.mark.parametrize("config", [Config(method="none"), Config(enabled=False),
                                    Config(enabled=False, method="truncated_svd", n_components=2), None])
def test_identity_configs(pair, config):
    reference, other = pair
    fitted = fit_paired_compression(reference, config)
    assert fitted.compressed_reference is reference and fitted.transform(other) is other
    assert fitted.metadata["applied"] is False and fitted.metadata["warnings"] == []
    assert ALWAYS <= set(fitted.metadata)


# ------------------------------------------------------------------------------------------ refusals


def test_width_mismatch_names_both_widths(pair):
    reference, _ = pair
    fitted = fit_paired_compression(reference, Config(method="pca", n_components=3))
    with pytest.raises(ValidationError, match=r"9 dimensions.*10-dimensional"):
        fitted.transform(np.zeros((2, 9)))


def test_pca_refuses_sparse_and_suggests_alternatives(sparse_pair):
    reference, _ = sparse_pair
    with pytest.raises(ValidationError, match="truncated_svd or sparse_random_projection"):
        fit_paired_compression(reference, Config(method="pca", n_components=3))
    fitted = fit_paired_compression(reference.toarray(), Config(method="pca", n_components=3))
    with pytest.raises(ValidationError, match="Paired embeddings are sparse"):
        fitted.transform(reference)


@pytest.mark.parametrize("method", ["pca", "truncated_svd"])
def test_fewer_rows_than_components_refused(method):
    reference = np.random.default_rng(0).normal(size=(3, 10))
    with pytest.raises(ValidationError, match=r"n_components=5.*have 3"):
        fit_paired_compression(reference, Config(method=method, n_components=5))


@pytest.mark.parametrize("method", ["pca", "incremental_pca"])
def test_zero_variance_reference_refused_for_pca(method):
    with pytest.raises(ValidationError, match="zero variance"):
        fit_paired_compression(np.ones((5, 4)), Config(method=method, n_components=2))


def test_non_finite_input_refused(pair):
    reference, other = pair
    bad = reference.copy()
    bad[4, 2] = np.nan
    with pytest.raises(ValidationError, match="Reference embeddings.*index 4"):
        fit_paired_compression(bad, Config(method="pca", n_components=2))
    fitted = fit_paired_compression(reference, Config(method="quantize"))
    other = other.copy()
    other[1, 0] = np.inf
    with pytest.raises(ValidationError, match="index 1"):
        fitted.transform(other)


def test_compress_pair(pair):
    reference, other = pair
    config = Config(method="pca", n_components=2)
    compressed, (paired,), meta = compress_pair(reference, [other], config)
    oracle = PCA(n_components=2).fit(reference)
    np.testing.assert_allclose(paired, oracle.transform(other), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(compressed, oracle.transform(reference), rtol=1e-10, atol=1e-12)
    assert meta["recipe"] == config.to_dict()
    with pytest.raises(ValidationError, match="sequence of matrices"):
        compress_pair(reference, other, config)


# ------------------------------------------------------------------------------------------ config


@pytest.mark.parametrize(("kwargs", "field_name"), [
    ({"method": "umap", "n_components": 2}, "method"),
    ({"method": "pca"}, "n_components"),
    ({"method": "truncated_svd"}, "n_components"),
    ({"method": "pca", "n_components": 0}, "n_components"),
    ({"method": "pca", "n_components": True}, "n_components"),
    ({"method": "pca", "n_components": 2, "preserve_variance": 0.9}, "n_components"),
    ({"method": "pca", "preserve_variance": 1.0}, "preserve_variance"),
    ({"method": "truncated_svd", "preserve_variance": 0.5}, "preserve_variance"),
    ({"method": "truncated_svd", "n_components": 2, "whiten": True}, "whiten"),
    ({"method": "quantize", "precision": "int4"}, "precision"),
    ({"method": "quantize", "n_components": 4}, "n_components"),
    ({"method": "pca", "n_components": 2, "random_state": -1}, "random_state"),
    ({"method": "pca", "n_components": 2, "batch_size": 10}, "batch_size"),
    ({"method": "incremental_pca", "n_components": 8, "batch_size": 4}, "batch_size"),
    ({"enabled": "yes", "method": "none"}, "enabled"),
    ({"method": "none", "assume_matryoshka": 1}, "assume_matryoshka"),
])
def test_config_errors_name_the_field(kwargs, field_name):
    with pytest.raises(ValidationError, match=rf"EmbeddingCompressionConfig\.{field_name}\b"):
        Config(**kwargs)


@pytest.mark.parametrize("config", [
    Config(method="pca", preserve_variance=0.9, whiten=True),
    Config(method="incremental_pca", n_components=8, batch_size=64),
    Config(method="quantize", precision="uint8"),
    Config(method="prefix_truncate", n_components=32, assume_matryoshka=True, random_state=3),
])
def test_to_dict_from_dict_round_trip(config):
    data = config.to_dict()
    assert Config.from_dict(data) == config
    assert canonical_json(data)
    with pytest.raises(ValidationError, match="unknown EmbeddingCompressionConfig fields.*bogus"):
        Config.from_dict({**data, "bogus": 1})


def test_variant_suffix_and_name():
    assert Config(method="pca", n_components=16).variant_suffix() == "pca_16"
    assert Config(method="pca", preserve_variance=0.9).variant_suffix() == "pca_var0.9"
    assert Config(method="pca", n_components=16, whiten=True).variant_suffix() == "pca_16_whiten"
    assert Config(method="truncated_svd", n_components=64).variant_suffix() == "truncated_svd_64"
    assert Config(method="quantize").variant_suffix() == "quantize_int8"
    assert variant_name("pixels", Config(method="pca", n_components=16)) == "pixels[pca_16]"
    assert variant_name("pixels", Config(method="prefix_truncate", n_components=32)) == "pixels[prefix_truncate_32]"
    assert variant_name("pixels", Config(enabled=False)) == "pixels"
    assert variant_name("pixels", None) == "pixels"


@pytest.mark.parametrize("config", [
    Config(method="pca", n_components=3),
    Config(method="pca", preserve_variance=0.7, whiten=True),
    Config(method="incremental_pca", n_components=3),
    Config(method="truncated_svd", n_components=3),
    Config(method="gaussian_random_projection", n_components=3),
    Config(method="sparse_random_projection", n_components=3),
    Config(method="prefix_truncate", n_components=3),
    Config(method="quantize", precision="float16"),
    Config(method="quantize", precision="int8"),
    Config(method="quantize", precision="uint8"),
])
def test_metadata_is_canonical_json_and_complete(pair, config):
    reference, _ = pair
    meta = fit_paired_compression(reference, config).metadata
    canonical_json(meta)
    assert ALWAYS <= set(meta) and {"resident_bytes", "compression_ratio"} <= set(meta)
    assert meta["applied"] is True and meta["recipe"] == config.to_dict()
    assert ("explained_variance_ratio_sum" in meta) == (config.method in {"pca", "incremental_pca", "truncated_svd"})
    assert ("calibration" in meta) == (config.method == "quantize")


# ---------------------------------------------------------------------------------------------------------
# dtype: the established library's name for the quantization precision


def _compressed_fp(config: Config) -> str:
    from vertebrae.core.fingerprint import fingerprint

    return fingerprint("compressed", {"embedding": "e" * 64, "fit_endpoint": "samples", "compression": config.to_dict()})


def test_dtype_is_the_quantization_precision_with_unchanged_fingerprints(pair):
    from dataclasses import replace

    by_dtype = Config(method="quantize", dtype="float16")
    assert by_dtype == Config(method="quantize", precision="float16") and by_dtype.precision == by_dtype.dtype == "float16"
    assert by_dtype.to_dict() == Config(method="quantize", precision="float16").to_dict() and "dtype" not in by_dtype.to_dict()
    # golden fingerprints, computed without dtype: equivalent configs keep them (schema compressed-embedding/v2, the
    # scale rule of issue 48; under v1 they were 059f7d96aedecac1, 6ac90f06284422f2 and d54723c45b0d55a9)
    assert _compressed_fp(by_dtype) == "28b2783a9d8d6a7f"
    assert _compressed_fp(Config(method="quantize")) == _compressed_fp(Config(method="quantize", dtype="int8")) == "6d513c3a278c52d3"
    assert _compressed_fp(Config(method="pca", n_components=8)) == "e033f0ed78f4eea0"
    assert Config(method="quantize", dtype=np.uint8) == Config(method="quantize", dtype=np.dtype("uint8")) == Config(
        method="quantize", precision="uint8")
    assert Config(method="quantize", precision="int8", dtype="int8").precision == "int8"  # both, agreeing
    assert Config.from_dict(by_dtype.to_dict()) == by_dtype
    assert replace(by_dtype, precision="uint8").precision == "uint8" and replace(by_dtype, random_state=3).dtype == "float16"
    reference, other = pair
    a = fit_paired_compression(reference, by_dtype).transform(other)
    b = fit_paired_compression(reference, Config(method="quantize", precision="float16")).transform(other)
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("kwargs, message", [
    ({"method": "quantize", "dtype": "float16", "precision": "int8"}, "dtype ('float16') and precision ('int8') disagree"),
    ({"method": "quantize", "dtype": "float64"}, "dtype (the quantization precision) must be one of float16, int8, uint8"),
    ({"method": "quantize", "dtype": 3}, "got 3"),
    ({"method": "pca", "n_components": 4, "dtype": "float16"}, "applies to method 'quantize' only, not 'pca'"),
])
def test_bad_or_conflicting_dtype_is_refused_naming_the_field(kwargs, message):
    with pytest.raises(ValidationError, match="EmbeddingCompressionConfig.dtype") as info:
        Config(**kwargs)
    assert message in str(info.value)
