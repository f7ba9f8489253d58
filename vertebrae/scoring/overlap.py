"""OverlapIndex class-separation scoring through the real ``overlapindex`` package.

The backend is fixed to MiniBatchKMeans and always seeded (``kmeans_kwargs["random_state"] = seed``);
labels cross into OverlapIndex as semantic-key strings and come back translated through the catalog.

Automatic k per class c with n_c rows: ``k_c = clip(n_c // min_samples_per_cluster, min_k, max_k)``.
Requested or inferred, k is then capped at ``max(min(2, n_c), n_c // min_samples_per_cluster)`` so each
prototype keeps ``min_samples_per_cluster`` rows where the class allows it; every reduction is a warning.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp

from vertebrae.core.errors import LabelError, ValidationError
from vertebrae.core.fingerprint import to_json_value
from vertebrae.core.labels import LabelCatalog, _parse_key, semantic_key
from vertebrae.data.labelled import as_matrix, check_finite, encode_row_ids

FORBIDDEN_KMEANS_KWARGS = ("n_clusters", "random_state")


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


def _positive_int(value: Any, field_name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValidationError(f"OverlapScoringConfig.{field_name} must be a positive integer, got {value!r}")
    return int(value)


@dataclass(frozen=True)
class OverlapScoringConfig:
    """MiniBatchKMeans-facing settings of OverlapIndex scoring (spec/scoring.md)."""

    k: Any = "auto"
    min_k: int = 10
    max_k: int = 50
    min_samples_per_cluster: int = 5
    kmeans_kwargs: Mapping[str, Any] = field(default_factory=dict)
    offline_chunk_size: int | None = 10_000
    normalize_embeddings: bool = True
    exclude_classes: Any = None
    max_dense_bytes: int = 2_000_000_000

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
        if not isinstance(self.normalize_embeddings, bool):
            raise ValidationError(f"OverlapScoringConfig.normalize_embeddings must be a bool, got {self.normalize_embeddings!r}")
        if not isinstance(self.kmeans_kwargs, Mapping):
            raise ValidationError("OverlapScoringConfig.kmeans_kwargs must be a mapping")
        for name in FORBIDDEN_KMEANS_KWARGS:
            if name in self.kmeans_kwargs:
                hint = "pass seed= to the scorer" if name == "random_state" else "use k"
                raise ValidationError(f"OverlapScoringConfig.kmeans_kwargs may not set {name!r}; {hint}")
        to_json_value(dict(self.kmeans_kwargs), "OverlapScoringConfig.kmeans_kwargs")
        object.__setattr__(self, "kmeans_kwargs", dict(self.kmeans_kwargs))
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
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> OverlapScoringConfig:
        unknown = set(data) - set(cls.__dataclass_fields__)
        if unknown:
            raise ValidationError(f"unknown OverlapScoringConfig fields: {sorted(unknown)}")
        data = dict(data)
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


@dataclass(frozen=True)
class OverlapScoreResult:
    """OverlapIndex diagnostics; class keys are semantic keys, ``labels`` maps them to display text."""

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

    def to_dict(self) -> dict[str, Any]:
        return {name: to_json_value(getattr(self, name)) for name in self.__dataclass_fields__}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> OverlapScoreResult:
        return cls(**{name: data[name] for name in cls.__dataclass_fields__})


def l2_normalize(matrix: np.ndarray | sp.csr_matrix) -> np.ndarray | sp.csr_matrix:
    """Row-wise L2 normalisation (zero rows stay zero); CSR stays CSR."""
    from sklearn.preprocessing import normalize

    return normalize(matrix, norm="l2", axis=1, copy=True)


class OverlapIndexScorer:
    """The one adapter between vertebrae and ``overlapindex.OverlapIndex``."""

    def __init__(self, config: OverlapScoringConfig | None = None) -> None:
        self.config = config or OverlapScoringConfig()

    def score(self, embeddings: Any, labels: Sequence[Any], *, seed: int = 0, row_ids: Sequence[Any] | None = None) -> OverlapScoreResult:
        """Score typed single-label targets; labels go through a fresh semantic label catalog."""
        matrix = as_matrix(embeddings, what="embeddings")
        labels = list(labels.tolist() if isinstance(labels, np.ndarray) else labels)
        if len(labels) != matrix.shape[0]:
            raise ValidationError(f"embeddings have {matrix.shape[0]} rows but {len(labels)} labels were given")
        catalog = LabelCatalog.from_values(labels)
        keys = encode_row_ids(row_ids, matrix.shape[0], what="embeddings")
        return self.score_encoded(matrix, catalog.encode(labels), catalog, seed=seed, row_ids=keys)

    def score_encoded(
        self,
        embeddings: np.ndarray | sp.csr_matrix,
        label_keys: np.ndarray,
        catalog: LabelCatalog,
        *,
        seed: int,
        row_ids: Sequence[str],
    ) -> OverlapScoreResult:
        """Score rows whose labels are already semantic keys of ``catalog``."""
        from importlib.metadata import version

        from overlapindex import OverlapIndex

        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
            raise ValidationError(f"seed must be a non-negative integer, got {seed!r}")
        config = self.config
        matrix = as_matrix(embeddings, what="embeddings")
        check_finite(matrix, row_ids, what="embeddings")
        counts = {key: int(np.count_nonzero(label_keys == key)) for key in catalog.keys}
        present = [key for key in catalog.keys if counts[key] > 0]
        if len(present) < 2:
            raise ValidationError(f"class separation needs at least 2 classes, got {[catalog.display(k) for k in present]}")
        k_per_class, messages = resolve_k(config, catalog, counts)
        excluded = sorted({_resolve_label(catalog, label, "exclude_classes") for label in config.exclude_classes or ()})
        if len(excluded) == len(present):
            raise ValidationError("exclude_classes excludes every class; nothing is left to aggregate")
        input_sparse = sp.issparse(matrix)
        scored = l2_normalize(matrix) if config.normalize_embeddings else matrix
        kmeans_kwargs = {**config.kmeans_kwargs, "random_state": int(seed)}
        index = OverlapIndex(
            model_type="MiniBatchKMeans",
            kmeans_k=dict(k_per_class),
            kmeans_kwargs=kmeans_kwargs,
            offline_chunk_size=config.offline_chunk_size,
            exclude_classes=excluded or None,
        )
        targets = np.asarray(label_keys, dtype=object)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            index.fit(scored, targets)
        messages += [f"overlapindex: {w.message}" for w in caught]
        classes = [str(key) for key in index.singleton_index]
        per_class = {key: float(index.singleton_index[key]) for key in classes}
        pairwise = {a: {b: float(index.pairwise_index[(a, b)]) for b in classes if b != a} for a in classes}
        adjacency: dict[str, dict[str, int]] = {}
        for (a, b), hits in sorted(index.sparse_adj.items(), key=lambda item: (str(item[0][0]), str(item[0][1]))):
            adjacency.setdefault(str(a), {})[str(b)] = int(hits)
        unevaluable = {str(key) for key in getattr(index, "unevaluable_labels_", ())}
        aggregation = [key for key in catalog.keys if key in per_class and key not in excluded and key not in unevaluable]
        return OverlapScoreResult(
            score=float(index.index),
            macro_score=float(index.index),
            weighted_score=float(index.weighted_index),
            per_class_scores=per_class,
            pairwise_scores=pairwise,
            sparse_adjacency=adjacency,
            class_counts=counts,
            k_per_class=k_per_class,
            aggregation_classes=aggregation,
            labels={key: catalog.display(key) for key in catalog.keys},
            warnings=messages,
            metadata={
                "backend": "MiniBatchKMeans",
                "overlapindex_version": version("overlapindex"),
                "seed": int(seed),
                "normalize_embeddings": config.normalize_embeddings,
                "offline_chunk_size": config.offline_chunk_size,
                "kmeans_kwargs": to_json_value(kmeans_kwargs),
                "input_sparse": input_sparse,
                "n_rows": int(matrix.shape[0]),
                "n_dimensions": int(matrix.shape[1]),
                "excluded_classes": excluded,
            },
        )
