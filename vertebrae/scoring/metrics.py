"""Custom embedding metrics: one contract for the built-in OverlapIndex, user callables and label retrieval.

A ``Metric`` scores one full embedding batch against validated ``Targets`` and returns a ``MetricResult``: one
finite aggregate ``score`` (the only value eligible for ranking) plus JSON-safe diagnostics, warnings and
metadata. ``recipe()`` is the metric's JSON-safe identity for fingerprints, or None when it has no stable one
(then results must not be cached).

At the callable boundary (``CallableMetric``) labels and groups cross as semantic-key strings, never as user
label objects: classification labels are a 1-D object array of catalog keys (``1`` arrives as ``"@int:1"``,
``"a"`` as ``"a"``), multi-label targets a list with one tuple of keys per row (catalog order), regression
targets the float64 value array, groups a 1-D object array of keys or None. ``target_metadata`` carries
``target_type``, ``label_catalog`` (``LabelCatalog.to_dict()`` or None) and ``target_names``. Embeddings are
passed as they are: CSR stays sparse.

``LabelRetrievalMetric`` is opt-in leave-one-out same-label retrieval for single-label targets, computed by
``scoring.retrieval.label`` with the retrieval metric kernels.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp

from vertebrae.core.callables import callable_path as derive_callable_path, import_callable
from vertebrae.core.errors import ConfigError, ValidationError
from vertebrae.core.fingerprint import to_json_value
from vertebrae.core.records import cutoffs, positive_int
from vertebrae.core.labels import _parse_key, describe_key, semantic_key
from vertebrae.scoring.retrieval.config import SIMILARITIES, RetrievalConfig
from vertebrae.scoring.retrieval.label import label_options, label_retrieval, prepare_rows
from vertebrae.scoring.retrieval.metrics import metric_names, parse_retrieval_metric

__all__ = [
    "CallableMetric",
    "LabelRetrievalMetric",
    "Metric",
    "MetricResult",
    "OverlapMetric",
    "metric_from_config",
]

# --------------------------------------------------------------------------------------------------
# Result


def _finite_score(value: Any, where: str) -> float:
    """``value`` as a finite float; ValidationError (prefixed with ``where``) for anything else."""
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value[()]
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ValidationError(f"{where}: score must be a finite number, got {type(value).__name__} {_short(value)}")
    score = float(value)
    if not math.isfinite(score):
        raise ValidationError(f"{where}: score must be finite, got {score!r}")
    return score


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 120 else text[:120] + "..."


def _json_mapping(value: Any, where: str, what: str) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise ValidationError(f"{where}: {what} must be a mapping, got {type(value).__name__}")
    try:
        return to_json_value(dict(value), what)
    except ValidationError as exc:
        raise ValidationError(f"{where}: {what} must be JSON-safe: {exc}") from None


def _warning_list(value: Any, where: str) -> list[str]:
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
        raise ValidationError(f"{where}: warnings must be a list of strings, got {type(value).__name__}")
    bad = [w for w in value if not isinstance(w, str)]
    if bad:
        raise ValidationError(f"{where}: warnings must be strings, got {_short(bad[0])}")
    return [str(w) for w in value]


@dataclass(frozen=True)
class MetricResult:
    """One metric's outcome: a finite ``score`` plus JSON-safe diagnostics, warnings and metadata.

    ``aggregate_valid=False`` marks a score that must not be ranked (reports leave such results out).
    """

    name: str
    score: float
    aggregate_valid: bool = True
    diagnostics: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValidationError(f"MetricResult.name must be a non-empty string, got {self.name!r}")
        where = f"metric {self.name!r}"
        object.__setattr__(self, "score", _finite_score(self.score, where))
        if not isinstance(self.aggregate_valid, (bool, np.bool_)):
            raise ValidationError(f"{where}: aggregate_valid must be a bool, got {self.aggregate_valid!r}")
        object.__setattr__(self, "aggregate_valid", bool(self.aggregate_valid))
        object.__setattr__(self, "diagnostics", _json_mapping(self.diagnostics, where, "diagnostics"))
        object.__setattr__(self, "warnings", _warning_list(self.warnings, where))
        object.__setattr__(self, "metadata", _json_mapping(self.metadata, where, "metadata"))

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "score": self.score,
            "aggregate_valid": self.aggregate_valid,
            "diagnostics": to_json_value(self.diagnostics),
            "warnings": list(self.warnings),
            "metadata": to_json_value(self.metadata),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> MetricResult:
        if not isinstance(data, Mapping):
            raise ValidationError(f"a MetricResult document must be a mapping, got {type(data).__name__}")
        unknown = sorted(set(data) - set(cls.__dataclass_fields__))
        if unknown:
            raise ValidationError(f"unknown MetricResult fields: {unknown}")
        missing = [name for name in ("name", "score") if name not in data]
        if missing:
            raise ValidationError(f"MetricResult document lacks {missing}")
        return cls(**dict(data))


# --------------------------------------------------------------------------------------------------
# Base class and shared boundary helpers


def _n_rows(embeddings: Any) -> int:
    shape = getattr(embeddings, "shape", None)
    if shape is None or len(shape) != 2:
        raise ValidationError(f"embeddings must be a 2-D matrix (rows x dimensions), got {type(embeddings).__name__}"
                              + (f" of shape {tuple(shape)}" if shape is not None else ""))
    return int(shape[0])


def _row_keys(row_ids: Sequence[str] | None, n: int) -> tuple[str, ...]:
    """Row ids as semantic keys (what ``encode_row_ids`` returns); None means row order."""
    if row_ids is None:
        return tuple(semantic_key(i) for i in range(n))
    keys = tuple(row_ids.tolist() if isinstance(row_ids, np.ndarray) else row_ids)
    if len(keys) != n:
        raise ValidationError(f"{len(keys)} row ids for {n} embedding rows")
    return tuple(k if isinstance(k, str) else semantic_key(k) for k in keys)


def _group_keys(groups: Sequence[Any] | None, n: int) -> np.ndarray | None:
    """Groups as a 1-D object array of semantic keys; strings are taken as keys (``BenchmarkDataset.groups``)."""
    if groups is None:
        return None
    values = list(groups.tolist() if isinstance(groups, np.ndarray) else groups)
    if len(values) != n:
        raise ValidationError(f"{len(values)} groups for {n} rows; give one group per row")
    keys = np.empty(n, dtype=object)
    for i, value in enumerate(values):
        if isinstance(value, str):
            _parse_key(value)  # LabelError for a string that is not a canonical key
            keys[i] = str(value)
        else:
            keys[i] = semantic_key(value)
    return keys


def _check_targets(targets: Any, n: int) -> None:
    from vertebrae.data.targets import Targets

    if not isinstance(targets, Targets):
        raise ValidationError(f"targets must be vertebrae.data.targets.Targets, got {type(targets).__name__}")
    if targets.n_rows != n:
        raise ValidationError(f"embeddings have {n} rows but the targets have {targets.n_rows}")


class Metric:
    """A scorer of one embedding batch. Subclasses set ``name`` and implement ``compute``.

    ``recipe()`` returns the JSON-safe identity used in fingerprints, or None when the metric has no stable
    identity (its results must then not be cached).
    """

    name: str = ""

    def recipe(self) -> dict[str, Any] | None:
        return None

    @property
    def cacheable(self) -> bool:
        return self.recipe() is not None

    def compute(self, embeddings: Any, targets: Any, *, row_ids: Sequence[str] | None,
                groups: Sequence[Any] | None = None, seed: int = 0) -> MetricResult:
        raise NotImplementedError

    def job_folds(self) -> int:
        """How many jobs of its own a fanned-out score runs this metric as, one fold each: 1 (whole). A metric
        answering more implements ``compute_fold`` (one fold's JSON-safe output) and ``combine_folds`` (the result
        ``compute`` returns, from every fold's output)."""
        return 1

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"


def _check_name(name: Any, owner: str) -> str:
    if not isinstance(name, str) or not name.strip():
        raise ConfigError(f"{owner}.name must be a non-empty string, got {name!r}")
    return name


# --------------------------------------------------------------------------------------------------
# OverlapIndex


class OverlapMetric(Metric):
    """The built-in OverlapIndex metric: ``OverlapIndexScorer(config).score_targets``.

    score = ``OverlapScoreResult.score``; diagnostics = the full ``OverlapScoreResult.to_dict()`` (so
    ``OverlapScoreResult.from_dict(result.diagnostics)`` gives the overlap result back).
    """

    name = "overlap"

    def __init__(self, config: Any = None) -> None:
        from vertebrae.scoring.overlap import OverlapIndexScorer

        self.scorer = OverlapIndexScorer(config)  # validates the config type
        self.config = config

    def recipe(self) -> dict[str, Any]:
        config = None if self.config is None else {"class": type(self.config).__name__, **self.config.to_dict()}
        return {"type": "overlap", "config": config}

    def compute(self, embeddings: Any, targets: Any, *, row_ids: Sequence[str] | None,
                groups: Sequence[Any] | None = None, seed: int = 0) -> MetricResult:
        n = _n_rows(embeddings)
        _check_targets(targets, n)
        result = self.scorer.score_targets(embeddings, targets, seed=seed, row_ids=_row_keys(row_ids, n))
        config = self.scorer.config_for(targets.target_type)
        return MetricResult(
            name=self.name,
            score=result.score,
            diagnostics=result.to_dict(),
            warnings=list(result.warnings),
            metadata={"target_type": targets.target_type, "config": config.to_dict()},
        )


# --------------------------------------------------------------------------------------------------
# User callables

_RETURN_KEYS = ("score", "diagnostics", "metadata", "warnings", "aggregate_valid")
class CallableMetric(Metric):
    """A user metric ``fn(embeddings, labels, *, target_metadata=None, groups=None, seed=None)``.

    ``fn`` returns a finite number or a dict with ``"score"`` and optional ``"diagnostics"``, ``"metadata"``
    (JSON-safe mappings), ``"warnings"`` (list of str) and ``"aggregate_valid"`` (bool); anything else is a
    ValidationError naming the metric. See the module docstring for what ``labels`` and ``groups`` hold.

    Identity: ``callable_path="module:function"`` (derived automatically for importable top-level functions)
    lets another process rebuild the metric (``from_path``); ``cache_identity`` (any JSON-safe value) names a
    version of its behaviour. With neither — a lambda, a nested or a ``__main__`` function — ``recipe()`` is None
    and every result carries a not-cacheable warning. ``result.metadata`` adds ``callable_path`` and
    ``cacheable`` to what ``fn`` returned.
    """

    _RESERVED_METADATA = ("callable_path", "cacheable")

    def __init__(self, name: str, fn: Callable[..., Any], *, cache_identity: Any = None,
                 callable_path: str | None = None) -> None:
        self.name = _check_name(name, "CallableMetric")
        if not callable(fn):
            raise ConfigError(f"CallableMetric {name!r}: fn must be callable, got {type(fn).__name__}")
        self.fn = fn
        if cache_identity is not None:
            try:
                cache_identity = to_json_value(cache_identity, "cache_identity")
            except ValidationError as exc:
                raise ConfigError(f"CallableMetric {name!r}: cache_identity must be JSON-safe: {exc}") from None
        self.cache_identity = cache_identity
        if callable_path is not None:
            if import_callable(callable_path) is not fn:
                raise ConfigError(f"CallableMetric {name!r}: callable_path {callable_path!r} names a different object than fn")
        else:
            callable_path = derive_callable_path(fn)
        self.callable_path = callable_path

    @classmethod
    def from_path(cls, path: str, name: str | None = None, *, cache_identity: Any = None) -> CallableMetric:
        """The metric of an importable ``module:function``; ``name`` defaults to the function name."""
        fn = import_callable(path)
        return cls(name if name is not None else path.partition(":")[2].rpartition(".")[2], fn,
                   cache_identity=cache_identity, callable_path=path)

    def recipe(self) -> dict[str, Any] | None:
        if self.callable_path is None and self.cache_identity is None:
            return None
        return {"type": "callable", "name": self.name, "path": self.callable_path, "cache_identity": self.cache_identity}

    def boundary_inputs(self, targets: Any, groups: Sequence[Any] | None) -> tuple[Any, dict[str, Any], np.ndarray | None]:
        """``(labels, target_metadata, groups)`` as ``fn`` receives them (see the module docstring)."""
        catalog = targets.catalog
        if targets.target_type == "classification":
            labels: Any = np.asarray(targets.values, dtype=object).copy()
        elif targets.target_type == "multilabel":
            keys = catalog.keys
            indicator = targets.values
            labels = [tuple(keys[j] for j in sorted(indicator.indices[indicator.indptr[i]:indicator.indptr[i + 1]].tolist()))
                      for i in range(indicator.shape[0])]
        else:
            labels = np.array(targets.values, dtype=np.float64, copy=True)
        target_metadata = {
            "target_type": targets.target_type,
            "label_catalog": None if catalog is None else catalog.to_dict(),
            "target_names": list(targets.names),
        }
        return labels, target_metadata, _group_keys(groups, targets.n_rows)

    def compute(self, embeddings: Any, targets: Any, *, row_ids: Sequence[str] | None,
                groups: Sequence[Any] | None = None, seed: int = 0) -> MetricResult:
        n = _n_rows(embeddings)
        _check_targets(targets, n)
        labels, target_metadata, group_keys = self.boundary_inputs(targets, groups)
        returned = self.fn(embeddings, labels, target_metadata=target_metadata, groups=group_keys, seed=seed)
        return self._wrap(returned)

    def _wrap(self, returned: Any) -> MetricResult:
        where = f"CallableMetric {self.name!r}"
        if isinstance(returned, Mapping):
            unknown = sorted(str(k) for k in returned if k not in _RETURN_KEYS)
            if unknown:
                raise ValidationError(f"{where} returned unknown keys {unknown}; allowed: {list(_RETURN_KEYS)}")
            if "score" not in returned:
                raise ValidationError(f"{where} returned a dict without 'score'")
            parts = dict(returned)
        else:
            parts = {"score": returned}
        score = _finite_score(parts["score"], where)
        valid = parts.get("aggregate_valid", True)
        if not isinstance(valid, (bool, np.bool_)):
            raise ValidationError(f"{where}: aggregate_valid must be a bool, got {_short(valid)}")
        diagnostics = _json_mapping(parts.get("diagnostics", {}), where, "diagnostics")
        metadata = _json_mapping(parts.get("metadata", {}), where, "metadata")
        clash = [k for k in self._RESERVED_METADATA if k in metadata]
        if clash:
            raise ValidationError(f"{where}: metadata keys {clash} are reserved for vertebrae")
        warnings = _warning_list(parts.get("warnings", []), where)
        cacheable = self.recipe() is not None
        if not cacheable:
            warnings.append(
                f"metric {self.name!r} is not cacheable: {self.fn!r} has no importable module:function path "
                "and no cache_identity was given"
            )
        metadata.update(callable_path=self.callable_path, cacheable=cacheable)
        return MetricResult(self.name, score, bool(valid), diagnostics, warnings, metadata)


# --------------------------------------------------------------------------------------------------
# Leave-one-out same-label retrieval


class LabelRetrievalMetric(Metric):
    """Opt-in leave-one-out same-label retrieval for single-label classification targets.

    Every row queries every *other* row; relevant = rows with the same label; ties are broken by row order
    (ranking and blocks: ``scoring.retrieval.label``). Metrics: ``map``, ``mrr`` and ``family@k`` for k in
    ``ks``, with binary gains (formulas: ``scoring.retrieval.metrics``). Queries whose class has no other row
    have no positives and are skipped with a warning. Aggregates are plain means over the evaluated queries;
    ``score`` is the mean of ``primary``.

    ``LabelRetrievalMetric(RetrievalConfig(...))`` (or ``config=``) reads similarity, ks, primary (``primary_metric``)
    and query_block (``query_block_size``) from a retrieval config; the separate settings are then left out.
    """

    _DEFAULTS = ("cosine", (1, 5, 10), "map", 256)

    def __init__(self, similarity: str | RetrievalConfig = "cosine", ks: Sequence[int] = (1, 5, 10),
                 primary: str = "map", query_block: int = 256, *, name: str = "label_retrieval",
                 config: RetrievalConfig | None = None) -> None:
        owner = "LabelRetrievalMetric"
        if isinstance(similarity, RetrievalConfig):
            if config is not None:
                raise ConfigError(f"{owner}: give the RetrievalConfig once (positionally or as config=)")
            similarity, config = self._DEFAULTS[0], similarity
        if config is not None:
            if (similarity, ks, primary, query_block) != self._DEFAULTS:
                raise ConfigError(f"{owner}: with a RetrievalConfig leave similarity, ks, primary and query_block out; "
                                  "they are read from the config")
            similarity, ks, primary, query_block = label_options(config, owner=owner).values()
        self.name = _check_name(name, owner)
        if similarity not in SIMILARITIES:
            raise ConfigError(f"{owner}.similarity must be one of {SIMILARITIES}, got {similarity!r}")
        ks = cutoffs(ks, owner, "ks")
        query_block = positive_int(query_block, owner, "query_block")
        self.similarity = similarity
        self.ks = ks
        self.primary = parse_retrieval_metric(primary, self.ks)
        self.query_block = int(query_block)

    def metric_names(self) -> list[str]:
        return list(metric_names(self.ks))

    def recipe(self) -> dict[str, Any]:
        return {"type": "label_retrieval", "name": self.name, "similarity": self.similarity, "ks": list(self.ks),
                "primary": self.primary, "query_block": self.query_block}

    def compute(self, embeddings: Any, targets: Any, *, row_ids: Sequence[str] | None,
                groups: Sequence[Any] | None = None, seed: int = 0) -> MetricResult:
        n = _n_rows(embeddings)
        _check_targets(targets, n)
        if targets.target_type != "classification":
            raise ValidationError(
                f"{type(self).__name__} {self.name!r} supports single-label classification targets only; for "
                f"{targets.target_type} targets relevance must be declared explicitly (use RetrievalBenchmark)"
            )
        keys = _row_keys(row_ids, n)
        where = f"{type(self).__name__} {self.name!r}"
        matrix, squared = prepare_rows(embeddings, self.similarity, keys, where)
        catalog = targets.catalog
        codes = np.fromiter((catalog.index(k) for k in targets.values), dtype=np.int64, count=n)
        per_query, tied = label_retrieval(matrix, squared, codes, keys, similarity=self.similarity, ks=self.ks,
                                          query_block=self.query_block, where=where)
        return self._result(per_query, tied, codes, catalog, keys, self.metric_names(), matrix)

    def _result(self, per_query, tied, codes, catalog, keys, names, matrix) -> MetricResult:
        n = len(codes)
        evaluated = ~np.isnan(per_query[:, 0])
        skipped = np.flatnonzero(~evaluated)
        where = f"{type(self).__name__} {self.name!r}"
        if not evaluated.any():
            raise ValidationError(f"{where}: no row shares its label with another row; there is nothing to retrieve")
        warnings = []
        if skipped.size:
            classes = sorted({catalog.keys[c] for c in codes[skipped]}, key=catalog.index)
            shown = ", ".join(f"row id {describe_key(keys[i])} (index {i})" for i in skipped[:10])
            warnings.append(
                f"{where}: {skipped.size} query row(s) have no other row of their class and were skipped "
                f"(classes {[catalog.display(c) for c in classes[:10]]}{' ...' if len(classes) > 10 else ''}): "
                f"{shown}{', ...' if skipped.size > 10 else ''}"
            )
        large = [k for k in self.ks if k > n - 1]
        if large:
            warnings.append(f"{where}: ks {large} exceed the {n - 1} candidates per query; precision@k still divides by k")
        n_tied = int(tied.sum())
        if n_tied:
            warnings.append(f"{where}: {n_tied} query row(s) have relevant and non-relevant rows with equal "
                            "similarity; ties are broken by row order")
        means = per_query[evaluated].mean(axis=0)
        aggregates = {name: float(v) for name, v in zip(names, means)}
        per_class = {}
        for code in np.unique(codes[evaluated]):
            mask = evaluated & (codes == code)
            class_means = per_query[mask].mean(axis=0)
            per_class[catalog.keys[code]] = {"n_queries": int(mask.sum()),
                                             **{name: float(v) for name, v in zip(names, class_means)}}
        diagnostics = {
            **aggregates,
            "n_queries": int(evaluated.sum()),
            "n_skipped_queries": int(skipped.size),
            "n_queries_with_relevance_ties": n_tied,
            "per_class": per_class,
            "labels": {catalog.keys[c]: catalog.display(catalog.keys[c]) for c in np.unique(codes)},
        }
        metadata = {**self.recipe(), "n_rows": n, "n_dimensions": int(matrix.shape[1]),
                    "input_sparse": bool(sp.issparse(matrix)), "tie_rule": "row order"}
        return MetricResult(self.name, aggregates[self.primary], True, diagnostics, warnings, metadata)


# --------------------------------------------------------------------------------------------------
# Registry


def _overlap_from_config(entry: Mapping[str, Any]) -> OverlapMetric:
    from vertebrae.scoring.overlap import ContinuousOverlapScoringConfig, OverlapScoringConfig

    classes = {cls.__name__: cls for cls in (OverlapScoringConfig, ContinuousOverlapScoringConfig)}
    config = entry.get("config")
    if config is None:
        return OverlapMetric()
    if not isinstance(config, Mapping):
        raise ConfigError(f"metric config key 'config' must be a mapping or null, got {type(config).__name__}")
    config = dict(config)
    kind = config.pop("class", "OverlapScoringConfig")
    if kind not in classes:
        raise ConfigError(f"metric config key 'config.class' must be one of {sorted(classes)}, got {kind!r}")
    try:
        return OverlapMetric(classes[kind].from_dict(config))
    except ConfigError:
        raise
    except ValidationError as exc:
        raise ConfigError(f"metric config key 'config': {exc}") from None


def _callable_from_config(entry: Mapping[str, Any]) -> CallableMetric:
    if "path" not in entry or entry["path"] is None:
        raise ConfigError("metric config key 'path' is required for type 'callable' ('package.module:function')")
    return CallableMetric.from_path(entry["path"], entry.get("name"), cache_identity=entry.get("cache_identity"))


def _retrieval_from_config(entry: Mapping[str, Any]) -> LabelRetrievalMetric:
    kwargs = {key: entry[key] for key in ("similarity", "ks", "primary", "query_block", "name") if key in entry}
    if isinstance(kwargs.get("ks"), list):
        kwargs["ks"] = tuple(kwargs["ks"])
    return LabelRetrievalMetric(**kwargs)


#: type -> (builder, keys allowed beside "type")
METRIC_TYPES: dict[str, tuple[Callable[[Mapping[str, Any]], Metric], tuple[str, ...]]] = {
    "overlap": (_overlap_from_config, ("config",)),
    "callable": (_callable_from_config, ("path", "name", "cache_identity")),
    "label_retrieval": (_retrieval_from_config, ("similarity", "ks", "primary", "query_block", "name")),
}


def metric_from_config(entry: Mapping[str, Any]) -> Metric:
    """A Metric from its JSON form (what ``recipe()`` returns); ConfigError naming the offending key.

    ``{"type": "overlap", "config": None | {"class": "OverlapScoringConfig", ...}}``,
    ``{"type": "callable", "path": "package.module:function", "name": ..., "cache_identity": ...}``,
    ``{"type": "label_retrieval", "similarity": ..., "ks": [...], "primary": ..., "query_block": ..., "name": ...}``.
    """
    if not isinstance(entry, Mapping):
        raise ConfigError(f"a metric config must be a mapping with a 'type' key, got {type(entry).__name__}")
    kind = entry.get("type")
    if kind not in METRIC_TYPES:
        raise ConfigError(f"metric config key 'type' must be one of {sorted(METRIC_TYPES)}, got {kind!r}")
    builder, allowed = METRIC_TYPES[kind]
    unknown = sorted(str(key) for key in entry if key != "type" and key not in allowed)
    if unknown:
        raise ConfigError(f"metric config of type {kind!r} has unknown key(s) {unknown}; allowed: {list(allowed)}")
    return builder(entry)
