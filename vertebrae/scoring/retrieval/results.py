"""Retrieval result documents: one direction (``RetrievalResult``) and the run (``RetrievalScore``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from vertebrae.core.errors import ArtifactError, ValidationError
from vertebrae.core.fingerprint import to_json_value
from vertebrae.scoring.retrieval.config import RetrievalConfig

RETRIEVAL_SCORE_SCHEMA = "vertebrae.retrieval-score/v1"
RETRIEVAL_RESULT_SCHEMA = "vertebrae.retrieval-result/v1"


def _artifact_config(data: Any, expected: RetrievalConfig | None, where: str) -> RetrievalConfig:
    if not isinstance(data, Mapping):
        raise ArtifactError(f"{where}: config must be a mapping, got {type(data).__name__}")
    try:
        config = RetrievalConfig.from_dict(data)
    except ValidationError as exc:
        raise ArtifactError(f"{where}: invalid recorded config: {exc}") from None
    if expected is not None:
        if not isinstance(expected, RetrievalConfig):
            raise ValidationError(f"expected_config must be a RetrievalConfig, got {type(expected).__name__}")
        recorded, wanted = config.to_dict(), expected.to_dict()
        diffs = [f"{key}: recorded {recorded[key]!r}, expected {wanted[key]!r}"
                 for key in wanted if recorded[key] != wanted[key]]
        if diffs:
            raise ArtifactError(f"{where}: retrieval config mismatch ({'; '.join(diffs)})")
    return config


_INT_COLUMNS = ("n_positives", "first_rank")
_BOOL_COLUMNS = ("tie",)


def _column(name: str, values: Any) -> np.ndarray:
    """A per-query column as an array: int64, bool, or float64 with NaN for null."""
    if name in _INT_COLUMNS:
        return np.asarray(values, dtype=np.int64)
    if name in _BOOL_COLUMNS:
        return np.asarray(values, dtype=bool)
    if isinstance(values, np.ndarray):
        return values.astype(np.float64, copy=False)
    return np.array([np.nan if v is None else v for v in values], dtype=np.float64)


@dataclass(frozen=True, eq=False)
class RetrievalResult:
    """One direction's metrics (``metrics``: plain means of ``per_query`` over queries) and diagnostics.

    ``per_query`` maps every metric, and n_positives, first_rank, best_positive_similarity,
    nearest_negative_similarity and margin (NaN, null in JSON, without eligible negatives) and tie (a rank
    was decided by an exactly equal score), to one numpy array over the queries. ``summaries``:
    mean/median/min/max/count of positive similarity (all positive pairs), nearest-negative similarity and
    margin. Equality compares the ``to_dict`` documents.
    """

    direction: str
    config: RetrievalConfig
    score: float
    metrics: dict[str, float]
    per_query: dict[str, np.ndarray]
    query_ids: list[str]
    n_queries: int
    n_gallery: int
    n_positive_pairs: int
    n_queries_with_ties: int
    n_queries_without_negatives: int
    summaries: dict[str, Any]
    worst_queries: list[dict[str, Any]]
    warnings: list[str]
    metadata: dict[str, Any]

    def __post_init__(self) -> None:
        if self.direction not in ("forward", "reverse"):
            raise ValidationError(f"RetrievalResult.direction must be 'forward' or 'reverse', got {self.direction!r}")
        if not isinstance(self.config, RetrievalConfig):
            raise ValidationError(f"RetrievalResult.config must be a RetrievalConfig, got {type(self.config).__name__}")
        names = set(self.config.metric_names())
        if set(self.metrics) != names:
            raise ValidationError(f"RetrievalResult.metrics must hold exactly {sorted(names)}, got {sorted(self.metrics)}")
        if float(self.score) != float(self.metrics[self.config.primary_metric]):
            raise ValidationError("RetrievalResult.score must equal metrics[config.primary_metric]")
        missing = names - set(self.per_query)
        if missing:
            raise ValidationError(f"RetrievalResult.per_query lacks {sorted(missing)}")
        columns = {name: _column(name, values) for name, values in self.per_query.items()}
        for name, column in columns.items():
            if column.shape != (self.n_queries,):
                raise ValidationError(f"RetrievalResult.per_query[{name!r}] holds {column.shape} values for "
                                      f"{self.n_queries} queries")
        object.__setattr__(self, "per_query", columns)
        if len(self.query_ids) != self.n_queries:
            raise ValidationError(f"RetrievalResult.query_ids holds {len(self.query_ids)} ids for {self.n_queries} queries")

    @property
    def primary_metric(self) -> str:
        return self.config.primary_metric

    def to_dict(self) -> dict[str, Any]:
        doc = {name: getattr(self, name) for name in self.__dataclass_fields__ if name not in ("config", "per_query")}
        per_query = {name: [None if v != v else v for v in column.tolist()]  # NaN -> null
                     for name, column in self.per_query.items()}
        return {"schema": RETRIEVAL_RESULT_SCHEMA, "config": self.config.to_dict(), **to_json_value(doc),
                "per_query": to_json_value(per_query, "$.per_query")}

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RetrievalResult) and self.to_dict() == other.to_dict()

    __hash__ = None  # type: ignore[assignment]

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, expected_config: RetrievalConfig | None = None) -> RetrievalResult:
        if not isinstance(data, Mapping):
            raise ArtifactError(f"retrieval result must be a mapping, got {type(data).__name__}")
        if data.get("schema") != RETRIEVAL_RESULT_SCHEMA:
            raise ArtifactError(f"retrieval result has schema {data.get('schema')!r}, expected {RETRIEVAL_RESULT_SCHEMA!r}")
        missing = [name for name in cls.__dataclass_fields__ if name not in data]
        if missing:
            raise ArtifactError(f"retrieval result lacks fields {missing}")
        config = _artifact_config(data["config"], expected_config, f"{data.get('direction', '?')} retrieval result")
        try:
            return cls(**{name: data[name] for name in cls.__dataclass_fields__ if name != "config"}, config=config)
        except (ValidationError, TypeError, KeyError, ValueError, AttributeError) as exc:
            raise ArtifactError(f"malformed retrieval result: {exc}") from None


@dataclass(frozen=True, eq=False)
class RetrievalScore:
    """Forward result, the reverse one (bidirectional) and ``primary_score`` = their primary scores' mean
    (forward alone when not bidirectional)."""

    forward: RetrievalResult
    reverse: RetrievalResult | None
    primary_score: float

    def __post_init__(self) -> None:
        if not isinstance(self.forward, RetrievalResult) or self.forward.direction != "forward":
            raise ValidationError("RetrievalScore.forward must be a forward RetrievalResult")
        if self.forward.config.bidirectional != (self.reverse is not None):
            raise ValidationError("RetrievalScore.reverse must be present exactly when the config is bidirectional")
        if self.reverse is not None:
            if not isinstance(self.reverse, RetrievalResult) or self.reverse.direction != "reverse":
                raise ValidationError("RetrievalScore.reverse must be a reverse RetrievalResult")
            if self.reverse.config != self.forward.config:
                raise ValidationError("RetrievalScore.forward and reverse were scored under different configs")
        expected = self.forward.score if self.reverse is None else (self.forward.score + self.reverse.score) / 2.0
        if float(self.primary_score) != expected:
            raise ValidationError(f"RetrievalScore.primary_score {self.primary_score!r} is not the mean of the "
                                  f"directions' primary scores ({expected!r})")
        object.__setattr__(self, "primary_score", float(self.primary_score))

    @property
    def config(self) -> RetrievalConfig:
        return self.forward.config

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RetrievalScore) and self.to_dict() == other.to_dict()

    __hash__ = None  # type: ignore[assignment]

    @property
    def score(self) -> float:
        return self.primary_score

    @property
    def primary_metric(self) -> str:
        return self.config.primary_metric

    @property
    def metrics(self) -> dict[str, float]:
        """The forward metrics."""
        return self.forward.metrics

    @property
    def warnings(self) -> list[str]:
        return list(self.forward.warnings) + (list(self.reverse.warnings) if self.reverse is not None else [])

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": RETRIEVAL_SCORE_SCHEMA,
            "config": self.config.to_dict(),
            "primary_metric": self.primary_metric,
            "primary_score": self.primary_score,
            "forward": self.forward.to_dict(),
            "reverse": None if self.reverse is None else self.reverse.to_dict(),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, expected_config: RetrievalConfig | None = None) -> RetrievalScore:
        """Rebuild a score document; with ``expected_config``, a document scored under another config is
        refused (ArtifactError naming every differing field)."""
        if not isinstance(data, Mapping):
            raise ArtifactError(f"retrieval score must be a mapping, got {type(data).__name__}")
        if data.get("schema") != RETRIEVAL_SCORE_SCHEMA:
            raise ArtifactError(f"retrieval score has schema {data.get('schema')!r}, expected {RETRIEVAL_SCORE_SCHEMA!r}")
        for key in ("config", "primary_score", "forward", "reverse"):
            if key not in data:
                raise ArtifactError(f"retrieval score lacks {key!r}")
        config = _artifact_config(data["config"], expected_config, "retrieval score")
        forward = RetrievalResult.from_dict(data["forward"], expected_config=config)
        reverse = None if data["reverse"] is None else RetrievalResult.from_dict(data["reverse"], expected_config=config)
        try:
            return cls(forward, reverse, data["primary_score"])
        except (ValidationError, TypeError) as exc:
            raise ArtifactError(f"malformed retrieval score: {exc}") from None
