"""OverlapIndex class-separation scoring through the real ``overlapindex`` package.

The backend is fixed to MiniBatchKMeans and always seeded (``kmeans_kwargs["random_state"] = seed``);
labels cross into OverlapIndex as semantic-key strings and come back translated through the catalog.

Automatic k per class c with n_c rows: ``k_c = clip(n_c // min_samples_per_cluster, min_k, max_k)``.
Requested or inferred, k is then capped at ``max(min(2, n_c), n_c // min_samples_per_cluster)`` so each
prototype keeps ``min_samples_per_cluster`` rows where the class allows it; every reduction is a warning.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np
import scipy.sparse as sp

from vertebrae.core.errors import BudgetError, LabelError, ValidationError
from vertebrae.core.fingerprint import to_json_value
from vertebrae.core.provenance import installed_version
from vertebrae.core.labels import LabelCatalog, _parse_key, semantic_key
from vertebrae.core.records import check_bool, from_record, one_of, positive_int, record_fields, seed_int
from vertebrae.core.arrays import (as_matrix, binary_exponents, check_finite, encode_row_ids, power_of_two_factor,
                                   rescaled, rows_to_unit_peak)
from vertebrae.scoring.degenerate import detect_collapse, is_invalid, warn_collapse
from vertebrae.scoring.kmeans_settings import check_kmeans_kwargs
from vertebrae.scoring.class_sizes import OVERLAP_MIN_ROWS, apply_policy, check_label_pairs, check_policy, label_on_every_row

if TYPE_CHECKING:
    from vertebrae.data.targets import Targets

def _label_list(value: Any) -> tuple[Any, ...]:
    if value is None:
        return ()
    if isinstance(value, (list, tuple, set, frozenset, np.ndarray)):
        return tuple(value)
    return (value,)


class _EncodedLabel(str):
    """A label that already is a canonical semantic key (read back by ``from_dict``); not re-encoded."""


def _encode_label(label: Any) -> str:
    return str(label) if isinstance(label, _EncodedLabel) else semantic_key(label)


def _decode_label(label: Any) -> Any:
    """Mark a canonical semantic key from a ``to_dict`` document so that ``to_dict`` writes it unchanged."""
    if isinstance(label, str):
        try:
            _parse_key(label)
        except LabelError:
            return label
        return _EncodedLabel(label)
    return label


def _positive_int(value: Any, field_name: str, owner: str = "OverlapScoringConfig") -> int:
    return positive_int(value, owner, field_name, error=ValidationError)


@dataclass(frozen=True)
class OverlapScoringConfig:
    """MiniBatchKMeans-facing settings of OverlapIndex scoring."""

    k: Any = "auto"
    min_k: int = 10
    max_k: int = 50
    min_samples_per_cluster: int = 5
    kmeans_kwargs: Mapping[str, Any] = field(default_factory=dict)
    offline_chunk_size: int | None = 10_000
    normalize_embeddings: bool = True
    exclude_classes: Any = None
    max_dense_bytes: int = 2_000_000_000
    small_classes: str = "refuse"

    def __post_init__(self) -> None:
        if isinstance(self.k, Mapping):
            if not self.k:
                raise ValidationError("OverlapScoringConfig.k mapping is empty")
            object.__setattr__(self, "k", {label: _positive_int(v, f"k[{label!r}]") for label, v in self.k.items()})
        elif self.k != "auto":
            object.__setattr__(self, "k", _positive_int(self.k, "k"))
        _positive_int(self.min_k, "min_k")
        _positive_int(self.max_k, "max_k")
        if self.max_k < self.min_k:
            raise ValidationError(f"OverlapScoringConfig.max_k ({self.max_k}) is below min_k ({self.min_k})")
        _positive_int(self.min_samples_per_cluster, "min_samples_per_cluster")
        if self.offline_chunk_size is not None:
            _positive_int(self.offline_chunk_size, "offline_chunk_size")
        _positive_int(self.max_dense_bytes, "max_dense_bytes")
        check_policy(self.small_classes, "OverlapScoringConfig", error=ValidationError)
        check_bool(self.normalize_embeddings, "OverlapScoringConfig", "normalize_embeddings", error=ValidationError)
        object.__setattr__(self, "kmeans_kwargs", check_kmeans_kwargs(self.kmeans_kwargs, "OverlapScoringConfig"))
        object.__setattr__(self, "exclude_classes", _label_list(self.exclude_classes) or None)
        for name, labels in (("exclude_classes", self.exclude_classes or ()),
                             ("k", self.k if isinstance(self.k, Mapping) else ())):
            for label in labels:
                try:
                    semantic_key(label)
                except LabelError as exc:
                    raise ValidationError(f"OverlapScoringConfig.{name}: {exc}") from None

    def to_dict(self) -> dict[str, Any]:
        """JSON form; typed labels in k mappings and exclude_classes become semantic keys."""
        k = {_encode_label(label): v for label, v in self.k.items()} if isinstance(self.k, Mapping) else self.k
        exclude = [_encode_label(label) for label in self.exclude_classes] if self.exclude_classes else None
        return {
            "k": k,
            "min_k": self.min_k,
            "max_k": self.max_k,
            "min_samples_per_cluster": self.min_samples_per_cluster,
            "kmeans_kwargs": to_json_value(self.kmeans_kwargs),
            "offline_chunk_size": self.offline_chunk_size,
            "normalize_embeddings": self.normalize_embeddings,
            "exclude_classes": exclude,
            "max_dense_bytes": self.max_dense_bytes,
            # only when set: a config without it keeps the fingerprint it had before the key existed
            **({"small_classes": self.small_classes} if self.small_classes != "refuse" else {}),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> OverlapScoringConfig:
        data = record_fields(cls, data, error=ValidationError)
        if isinstance(data.get("k"), Mapping):
            data["k"] = {_decode_label(label): v for label, v in data["k"].items()}
        if data.get("exclude_classes") is not None:
            data["exclude_classes"] = [_decode_label(label) for label in _label_list(data["exclude_classes"])]
        return cls(**data)


def _resolve_label(catalog: LabelCatalog, label: Any, what: str) -> str:
    """Catalog key of a typed label, or of a semantic key written by ``to_dict``."""
    if isinstance(label, str) and label in catalog:
        return label
    try:
        return catalog.key_for(label)
    except ValueError:
        known = ", ".join(catalog.display(k) for k in catalog.keys[:10])
        raise ValidationError(f"{what} names class {label!r}, which is not in the dataset (classes: {known})") from None


def check_config_classes(config: OverlapScoringConfig, targets: Targets) -> None:
    """Refuse a ``k`` mapping or ``exclude_classes`` that names a class the targets lack, a ``k`` mapping that misses
    one of their classes, and ``exclude_classes`` that leave nothing to aggregate (at plan time, before any job;
    scoring refuses the same)."""
    catalog = targets.catalog
    if isinstance(config.k, Mapping):
        named = {_resolve_label(catalog, label, "OverlapScoringConfig.k") for label in config.k}
        missing = [catalog.display(key) for key in catalog.keys if key not in named]
        if missing:
            raise ValidationError(f"OverlapScoringConfig.k mapping lacks classes: {missing}")
    excluded = {_resolve_label(catalog, label, "exclude_classes") for label in config.exclude_classes or ()}
    if excluded and len(excluded) >= len(catalog.keys):
        raise ValidationError("exclude_classes excludes every class; nothing is left to aggregate")


def check_separable(config: OverlapScoringConfig, targets: Targets) -> tuple[list[str], list[str]]:
    """Refuse targets with fewer than 2 classes present, classes too small for a prototype (``small_classes``),
    and multi-label targets in which no label occurs without the others (at plan time, as scoring refuses them);
    returns ``aggregate_exclusions``."""
    catalog, counts = targets.catalog, targets.counts()
    present = [key for key in catalog.keys if counts[key] > 0]
    if len(present) < 2:
        raise ValidationError(f"class separation needs at least 2 classes, got {[catalog.display(k) for k in present]}")
    excluded, messages = aggregate_exclusions(config, targets)
    if targets.target_type == "multilabel":
        check_label_pairs(targets.values, catalog, present, excluded)
    return excluded, messages


def aggregate_exclusions(config: OverlapScoringConfig, targets: Targets) -> tuple[list[str], list[str]]:
    """``(class keys left out of the macro and weighted aggregation, warnings)``: ``exclude_classes`` as named and,
    with ``small_classes: exclude``, the classes of fewer than ``OVERLAP_MIN_ROWS`` rows (``class_sizes``; refused
    by name otherwise); a warning for each multi-label label carried by every row."""
    catalog, counts = targets.catalog, targets.counts()
    named = sorted({_resolve_label(catalog, label, "exclude_classes") for label in config.exclude_classes or ()})
    small, messages = apply_policy(config.small_classes, counts, OVERLAP_MIN_ROWS, catalog.display,
                                   what=f"OverlapIndex needs at least {OVERLAP_MIN_ROWS}", key="scoring.small_classes",
                                   already=named)
    if targets.target_type == "multilabel":
        messages += label_on_every_row(counts, targets.n_rows, catalog.display)
    excluded = sorted({*named, *small})
    if len(excluded) >= sum(1 for n in counts.values() if n > 0):
        raise ValidationError("exclude_classes excludes every class; nothing is left to aggregate")
    return excluded, messages


def resolve_k(config: OverlapScoringConfig, catalog: LabelCatalog, counts: Mapping[str, int]) -> tuple[dict[str, int], list[str]]:
    """Per-class k and the warnings of every reduction (see module docstring)."""
    if isinstance(config.k, Mapping):
        requested = {_resolve_label(catalog, label, "OverlapScoringConfig.k"): k for label, k in config.k.items()}
        missing = [catalog.display(key) for key in catalog.keys if key not in requested]
        if missing:
            raise ValidationError(f"OverlapScoringConfig.k mapping lacks classes: {missing}")
    elif config.k == "auto":
        per = config.min_samples_per_cluster
        requested = {key: int(np.clip(counts[key] // per, config.min_k, config.max_k)) for key in catalog.keys}
    else:
        requested = {key: config.k for key in catalog.keys}
    resolved, messages = {}, []
    for key in catalog.keys:
        n = counts[key]
        cap = max(min(2, n), n // config.min_samples_per_cluster)
        resolved[key] = min(requested[key], cap)
        if resolved[key] < requested[key]:
            messages.append(
                f"k reduced for small class {catalog.display(key)!r}: {requested[key]} -> {resolved[key]} "
                f"({n} rows, min_samples_per_cluster={config.min_samples_per_cluster})"
            )
    return resolved, messages


def _summary(values: Sequence[float]) -> dict[str, float] | None:
    arr = np.asarray(list(values), dtype=np.float64)
    if arr.size == 0:
        return None
    return {"mean": float(arr.mean()), "std": float(arr.std()), "min": float(arr.min()), "max": float(arr.max())}


@dataclass(frozen=True)
class ContinuousOverlapScoringConfig:
    """ContinuousOverlapIndex settings for explicit regression targets.

    ``null_mode`` defaults to ``"refit_permutation"``: overlapindex's ``"auto"`` switches to a fixed-structure
    null for n x n_null_permutations >= 100,000, whose null loss is too small and collapses the score to ~0
    even for a target the embedding predicts well. The refit null costs about (1 + n_null_permutations) fits.
    """

    k: int = 8
    target_cover: str = "auto"
    n_target_cells: Any = "auto"
    target_distance: str = "auto"
    top_k: int = 5
    n_null_permutations: int = 20
    aggregation: str = "support_weighted"
    null_mode: str = "refit_permutation"
    kmeans_kwargs: Mapping[str, Any] = field(default_factory=dict)
    offline_chunk_size: int | None = 10_000
    normalize_embeddings: bool = True
    max_dense_bytes: int = 2_000_000_000

    def __post_init__(self) -> None:
        name = "ContinuousOverlapScoringConfig"
        choices = {
            "target_cover": ("auto", "quantile", "kmeans"),
            "target_distance": ("auto", "wasserstein", "sliced_wasserstein"),
            "aggregation": ("support_weighted", "macro"),
            "null_mode": ("refit_permutation", "auto", "fixed_structure_permutation"),
        }
        for field_name, allowed in choices.items():
            one_of(getattr(self, field_name), allowed, name, field_name, error=ValidationError)
        for field_name in ("k", "top_k", "n_null_permutations", "max_dense_bytes"):
            _positive_int(getattr(self, field_name), field_name, name)
        if self.n_target_cells != "auto":
            _positive_int(self.n_target_cells, "n_target_cells", name)
        if self.offline_chunk_size is not None:
            _positive_int(self.offline_chunk_size, "offline_chunk_size", name)
        check_bool(self.normalize_embeddings, name, "normalize_embeddings", error=ValidationError)
        object.__setattr__(self, "kmeans_kwargs", check_kmeans_kwargs(self.kmeans_kwargs, name))

    def to_dict(self) -> dict[str, Any]:
        return {name: to_json_value(getattr(self, name)) for name in self.__dataclass_fields__}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ContinuousOverlapScoringConfig:
        return from_record(cls, data, error=ValidationError)


def scoring_config_from_dict(data: Mapping[str, Any], target_type: str) -> OverlapScoringConfig | ContinuousOverlapScoringConfig:
    """The scoring config of a target type from its ``to_dict`` form."""
    if target_type == "regression":
        return ContinuousOverlapScoringConfig.from_dict(data)
    return OverlapScoringConfig.from_dict(data)


@dataclass(frozen=True)
class OverlapScoreResult:
    """OverlapIndex diagnostics; class keys are semantic keys, ``labels`` maps them to display text.

    For regression, class-level fields are empty; ``loss_ratio`` (unbounded, 1.0 = null-equivalent) and
    ``continuous`` (null calibration and prototype summaries) carry the diagnostics.

    ``degeneracy`` is the collapsed-embedding finding (``vertebrae.scoring.degenerate``) of the scored rows, None
    (and absent from ``to_dict``) when they are healthy; ``aggregate_valid`` is False when it marks the score
    meaningless.
    """

    score: float
    macro_score: float
    weighted_score: float
    per_class_scores: dict[str, float]
    pairwise_scores: dict[str, dict[str, float]]
    sparse_adjacency: dict[str, dict[str, int]]
    class_counts: dict[str, int]
    k_per_class: dict[str, int]
    aggregation_classes: list[str]
    labels: dict[str, str]
    warnings: list[str]
    metadata: dict[str, Any]
    target_type: str = "classification"
    loss_ratio: float | None = None
    continuous: dict[str, Any] | None = None
    degeneracy: dict[str, Any] | None = None

    @property
    def aggregate_valid(self) -> bool:
        return not is_invalid(self.degeneracy)

    def to_dict(self) -> dict[str, Any]:
        return {name: to_json_value(getattr(self, name)) for name in self.__dataclass_fields__
                if name != "degeneracy" or self.degeneracy is not None}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> OverlapScoreResult:
        return cls(**{name: data[name] for name in cls.__dataclass_fields__ if name in data})


def l2_normalize(matrix: np.ndarray | sp.csr_matrix) -> np.ndarray | sp.csr_matrix:
    """Row-wise L2 normalisation (zero rows stay zero); CSR stays CSR.

    Each row is first brought to a largest magnitude in [0.5, 1) by a power of two (exact), so the norms neither
    underflow nor overflow whatever the row's scale, and the result equals plain normalisation bit for bit where
    that is representable.
    """
    from sklearn.preprocessing import normalize

    if sp.issparse(matrix):
        csr = sp.csr_matrix(matrix, copy=True)
        exponents = binary_exponents(abs(csr).max(axis=1).toarray().ravel())
        csr.data = np.ldexp(np.asarray(csr.data, dtype=np.float64), -np.repeat(exponents, np.diff(csr.indptr))).astype(csr.dtype)
        return normalize(csr, norm="l2", axis=1, copy=False)
    dense = np.asarray(matrix)
    return normalize(rows_to_unit_peak(dense).astype(dense.dtype, copy=False), norm="l2", axis=1, copy=False)


_PAIR_BYTES = 160  # one class pair: overlapindex's pairwise entries and the result's pairwise_scores (Python objects)


def working_set_bytes(n_classes: int, n_prototypes: int, dim: int, n_rows: int, chunk: int | None) -> int:
    """Estimated peak bytes of labelled OverlapIndex scoring: the class-pair tables (classes^2), the prototypes
    (prototypes x dims, twice), the per-class best scores over prototypes (classes x prototypes) and one chunk of
    row-to-prototype scores (rows x prototypes)."""
    rows = n_rows if chunk is None else min(n_rows, chunk)
    return (n_classes * n_classes * _PAIR_BYTES + 16 * n_prototypes * dim + 8 * n_classes * n_prototypes
            + 16 * rows * n_prototypes)


def admit_classes(config: OverlapScoringConfig, n_classes: int, n_prototypes: int, dim: int, n_rows: int, *,
                  lower_bound: bool = False) -> int:
    """The estimated working set (``working_set_bytes``), refused with a BudgetError naming the classes, the
    prototypes and ``scoring.max_dense_bytes`` when it exceeds that budget (before anything is fitted).
    ``lower_bound``: one prototype a class and no rows, the least any k needs (checked before normalising)."""
    least, prototypes = ("at least ", n_classes) if lower_bound else ("", n_prototypes)
    need = working_set_bytes(n_classes, prototypes, dim, 0 if lower_bound else n_rows, config.offline_chunk_size)
    if need > config.max_dense_bytes:
        raise BudgetError(f"labelled scoring of {n_classes} classes with {least}{prototypes} prototypes in {dim} "
                          f"dimensions needs {least or 'about '}{need:,} bytes, over scoring.max_dense_bytes "
                          f"({config.max_dense_bytes:,}); merge or drop classes, lower k / max_k, or raise it")
    return need


def _check_seed(seed: Any) -> int:
    return seed_int(seed, "OverlapIndexScorer", "seed", error=ValidationError)


class OverlapIndexScorer:
    """The one adapter between vertebrae and ``overlapindex`` (OverlapIndex and ContinuousOverlapIndex).

    ``config`` is an OverlapScoringConfig for classification and multi-label targets and a
    ContinuousOverlapScoringConfig for regression; None means the defaults of the target type.
    """

    def __init__(self, config: OverlapScoringConfig | ContinuousOverlapScoringConfig | None = None) -> None:
        if config is not None and not isinstance(config, (OverlapScoringConfig, ContinuousOverlapScoringConfig)):
            raise ValidationError(f"scoring config must be an OverlapScoringConfig or ContinuousOverlapScoringConfig, got {type(config).__name__}")
        self.config = config

    def config_for(self, target_type: str) -> OverlapScoringConfig | ContinuousOverlapScoringConfig:
        """The effective config for a target type; a config of the wrong kind is refused."""
        wanted = ContinuousOverlapScoringConfig if target_type == "regression" else OverlapScoringConfig
        if self.config is None:
            return wanted()
        if not isinstance(self.config, wanted):
            raise ValidationError(f"{target_type} targets are scored with {wanted.__name__}, got {type(self.config).__name__}")
        return self.config

    def score(
        self,
        embeddings: Any,
        labels: Any,
        *,
        seed: int = 0,
        target_type: str | None = None,
        label_names: Sequence[Any] | None = None,
        target_names: Sequence[str] | None = None,
        row_ids: Sequence[Any] | None = None,
    ) -> OverlapScoreResult:
        """Score raw targets: labels (classification), label sets or an indicator (multilabel), values (regression)."""
        from vertebrae.data.targets import build_targets

        matrix = as_matrix(embeddings, what="embeddings")
        n_targets = labels.shape[0] if hasattr(labels, "shape") else len(labels)
        if n_targets != matrix.shape[0]:
            raise ValidationError(f"embeddings have {matrix.shape[0]} rows but {n_targets} targets were given")
        targets = build_targets(labels, target_type, label_names=label_names, target_names=target_names)
        keys = encode_row_ids(row_ids, matrix.shape[0], what="embeddings")
        return self.score_targets(matrix, targets, seed=seed, row_ids=keys)

    def score_encoded(self, embeddings: Any, label_keys: np.ndarray, catalog: LabelCatalog, *, seed: int, row_ids: Sequence[str]) -> OverlapScoreResult:
        """Score rows whose single labels are already semantic keys of ``catalog``."""
        from vertebrae.data.targets import Targets

        return self.score_targets(embeddings, Targets("classification", np.asarray(label_keys, dtype=object), catalog), seed=seed, row_ids=row_ids)

    def score_targets(self, embeddings: Any, targets, *, seed: int, row_ids: Sequence[str]) -> OverlapScoreResult:
        """Score validated ``vertebrae.data.targets.Targets`` aligned with ``embeddings``."""
        seed = _check_seed(seed)
        config = self.config_for(targets.target_type)
        matrix = as_matrix(embeddings, what="embeddings")
        if targets.n_rows != matrix.shape[0]:
            raise ValidationError(f"embeddings have {matrix.shape[0]} rows but the targets have {targets.n_rows}")
        check_finite(matrix, row_ids, what="embeddings")
        if targets.target_type != "regression":
            present = sum(1 for n in targets.counts().values() if n > 0)
            admit_classes(config, present, present, matrix.shape[1], 0, lower_bound=True)
        # a power-of-two rescale to a largest magnitude in [0.5, 1): k-means and the collapse grid see the same
        # values for an embedding and any positive multiple of it (scale-free scores)
        matrix = rescaled(matrix, power_of_two_factor(matrix))
        scored = l2_normalize(matrix) if config.normalize_embeddings else matrix
        finding = detect_collapse(scored, what="embeddings" + (" (L2-normalised)" if config.normalize_embeddings else ""),
                                  labels=None if targets.target_type == "regression" else targets.values, row_ids=row_ids)
        collapse = warn_collapse(finding)
        metadata = {
            "backend": "MiniBatchKMeans",
            "overlapindex_version": installed_version("overlapindex"),
            "seed": seed,
            "normalize_embeddings": config.normalize_embeddings,
            "offline_chunk_size": config.offline_chunk_size,
            "kmeans_kwargs": {**config.kmeans_kwargs, "random_state": seed},
            "input_sparse": bool(sp.issparse(matrix)),
            "n_rows": int(matrix.shape[0]),
            "n_dimensions": int(matrix.shape[1]),
        }
        if targets.target_type == "regression":
            result = _score_regression(scored, targets, config, seed, metadata)
        else:
            result = _score_categorical(scored, targets, config, seed, metadata)
        if finding is None:
            return result
        return replace(result, warnings=collapse + list(result.warnings), degeneracy=finding.to_dict())


def _finite_or_none(value: Any) -> float | None:
    value = float(value)
    return value if np.isfinite(value) else None


_THREADPOOLS: list[tuple[int, Any]] = []  # (len(sys.modules) when made, threadpoolctl.ThreadpoolController)


def _threadpools() -> Any:
    """threadpoolctl's controller of the loaded thread-pool libraries, made once per process and again only after
    new modules were imported (a new OpenMP runtime, torch's say, is loaded by an import): its scan of the loaded
    shared libraries costs ~2 ms, more than the fit of a small class, and a score job fits hundreds of times."""
    from threadpoolctl import ThreadpoolController

    loaded = len(sys.modules)
    if not _THREADPOOLS or _THREADPOOLS[0][0] != loaded:
        _THREADPOOLS[:] = [(loaded, ThreadpoolController())]
    return _THREADPOOLS[0][1]


def _fit_capturing_warnings(index: Any, X: Any, Y: Any) -> list[str]:
    """Fit ``index`` on one OpenMP thread (BLAS untouched): its k-means runs per class on mini-batches of at most
    1,024 rows, too little work per parallel region to gain from threads; on a busy 2-core machine two OpenMP
    threads made a fit 4-50x slower (2,000 x 64 to 60,000 x 512), with the same score (scikit-learn's k-means
    does not depend on its thread count)."""
    with warnings.catch_warnings(record=True) as caught, _threadpools().limit(limits=1, user_api="openmp"):
        warnings.simplefilter("always")
        index.fit(X, Y)
    return [f"overlapindex: {w.message}" for w in caught]


def _score_categorical(scored, targets, config: OverlapScoringConfig, seed: int, metadata: dict) -> OverlapScoreResult:
    from overlapindex import OverlapIndex

    catalog, counts = targets.catalog, targets.counts()
    present = [key for key in catalog.keys if counts[key] > 0]
    excluded, exclusions = check_separable(config, targets)
    k_per_class, messages = resolve_k(config, catalog, counts)
    admit_classes(config, len(present), sum(k_per_class[key] for key in present), scored.shape[1], scored.shape[0])
    messages += exclusions
    multilabel = targets.target_type == "multilabel"
    # overlapindex names multi-label classes by indicator column; map them back to catalog keys
    to_backend = {key: i for i, key in enumerate(catalog.keys)} if multilabel else {key: key for key in catalog.keys}
    from_backend = {str(v): k for k, v in to_backend.items()}
    index = OverlapIndex(
        model_type="MiniBatchKMeans",
        kmeans_k={to_backend[key]: k for key, k in k_per_class.items() if counts[key] > 0},
        kmeans_kwargs=metadata["kmeans_kwargs"],
        offline_chunk_size=config.offline_chunk_size,
        exclude_classes=[to_backend[key] for key in excluded] or None,
    )
    Y = targets.values if multilabel else np.asarray(targets.values, dtype=object)
    messages += _fit_capturing_warnings(index, scored, Y)
    backend_classes = list(index.singleton_index)
    classes = [from_backend[str(c)] for c in backend_classes]
    per_class = {from_backend[str(c)]: float(index.singleton_index[c]) for c in backend_classes}
    # a pair without evidence rows (a multi-label label nested in another) is undefined: None, not NaN
    pairwise = {
        from_backend[str(a)]: {from_backend[str(b)]: _finite_or_none(index.pairwise_index[(a, b)]) for b in backend_classes if b != a}
        for a in backend_classes
    }
    adjacency: dict[str, dict[str, int]] = {}
    for (a, b), hits in index.sparse_adj.items():
        adjacency.setdefault(from_backend[str(a)], {})[from_backend[str(b)]] = int(hits)
    adjacency = {a: dict(sorted(row.items())) for a, row in sorted(adjacency.items())}
    unevaluable = {from_backend[str(c)] for c in getattr(index, "unevaluable_labels_", ())}
    aggregation = [key for key in catalog.keys if key in per_class and key not in excluded and key not in unevaluable]
    metadata["excluded_classes"] = excluded
    return OverlapScoreResult(
        score=float(index.index),
        macro_score=float(index.index),
        weighted_score=float(index.weighted_index),
        per_class_scores={key: per_class[key] for key in catalog.keys if key in per_class},
        pairwise_scores={key: pairwise[key] for key in classes},
        sparse_adjacency=adjacency,
        class_counts=counts,
        k_per_class=k_per_class,
        aggregation_classes=aggregation,
        labels={key: catalog.display(key) for key in catalog.keys},
        warnings=messages,
        metadata=metadata,
        target_type=targets.target_type,
    )


def _score_regression(scored, targets, config: ContinuousOverlapScoringConfig, seed: int, metadata: dict) -> OverlapScoreResult:
    from overlapindex import ContinuousOverlapIndex

    index = ContinuousOverlapIndex(
        model_type="MiniBatchKMeans",
        kmeans_k=config.k,
        kmeans_kwargs=metadata["kmeans_kwargs"],
        offline_chunk_size=config.offline_chunk_size,
        target_cover=config.target_cover,
        n_target_cells=config.n_target_cells,
        target_distance=config.target_distance,
        top_k=config.top_k,
        null_mode=config.null_mode,
        n_null_permutations=config.n_null_permutations,
        aggregation=config.aggregation,
        random_state=seed,
    )
    values = np.asarray(targets.values, dtype=np.float64)
    messages = _fit_capturing_warnings(index, scored, values * power_of_two_factor(values))  # scale-free targets
    support = index.prototype_support_
    if len(support) >= targets.n_rows:  # e.g. 2 rows: each its own prototype, and the score a meaningless 0.0
        raise ValidationError(f"regression scoring of {targets.n_rows} rows found {len(support)} prototypes: every row "
                              "is a prototype of its own, so the score would describe single rows, not regions (with 2 rows it is 0.0 "
                              "whatever the embedding); add rows "
                              f"or lower scoring.k ({config.k})")
    continuous = {
        "loss_ratio": float(index.loss_ratio_),
        "actual_loss": float(index.actual_loss_),
        "null_loss": float(index.null_loss_),
        "null_mode": str(index.null_mode_),
        "n_null_permutations": config.n_null_permutations,
        "null_loss_samples": _summary(index.null_loss_samples_),
        "target_cover": str(index.target_cover_),
        "target_distance": str(index.target_distance_),
        "n_target_cells": int(len(set(np.asarray(index.target_cell_ids_).tolist()))),
        "n_targets": int(index.n_targets_),
        "target_names": list(targets.names),
        "n_prototypes": int(len(support)),
        "prototype_index": _summary(index.prototype_index_.values()),
        "prototype_support": _summary(support.values()),
        "prototype_loss": _summary(index.prototype_loss_.values()),
        "n_adjacency_edges": int(len(index.prototype_adjacency_)),
    }
    return OverlapScoreResult(
        score=float(index.index),
        macro_score=float(index.macro_index_),
        weighted_score=float(index.weighted_index),
        per_class_scores={}, pairwise_scores={}, sparse_adjacency={}, class_counts={}, k_per_class={},
        aggregation_classes=[], labels={}, warnings=messages, metadata=metadata,
        target_type="regression", loss_ratio=float(index.loss_ratio_), continuous=continuous,
    )
