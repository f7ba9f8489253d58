"""Paired, label-free embedding compression (pure functions, no I/O).

A compressor is fitted on the reference endpoint only (labelled samples, zero-shot samples, the retrieval
gallery); the same fitted transform then applies to every paired endpoint of the same width (prompts,
queries). Labels never enter. Methods (``EmbeddingCompressionConfig.method``):

* ``none`` -- identity.
* ``pca`` -- sklearn ``PCA``, dense only; ``n_components``, or ``preserve_variance`` = the smallest k whose
  cumulative explained variance ratio is >= the fraction (then refitted with ``svd_solver="full"``); ``whiten``.
* ``incremental_pca`` -- sklearn ``IncrementalPCA(batch_size=...)``, dense only.
* ``truncated_svd`` -- sklearn ``TruncatedSVD`` (no centring); dense or sparse in, dense out.
* ``gaussian_random_projection`` -- dense out. ``sparse_random_projection`` -- ``dense_output=False``: CSR in
  stays CSR, dense in stays dense.
* ``prefix_truncate`` -- the first ``n_components`` columns; no fit; sparsity and dtype kept; warns unless
  ``assume_matryoshka``.
* ``quantize`` -- the scored values are exactly what the storage keeps (calibration from the reference; ``rint``
  rounds half to even), as float32 while the reference's largest |value| lies within 2**+-100 and as float64 beyond
  (float32 could not hold them):

  - float16: ``P = max_ij |x_ij|`` (0 -> 1), ``code = float16(x / P)``, value ``code * P`` (calibration ``scale``:
    P); a paired value beyond 65504 P is refused;
  - int8: ``scale_j = max_i |x_ij|`` (0 -> 1), ``code = clip(rint(x / scale * 127), -127, 127)``,
    value ``code * scale / 127``;
  - uint8: ``min_j``, ``range_j = max_j - min_j`` (0 -> 1), ``code = clip(rint((x - min) / range * 255), 0, 255)``,
    value ``code * range / 255 + min``.

  float16 and int8 keep CSR (zero stays exactly zero); uint8 is dense only.

**Scale rule** (as for every scorer, docs/protocols/labelled.md): where the reference's largest |value| lies
outside [2**-100, 2**100) (``core.arrays.is_ordinary``), a fitted method fits on the reference times ``2**-e``,
``e`` the binary exponent of that value (``core.arrays.peak_exponent``), applies the fit to each endpoint times the
same ``2**-e`` and scales the output back by ``2**e`` (whitened PCA, whose output has unit variance, is not scaled
back). ``np.ldexp`` makes both exact. Inside the band nothing over- or underflows and the reference is used as given
(no copy: the fit and its output are exactly those of the plain estimator). So a multiple of an embedding by any
positive factor between 1e-300 and 1e300 (subnormal values included) compresses to that multiple of its
compression, up to the rounding of the multiple itself: no overflow, underflow or "zero variance" from the scale
alone. Quantization is calibrated on the reference
(per-column max, min and range, or ``P``), so it follows any multiple too. ``estimator`` is the scikit-learn object
fitted on the scaled reference.

**No-op rule**: ``n_components >= reference width`` for a dimension-reducing method leaves every endpoint as it
is (same object; values, sparsity, dtype kept), ``applied=False``, with a warning naming both widths.
Randomized methods are seeded with ``random_state``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np
import scipy.sparse as sp

from vertebrae.core.arrays import is_ordinary, peak_exponent, peak_magnitude, times_power_of_two
from vertebrae.core.errors import ValidationError
from vertebrae.core.fingerprint import to_json_value
from vertebrae.core.records import check_bool, from_record, is_int, is_real

METHODS = (
    "none", "pca", "incremental_pca", "truncated_svd", "gaussian_random_projection",
    "sparse_random_projection", "prefix_truncate", "quantize",
)
#: Methods that reduce the dimension to ``n_components`` (and so obey the no-op rule).
REDUCING_METHODS = METHODS[1:7]
PRECISIONS = ("float16", "int8", "uint8")
_CFG = "EmbeddingCompressionConfig"
_REFERENCE = "Reference embeddings"

Matrix = Any  # np.ndarray | scipy.sparse CSR


def _invalid(name: str, message: str) -> ValidationError:
    return ValidationError(f"{_CFG}.{name} {message}")


def _int_value(value: Any, name: str, *, minimum: int, maximum: int | None = None) -> int:
    if not is_int(value) or value < minimum or (maximum is not None and value > maximum):
        bound = f"in [{minimum}, {maximum}]" if maximum is not None else f">= {minimum}"
        raise _invalid(name, f"must be an integer {bound}, got {value!r}")
    return int(value)


def _dtype_name(value: Any) -> Any:
    """``dtype`` as a precision name: strings as given, NumPy dtypes and scalar types by their name."""
    if value is None or isinstance(value, str):
        return value
    try:
        return np.dtype(value).name
    except TypeError:
        return value


def _precision(precision: Any, dtype: Any, method: Any) -> Any:
    """The quantization precision from ``precision`` and its alias ``dtype`` (default int8)."""
    if dtype is None:
        return "int8" if precision is None else precision
    name = _dtype_name(dtype)
    if not isinstance(name, str) or name not in PRECISIONS:
        raise _invalid("dtype", f"(the quantization precision) must be one of {', '.join(PRECISIONS)}; got {dtype!r}")
    if method != "quantize":
        raise _invalid("dtype", f"is the quantization precision and applies to method 'quantize' only, not {method!r}")
    if precision is not None and precision != name:
        raise _invalid("dtype", f"({name!r}) and precision ({precision!r}) disagree; dtype is another name for "
                       "precision: give one of them")
    return name


@dataclass(frozen=True, init=False)
class EmbeddingCompressionConfig:
    """One compression recipe, validated at construction (errors name the field).

    ``n_components`` is required by every dimension-reducing method except ``pca``, which takes exactly one of
    ``n_components`` and ``preserve_variance`` (a fraction in (0, 1)). ``whiten`` is pca only, ``batch_size``
    incremental_pca only (>= n_components), ``precision`` is read by quantize only, ``assume_matryoshka`` by
    prefix_truncate only. With ``enabled=False`` the run is the identity and the method's required fields
    may be left out.

    ``dtype`` is the established library's name for ``precision`` (method quantize only; a NumPy dtype is accepted
    too): ``EmbeddingCompressionConfig(method="quantize", dtype="float16")`` equals the config with
    ``precision="float16"`` (same ``to_dict``, same fingerprints); giving both with different values is refused.
    It is not a field of its own (``to_dict`` and fingerprints are unchanged); ``config.dtype`` reads ``precision``.
    """

    enabled: bool = True
    method: str = "pca"
    n_components: int | None = None
    preserve_variance: float | None = None
    whiten: bool = False
    precision: str = "int8"
    assume_matryoshka: bool = False
    random_state: int = 0
    batch_size: int | None = None

    def __init__(self, enabled: bool = True, method: str = "pca", n_components: int | None = None,
                 preserve_variance: float | None = None, whiten: bool = False, precision: str | None = None,
                 assume_matryoshka: bool = False, random_state: int = 0, batch_size: int | None = None, *,
                 dtype: Any = None) -> None:
        values = {"enabled": enabled, "method": method, "n_components": n_components,
                  "preserve_variance": preserve_variance, "whiten": whiten,
                  "precision": _precision(precision, dtype, method), "assume_matryoshka": assume_matryoshka,
                  "random_state": random_state, "batch_size": batch_size}
        for name, value in values.items():
            object.__setattr__(self, name, value)
        self.__post_init__()

    @property
    def dtype(self) -> str:
        """The quantization precision (``precision``), under the established library's name."""
        return self.precision

    def __post_init__(self) -> None:
        for name in ("enabled", "whiten", "assume_matryoshka"):
            check_bool(getattr(self, name), _CFG, name, error=ValidationError)
        if not isinstance(self.method, str) or self.method not in METHODS:
            raise _invalid("method", f"must be one of {', '.join(METHODS)}; got {self.method!r}")
        if not isinstance(self.precision, str) or self.precision not in PRECISIONS:
            raise _invalid("precision", f"must be one of {', '.join(PRECISIONS)}; got {self.precision!r}")
        def set_(name: str, value: Any) -> None:
            object.__setattr__(self, name, value)

        if self.n_components is not None:
            set_("n_components", _int_value(self.n_components, "n_components", minimum=1))
        if self.batch_size is not None:
            set_("batch_size", _int_value(self.batch_size, "batch_size", minimum=1))
        set_("random_state", _int_value(self.random_state, "random_state", minimum=0, maximum=2**32 - 1))
        pv = self.preserve_variance
        if pv is not None:
            if not is_real(pv) or not 0 < pv < 1:
                raise _invalid("preserve_variance", f"must be a fraction strictly between 0 and 1, got {pv!r}")
            set_("preserve_variance", float(pv))

        method = self.method
        if self.whiten and method != "pca":
            raise _invalid("whiten", f"applies to method 'pca' only, not {method!r}")
        if self.preserve_variance is not None and method != "pca":
            raise _invalid("preserve_variance", f"applies to method 'pca' only, not {method!r}")
        if self.batch_size is not None and method != "incremental_pca":
            raise _invalid("batch_size", f"applies to method 'incremental_pca' only, not {method!r}")
        if self.n_components is not None and method not in REDUCING_METHODS:
            raise _invalid("n_components", f"does not apply to method {method!r}")
        if method == "pca" and self.n_components is not None and self.preserve_variance is not None:
            raise _invalid("n_components", "and preserve_variance are exclusive for method 'pca'; give one")
        if self.enabled and method in REDUCING_METHODS and self.n_components is None and self.preserve_variance is None:
            either = " (or preserve_variance)" if method == "pca" else ""
            raise _invalid("n_components", f"is required{either} for method {method!r}")
        if self.batch_size is not None and self.n_components is not None and self.batch_size < self.n_components:
            raise _invalid("batch_size", f"({self.batch_size}) must be >= n_components ({self.n_components})")

    @property
    def active_method(self) -> str:
        """The method that actually runs: ``"none"`` when disabled."""
        return self.method if self.enabled else "none"

    def to_dict(self) -> dict[str, Any]:
        """Every field, as plain JSON data."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> EmbeddingCompressionConfig:
        """Inverse of ``to_dict``; unknown fields are refused."""
        return from_record(cls, data, error=ValidationError)

    def variant_suffix(self) -> str:
        """Short variant label: ``pca_16``, ``pca_var0.9``, ``pca_16_whiten``, ``truncated_svd_64``,
        ``quantize_int8``; ``none`` when disabled. Keeps the requested dimension even for a no-op."""
        method = self.active_method
        if method == "none":
            return "none"
        if method == "quantize":
            return f"quantize_{self.precision}"
        size = f"var{self.preserve_variance!r}" if self.n_components is None else str(self.n_components)
        return f"{method}_{size}" + ("_whiten" if self.whiten else "")


def variant_name(extractor_name: str, config: EmbeddingCompressionConfig | None) -> str:
    """``pixels[pca_16]``; the bare extractor name when ``config`` is None, disabled or ``none``."""
    suffix = "none" if config is None else config.variant_suffix()
    return extractor_name if suffix == "none" else f"{extractor_name}[{suffix}]"


# ---------------------------------------------------------------------------------------------- validation


def _as_matrix(values: Any, what: str) -> Matrix:
    """A non-empty, finite, numeric 2-D matrix: CSR (format changed only if needed) or ndarray (dtype kept)."""
    if sp.issparse(values):
        matrix = values if values.format == "csr" else values.tocsr()
        data = matrix.data
    else:
        matrix = np.asarray(values)
        data = matrix
    if matrix.ndim != 2:
        raise ValidationError(f"{what} must be a 2-D matrix (rows x dimensions), got shape {matrix.shape}")
    if matrix.dtype.kind not in "biuf":
        raise ValidationError(f"{what} must be numeric, got dtype {matrix.dtype}")
    if 0 in matrix.shape:
        raise ValidationError(f"{what} are empty (shape {matrix.shape})")
    if data.dtype.kind == "f" and not np.isfinite(data).all():
        if sp.issparse(matrix):
            rows = np.repeat(np.arange(matrix.shape[0]), np.diff(matrix.indptr))[~np.isfinite(data)]
        else:
            rows = np.flatnonzero(~np.isfinite(matrix).all(axis=1))
        rows = np.unique(rows)
        shown = ", ".join(map(str, rows[:10])) + (", ..." if rows.size > 10 else "")
        raise ValidationError(f"{what}: {rows.size} row(s) contain NaN or infinite values: index {shown}")
    return matrix


def _dense_only(matrix: Matrix, method: str, what: str) -> None:
    if sp.issparse(matrix):
        hint = ("use truncated_svd or sparse_random_projection for sparse embeddings" if method != "quantize uint8"
                else "zero would not stay zero; float16 and int8 keep sparse embeddings exact")
        raise ValidationError(f"{what} are sparse but {method} needs dense input; {hint}")


def _check_output(out: Matrix, method: str, what: str) -> Matrix:
    data = out.data if sp.issparse(out) else out
    if not np.isfinite(data).all():
        raise ValidationError(f"{method} produced non-finite values for {what}")
    return out


def _resident_bytes(matrix: Matrix, itemsize: int | None = None) -> int:
    """Bytes as stored: dense values, or CSR data + indices + indptr (values at ``itemsize`` if given)."""
    if sp.issparse(matrix):
        values = matrix.nnz * (itemsize or matrix.dtype.itemsize)
        return int(values + matrix.indices.nbytes + matrix.indptr.nbytes)
    return int(matrix.size * (itemsize or matrix.dtype.itemsize))


# ---------------------------------------------------------------------------------------------- fitters
# Each takes (reference, config) and returns (apply(matrix, what) -> matrix, estimator, extra metadata,
# warnings, stored itemsize or None).


def _enough_rows(reference: Matrix, k: int, method: str) -> None:
    if reference.shape[0] < k:
        raise ValidationError(
            f"{method} with n_components={k} needs at least {k} reference rows; "
            f"{_REFERENCE} have {reference.shape[0]}"
        )


def _nonzero_variance(reference: np.ndarray, method: str) -> None:
    if not np.var(reference, axis=0, dtype=np.float64).sum() > 0:
        raise ValidationError(f"{_REFERENCE} have zero variance (all rows identical); {method} is undefined")


def _unit_peak(reference: Matrix) -> tuple[Matrix, int]:
    """The reference scaled by ``2**-e`` (exact) so that its largest |value| lies in [0.5, 1), and ``e``; the
    reference itself and 0 where its magnitude is ordinary (``core.arrays.is_ordinary``: no copy, nothing to
    over- or underflow). Every fit runs on it (module docstring, scale rule)."""
    exponent = peak_exponent(reference)
    if is_ordinary(exponent):
        return reference, 0
    return times_power_of_two(reference, -exponent), exponent


def _sklearn_apply(estimator: Any, method: str, exponent: int, *, dense_only: bool,
                   scale_back: bool = True) -> Callable[[Matrix, str], Matrix]:
    """``transform`` of an estimator fitted on the reference scaled by ``2**-exponent``: the input is scaled by the
    same power of two and, for a linear map (``scale_back``), the output by its inverse, both exact."""
    def apply(matrix: Matrix, what: str) -> Matrix:
        if dense_only:
            _dense_only(matrix, method, what)
        out = estimator.transform(times_power_of_two(matrix, -exponent))
        out = out.tocsr() if sp.issparse(out) else out
        if scale_back:
            with np.errstate(over="ignore"):  # an overflow is refused by _check_output, naming the endpoint
                out = times_power_of_two(out, exponent)
        return _check_output(out, method, what)

    return apply


def _variance_ratio(estimator: Any, method: str) -> tuple[dict[str, Any], list[str]]:
    total = float(np.sum(estimator.explained_variance_ratio_))
    if np.isfinite(total):
        return {"explained_variance_ratio_sum": total}, []
    return {"explained_variance_ratio_sum": None}, [f"{method}: explained variance ratio undefined (zero variance)"]


def _fit_pca(reference: Matrix, config: EmbeddingCompressionConfig):
    from sklearn.decomposition import PCA

    _dense_only(reference, "pca", _REFERENCE)
    reference, exponent = _unit_peak(reference)
    _nonzero_variance(reference, "pca")
    if config.preserve_variance is not None:
        spectrum = PCA(svd_solver="full").fit(reference).explained_variance_ratio_
        cumulative = np.cumsum(spectrum)
        k = min(int(np.searchsorted(cumulative, config.preserve_variance, side="left")) + 1, len(cumulative))
        solver = "full"
    else:
        k, solver = config.n_components, "auto"
        _enough_rows(reference, k, "pca")
    estimator = PCA(n_components=k, whiten=config.whiten, svd_solver=solver, random_state=config.random_state)
    estimator.fit(reference)
    extra, warns = _variance_ratio(estimator, "pca")
    extra["svd_solver"] = solver
    # whitened components have unit variance whatever the scale: only the plain projection is scaled back
    apply = _sklearn_apply(estimator, "pca", exponent, dense_only=True, scale_back=not config.whiten)
    return apply, estimator, extra, warns, None


def _fit_incremental_pca(reference: Matrix, config: EmbeddingCompressionConfig):
    from sklearn.decomposition import IncrementalPCA

    _dense_only(reference, "incremental_pca", _REFERENCE)
    _enough_rows(reference, config.n_components, "incremental_pca")
    reference, exponent = _unit_peak(reference)
    _nonzero_variance(reference, "incremental_pca")
    estimator = IncrementalPCA(n_components=config.n_components, batch_size=config.batch_size).fit(reference)
    extra, warns = _variance_ratio(estimator, "incremental_pca")
    extra["batch_size"] = int(estimator.batch_size_)
    return _sklearn_apply(estimator, "incremental_pca", exponent, dense_only=True), estimator, extra, warns, None


def _fit_truncated_svd(reference: Matrix, config: EmbeddingCompressionConfig):
    from sklearn.decomposition import TruncatedSVD

    _enough_rows(reference, config.n_components, "truncated_svd")
    reference, exponent = _unit_peak(reference)
    estimator = TruncatedSVD(n_components=config.n_components, random_state=config.random_state)
    with np.errstate(divide="ignore", invalid="ignore"):
        estimator.fit(reference)
    extra, warns = _variance_ratio(estimator, "truncated_svd")
    return _sklearn_apply(estimator, "truncated_svd", exponent, dense_only=False), estimator, extra, warns, None


def _fit_gaussian_rp(reference: Matrix, config: EmbeddingCompressionConfig):
    from sklearn.random_projection import GaussianRandomProjection

    reference, exponent = _unit_peak(reference)
    estimator = GaussianRandomProjection(n_components=config.n_components, random_state=config.random_state)
    estimator.fit(reference)
    apply = _sklearn_apply(estimator, "gaussian_random_projection", exponent, dense_only=False)
    return apply, estimator, {}, [], None


def _fit_sparse_rp(reference: Matrix, config: EmbeddingCompressionConfig):
    from sklearn.random_projection import SparseRandomProjection

    reference, exponent = _unit_peak(reference)
    estimator = SparseRandomProjection(
        n_components=config.n_components, dense_output=False, random_state=config.random_state
    ).fit(reference)
    extra = {"density": float(estimator.density_)}
    apply = _sklearn_apply(estimator, "sparse_random_projection", exponent, dense_only=False)
    return apply, estimator, extra, [], None


def _fit_prefix_truncate(reference: Matrix, config: EmbeddingCompressionConfig):
    k = config.n_components

    def apply(matrix: Matrix, what: str) -> Matrix:
        return matrix[:, :k] if sp.issparse(matrix) else matrix[:, :k].copy()

    warns = [] if config.assume_matryoshka else [
        f"prefix_truncate keeps the first {k} of {reference.shape[1]} dimensions; prefix truncation is only "
        "meaningful for Matryoshka-trained embeddings (set assume_matryoshka=True if the model was trained so)"
    ]
    return apply, None, {}, warns, None


def _map_values(matrix: Matrix, fn: Callable[[np.ndarray, np.ndarray | slice], np.ndarray]) -> Matrix:
    """Apply ``fn(values, columns)`` to dense values, or to CSR stored values (structure kept, zeros dropped)."""
    if not sp.issparse(matrix):
        return fn(matrix, slice(None))
    out = matrix.__class__((fn(matrix.data, matrix.indices), matrix.indices.copy(), matrix.indptr.copy()),
                           shape=matrix.shape)
    out.eliminate_zeros()
    return out


def _stored_dtype(peak: float) -> type:
    """float32 while the largest |value| lies within 2**+-100 (float32 then holds every dequantized value to its own
    rounding), float64 beyond: a multiple of an embedding that float32 cannot hold keeps its values."""
    return np.float32 if peak == 0 or is_ordinary(peak_exponent(np.float64(peak))) else np.float64


def _fit_quantize(reference: Matrix, config: EmbeddingCompressionConfig):
    precision = config.precision
    if precision == "float16":
        peak = peak_magnitude(reference) or 1.0
        dtype = _stored_dtype(peak)

        def float16(values: np.ndarray, columns: Any) -> np.ndarray:
            with np.errstate(over="ignore"):
                codes = (values.astype(np.float64) / peak).astype(np.float16)
            return (codes.astype(np.float64) * peak).astype(dtype)

        def apply(matrix: Matrix, what: str) -> Matrix:
            out = _map_values(matrix, float16)
            if not np.isfinite(out.data if sp.issparse(out) else out).all():
                raise ValidationError(f"{what} hold values beyond the float16 range (|x| > 65504 times the reference's "
                                      f"largest |value|, {peak!r})")
            return out

        return apply, None, {"calibration": {"scale": peak}}, [], 2

    if precision == "int8":
        absolute = abs(reference).max(axis=0)
        scale = np.asarray(absolute.toarray() if sp.issparse(absolute) else absolute, dtype=np.float64).ravel()
        scale[scale == 0] = 1.0
        dtype = _stored_dtype(peak_magnitude(scale))

        def int8(values: np.ndarray, columns: Any) -> np.ndarray:
            codes = np.clip(np.rint(values.astype(np.float64) / scale[columns] * 127), -127, 127)
            return (codes * scale[columns] / 127).astype(dtype)

        def apply(matrix: Matrix, what: str) -> Matrix:
            return _map_values(matrix, int8)

        return apply, None, {"calibration": {"scale": scale.tolist()}}, [], 1

    _dense_only(reference, "quantize uint8", _REFERENCE)
    minimum = reference.min(axis=0).astype(np.float64)
    span = reference.max(axis=0).astype(np.float64) - minimum
    span[span == 0] = 1.0
    dtype = _stored_dtype(peak_magnitude(reference))

    def apply(matrix: Matrix, what: str) -> Matrix:
        _dense_only(matrix, "quantize uint8", what)
        codes = np.clip(np.rint((matrix.astype(np.float64) - minimum) / span * 255), 0, 255)
        return (codes * span / 255 + minimum).astype(dtype)

    return apply, None, {"calibration": {"min": minimum.tolist(), "range": span.tolist()}}, [], 1


_FITTERS = {
    "pca": _fit_pca,
    "incremental_pca": _fit_incremental_pca,
    "truncated_svd": _fit_truncated_svd,
    "gaussian_random_projection": _fit_gaussian_rp,
    "sparse_random_projection": _fit_sparse_rp,
    "prefix_truncate": _fit_prefix_truncate,
    "quantize": _fit_quantize,
}


def _identity(matrix: Matrix, what: str) -> Matrix:
    return matrix


# ---------------------------------------------------------------------------------------------- public API


@dataclass(frozen=True)
class FittedCompression:
    """A compressor fitted on the reference endpoint.

    ``transform(matrix)`` applies the same fitted transform to any endpoint of width ``original_dim``;
    ``compressed_reference`` is the reference after it; ``metadata`` is JSON-safe (see ``fit_paired_compression``);
    ``estimator`` is the fitted scikit-learn object (fitted on the reference scaled by a power of two: the module
    docstring's scale rule), or None.
    """

    config: EmbeddingCompressionConfig
    original_dim: int
    compressed_dim: int
    applied: bool
    compressed_reference: Matrix = field(repr=False)
    metadata: dict[str, Any] = field(repr=False)
    estimator: Any = field(default=None, repr=False)
    _apply: Callable[[Matrix, str], Matrix] = field(default=_identity, repr=False, compare=False)

    def transform(self, matrix: Any, *, what: str = "Paired embeddings") -> Matrix:
        """The fitted transform of ``matrix`` (named ``what`` in errors); its width must equal the reference's."""
        matrix = _as_matrix(matrix, what)
        if matrix.shape[1] != self.original_dim:
            raise ValidationError(
                f"{what} have {matrix.shape[1]} dimensions but the compression was fitted on "
                f"{self.original_dim}-dimensional reference embeddings"
            )
        return self._apply(matrix, what)


def fit_paired_compression(reference: Any, config: EmbeddingCompressionConfig | None) -> FittedCompression:
    """Fit ``config`` on the reference endpoint (samples / gallery) only.

    ``metadata`` always holds enabled, method, applied, original_dim, compressed_dim, input_sparse,
    output_sparse, dtype (of the compressed reference), warnings, recipe (``config.to_dict()``) and fit_rows;
    when applied also resident_bytes (compressed reference as stored: codes for quantize),
    original_resident_bytes, compression_ratio (original / compressed resident bytes),
    explained_variance_ratio_sum for pca / incremental_pca / truncated_svd, and ``calibration`` for int8
    (``scale``) and uint8 (``min``, ``range``). ``config=None`` means disabled.
    """
    if config is None:
        config = EmbeddingCompressionConfig(enabled=False, method="none")
    if not isinstance(config, EmbeddingCompressionConfig):
        raise ValidationError(f"config must be an {_CFG}, got {type(config).__name__}")
    reference = _as_matrix(reference, _REFERENCE)
    n_rows, width = reference.shape
    method = config.active_method
    metadata: dict[str, Any] = {
        "enabled": config.enabled, "method": config.method, "applied": False,
        "original_dim": width, "compressed_dim": width, "input_sparse": sp.issparse(reference),
        "output_sparse": sp.issparse(reference), "dtype": str(reference.dtype), "warnings": [],
        "recipe": config.to_dict(), "fit_rows": n_rows,
    }
    k = config.n_components
    if method == "none" or (method in REDUCING_METHODS and k is not None and k >= width):
        if method != "none":
            metadata["warnings"].append(
                f"{method} requested n_components={k} but the reference has only {width} dimension(s); "
                "compression is a no-op and the embeddings are kept unchanged"
            )
        return FittedCompression(config, width, width, False, reference, to_json_value(metadata))

    apply, estimator, extra, warns, itemsize = _FITTERS[method](reference, config)
    compressed = apply(reference, _REFERENCE)
    original_bytes, stored_bytes = _resident_bytes(reference), _resident_bytes(compressed, itemsize)
    metadata.update(
        applied=True, compressed_dim=int(compressed.shape[1]), output_sparse=sp.issparse(compressed),
        dtype=str(compressed.dtype), warnings=warns, resident_bytes=stored_bytes,
        original_resident_bytes=original_bytes, compression_ratio=original_bytes / stored_bytes, **extra,
    )
    return FittedCompression(
        config, width, int(compressed.shape[1]), True, compressed, to_json_value(metadata), estimator, apply
    )


def compress_pair(
    reference: Any, others: Sequence[Any], config: EmbeddingCompressionConfig | None
) -> tuple[Matrix, list[Matrix], dict[str, Any]]:
    """Fit on ``reference``, transform each of ``others`` with the same fit: ``(reference', [others'], metadata)``."""
    if isinstance(others, np.ndarray) or sp.issparse(others) or not isinstance(others, Sequence):
        raise ValidationError("compress_pair: others must be a sequence of matrices (e.g. [queries])")
    fitted = fit_paired_compression(reference, config)
    outs = [fitted.transform(other, what=f"Paired embeddings {i}") for i, other in enumerate(others)]
    return fitted.compressed_reference, outs, fitted.metadata
