"""Exact, memory-bounded zero-shot scoring against fixed prompt prototypes.

Definitions
-----------
* Prototype of a class = the mean of its L2-normalised prompt embeddings (equal weight), renormalised. A zero
  prompt embedding or a zero prototype is an error naming the prompt or the class. Prompts are never selected.
* Similarity of a sample x and a prototype p: ``cosine`` = (x / |x|) . p (a zero sample row is an error naming it),
  ``dot`` = x . p, ``squared_l2`` = -|x - p|^2 (larger is closer). Each score is one float64 sum over the
  dimensions (``einsum``, no BLAS), so it has the same bits whichever sample block computes it.
* Prediction = the first maximum in declared class order. Rank of the true class = 1 + classes scoring strictly
  higher + classes scoring equal and declared earlier. A sample with more than one class at its row maximum is
  a tie (counted in ``n_top_score_ties`` and warned about, with up to 10 sample ids).
* Metrics: accuracy; per class precision = TP / predicted (0 when nothing is predicted), recall = TP / support,
  F1 = 2PR / (P + R) (0 when P + R = 0); macro_f1 = mean F1; balanced_accuracy = mean recall; weighted_f1 =
  support-weighted F1; top_k_accuracy@k = share of samples whose true class ranks <= k, only for k <= classes
  (a larger k is dropped with a warning). Confusion matrix rows = true class, columns = predicted class.
* Collapse (``vertebrae.scoring.degenerate``): the samples (L2-normalised for cosine) and the class prototypes are
  checked; samples on one point or on fewer points than classes, or prototypes that coincide, are recorded in
  ``metadata["degenerate"]`` with a ``degenerate-embedding`` warning, and ``aggregate_valid`` is then False.
* Correct-class margin = true-class score - best other-class score (summaries of it, of the correct-class and of
  the best incorrect similarity); worst samples = the smallest margins. Prompt coherence per class = number of
  prompts and mean/min/max cosine of each normalised prompt to the class prototype. With template ids, each
  template is also scored alone (prototypes rebuilt from that template's prompts only).

Memory admission
----------------
Before any work the estimated float64 working set ``8 (ns + np) d + 8 C d + 56 ns + 16 min(bs, ns) C`` bytes (ns
samples, np prompts, C classes, d dimensions, bs = ``sample_batch_size``; dense and sparse inputs alike) must fit
``max_dense_bytes``, else BudgetError saying what to lower. Samples are scored ``sample_batch_size`` rows at a time;
the full sample x class matrix is never allocated.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from vertebrae.core.errors import ArtifactError, BudgetError, ValidationError
from vertebrae.core.fingerprint import to_json_value
from vertebrae.core.labels import describe_key, semantic_key, semantic_keys
from vertebrae.core.records import cutoffs, from_record, non_negative_int, one_of, positive_int
from vertebrae.core.arrays import (check_finite, encode_row_ids, is_ordinary, paired_matrices, peak_exponent,
                                   power_of_two_factor, rescaled)
from vertebrae.scoring.degenerate import detect_collapse, is_invalid, warn_collapse

__all__ = ["ZeroShotConfig", "ZeroShotResult", "ZeroShotScorer", "admit", "build_prototypes", "score_encoded"]

RESULT_SCHEMA = "vertebrae.zero-shot-result/v2"
SIMILARITIES = ("cosine", "dot", "squared_l2")
PRIMARY_METRICS = ("accuracy", "macro_f1", "balanced_accuracy")
TIE_RULE = "first maximum in declared class order"
_LIST = 10


_OWNER = "ZeroShotConfig"


@dataclass(frozen=True)
class ZeroShotConfig:
    """Zero-shot scoring settings (defaults: cosine, top_k (1, 5), accuracy, 128 samples per block, 2e9 bytes)."""

    top_k: tuple[int, ...] = (1, 5)
    similarity: str = "cosine"
    sample_batch_size: int = 128
    worst_samples: int = 10
    max_dense_bytes: int = 2_000_000_000
    primary_metric: str = "accuracy"

    def __post_init__(self) -> None:
        one_of(self.similarity, SIMILARITIES, _OWNER, "similarity")
        one_of(self.primary_metric, PRIMARY_METRICS, _OWNER, "primary_metric")
        object.__setattr__(self, "top_k", cutoffs(self.top_k, _OWNER, "top_k"))
        for name in ("sample_batch_size", "max_dense_bytes"):
            object.__setattr__(self, name, positive_int(getattr(self, name), _OWNER, name))
        object.__setattr__(self, "worst_samples", non_negative_int(self.worst_samples, _OWNER, "worst_samples"))

    def to_dict(self) -> dict[str, Any]:
        return {name: to_json_value(getattr(self, name)) for name in self.__dataclass_fields__}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ZeroShotConfig:
        return from_record(cls, data, tuples=("top_k",))


# --------------------------------------------------------------------------------------------------
# Admission, prototypes, similarities


def working_set_bytes(n_samples: int, n_prompts: int, dim: int, n_classes: int, batch_size: int) -> int:
    return 8 * (n_samples + n_prompts) * dim + 8 * n_classes * dim + 56 * n_samples + 16 * min(batch_size, n_samples) * n_classes


def admit(config: ZeroShotConfig, n_samples: int, n_prompts: int, dim: int, n_classes: int) -> int:
    """BudgetError (saying what to lower) when the estimated working set exceeds ``max_dense_bytes``."""
    total = working_set_bytes(n_samples, n_prompts, dim, n_classes, config.sample_batch_size)
    if total <= config.max_dense_bytes:
        return total
    fixed = working_set_bytes(n_samples, n_prompts, dim, n_classes, 0)
    block = total - fixed
    if fixed > config.max_dense_bytes:
        hint = "the float64 endpoints alone exceed it: compress the embeddings or raise ZeroShotConfig.max_dense_bytes"
    else:
        hint = ("lower ZeroShotConfig.sample_batch_size, compress the embeddings or raise "
                "ZeroShotConfig.max_dense_bytes")
    raise BudgetError(
        f"zero-shot scoring needs an estimated {total:,} bytes ({n_samples} samples + {n_prompts} prompts x {dim} "
        f"dimensions, {n_classes} classes; score block {block:,} bytes for sample_batch_size="
        f"{config.sample_batch_size}), more than ZeroShotConfig.max_dense_bytes={config.max_dense_bytes:,}; {hint}"
    )


def _rows64(matrix: Any, start: int, stop: int) -> np.ndarray:
    block = matrix[start:stop]
    block = block.toarray() if sp.issparse(block) else np.asarray(block)
    return np.ascontiguousarray(block, dtype=np.float64)


def _sq_norms(block: np.ndarray) -> np.ndarray:
    return np.einsum("ij,ij->i", block, block)


def _dot(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.einsum("ij,kj->ik", a, b)


def build_prototypes(prompts: np.ndarray, prompt_class: np.ndarray, n_classes: int, *, prompt_texts: Sequence[str],
                     class_names: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """(C x d unit prototypes, normalised prompt rows). Errors name the zero prompt or the zero-prototype class."""
    norms = np.sqrt(_sq_norms(prompts))
    zero = np.flatnonzero(norms == 0)
    if zero.size:
        shown = ", ".join(f"{prompt_texts[i]!r} (class {class_names[prompt_class[i]]!r})" for i in zero[:_LIST])
        raise ValidationError(f"Prompt embeddings: {zero.size} zero-norm prompt(s) cannot be normalised: {shown}"
                              + (", ..." if zero.size > _LIST else ""))
    unit = prompts / norms[:, None]
    prototypes = np.zeros((n_classes, prompts.shape[1]), dtype=np.float64)
    for c in range(n_classes):
        rows = np.flatnonzero(prompt_class == c)
        if rows.size == 0:
            raise ValidationError(f"class {class_names[c]!r} has no prompt; every class needs at least one prompt")
        prototypes[c] = unit[rows].mean(axis=0)
    p_norms = np.sqrt(_sq_norms(prototypes))
    bad = np.flatnonzero(~(p_norms > 0))
    if bad.size:
        raise ValidationError(f"class {class_names[bad[0]]!r}: its normalised prompt embeddings average to a zero "
                              "prototype; change its prompts")
    return prototypes / p_norms[:, None], unit


def _scale_free(matrix: Any) -> Any:
    """``matrix`` itself when its scale is ordinary (``is_ordinary``), else brought to a peak in [0.5, 1) by a power
    of two (exact)."""
    exponent = peak_exponent(matrix)
    return matrix if is_ordinary(exponent) else rescaled(matrix, power_of_two_factor(matrix))


def _check_cosine_rows(samples: Any, sample_ids: Sequence[str]) -> None:
    if sp.issparse(samples):
        sq = np.asarray(samples.multiply(samples).sum(axis=1)).ravel()
    else:
        sq = np.einsum("ij,ij->i", np.asarray(samples, dtype=np.float64), np.asarray(samples, dtype=np.float64))
    zero = np.flatnonzero(sq == 0)
    if zero.size:
        shown = ", ".join(f"index {i} (id {describe_key(sample_ids[i])})" for i in zero[:_LIST])
        raise ValidationError(f"Sample embeddings: {zero.size} zero-norm row(s) cannot be scored with cosine "
                              f"similarity: {shown}{', ...' if zero.size > _LIST else ''}; use similarity='dot' or "
                              "'squared_l2', or drop those rows")


def block_scores(block: np.ndarray, prototypes: np.ndarray, similarity: str) -> np.ndarray:
    """Similarities of a float64 sample block to unit prototypes (see module docstring)."""
    if similarity == "cosine":
        block = block / np.sqrt(_sq_norms(block))[:, None]
        return _dot(block, prototypes)
    products = _dot(block, prototypes)
    if similarity == "dot":
        return products
    return -(_sq_norms(block)[:, None] - 2.0 * products + _sq_norms(prototypes)[None, :])


# --------------------------------------------------------------------------------------------------
# Scoring passes


@dataclass
class _Pass:
    predicted: np.ndarray
    rank: np.ndarray
    true_score: np.ndarray
    best_other: np.ndarray
    tie: np.ndarray


def _score_pass(samples: Any, prototypes: np.ndarray, y: np.ndarray, config: ZeroShotConfig) -> _Pass:
    ns, n_classes = samples.shape[0], prototypes.shape[0]
    out = _Pass(np.empty(ns, np.int64), np.empty(ns, np.int64), np.empty(ns), np.empty(ns), np.empty(ns, bool))
    classes = np.arange(n_classes)
    for start in range(0, ns, config.sample_batch_size):
        stop = min(start + config.sample_batch_size, ns)
        scores = block_scores(_rows64(samples, start, stop), prototypes, config.similarity)
        yb = y[start:stop]
        true = scores[np.arange(stop - start), yb]
        row_max = scores.max(axis=1)
        out.predicted[start:stop] = scores.argmax(axis=1)  # first maximum = declared class order
        earlier = classes[None, :] < yb[:, None]
        out.rank[start:stop] = 1 + (scores > true[:, None]).sum(axis=1) + ((scores == true[:, None]) & earlier).sum(axis=1)
        out.true_score[start:stop] = true
        others = scores.copy()
        others[np.arange(stop - start), yb] = -np.inf
        out.best_other[start:stop] = others.max(axis=1)
        out.tie[start:stop] = (scores == row_max[:, None]).sum(axis=1) > 1
    return out


def _classification_metrics(y: np.ndarray, predicted: np.ndarray, n_classes: int) -> dict[str, Any]:
    cm = np.zeros((n_classes, n_classes), dtype=np.int64)
    np.add.at(cm, (y, predicted), 1)
    tp = np.diag(cm).astype(np.float64)
    support, predicted_n = cm.sum(axis=1).astype(np.float64), cm.sum(axis=0).astype(np.float64)
    precision = np.divide(tp, predicted_n, out=np.zeros(n_classes), where=predicted_n > 0)
    recall = np.divide(tp, support, out=np.zeros(n_classes), where=support > 0)
    denom = precision + recall
    f1 = np.divide(2 * precision * recall, denom, out=np.zeros(n_classes), where=denom > 0)
    return {
        "confusion": cm, "precision": precision, "recall": recall, "f1": f1, "support": support,
        "accuracy": float(tp.sum() / len(y)), "macro_f1": float(f1.mean()), "balanced_accuracy": float(recall.mean()),
        "weighted_f1": float((f1 * support).sum() / support.sum()),
    }


def _summary(values: np.ndarray) -> dict[str, float]:
    return {"mean": float(values.mean()), "median": float(np.median(values)), "min": float(values.min()),
            "max": float(values.max()), "count": int(values.size)}


def _sample_listing(ids: Sequence[str], rows: np.ndarray) -> str:
    shown = ", ".join(describe_key(ids[i]) for i in rows[:_LIST])
    return shown + (", ..." if rows.size > _LIST else "")


def score_encoded(samples: Any, prompts: Any, sample_labels: Sequence[str], *, class_keys: Sequence[str],
                  prompt_labels: Sequence[str], sample_ids: Sequence[str], class_names: Sequence[str] | None = None,
                  prompt_texts: Sequence[str] | None = None, template_ids: Sequence[str] | None = None,
                  config: ZeroShotConfig | None = None, metadata: Mapping[str, Any] | None = None) -> ZeroShotResult:
    """Score samples against prompt prototypes; labels are semantic keys of ``class_keys`` (declared order)."""
    config = config or ZeroShotConfig()
    if not isinstance(config, ZeroShotConfig):
        raise ValidationError(f"config must be a ZeroShotConfig, got {type(config).__name__}")
    class_keys = tuple(class_keys)
    n_classes = len(class_keys)
    if n_classes < 2:
        raise ValidationError(f"zero-shot needs at least 2 classes, got {n_classes}")
    if len(set(class_keys)) != n_classes:
        raise ValidationError("zero-shot class labels must be unique")
    names = list(class_names) if class_names is not None else [describe_key(k) for k in class_keys]
    S, P = paired_matrices(samples, prompts, what=("Sample embeddings", "Prompt embeddings"),
                           need="zero-shot needs at least one sample and one prompt",
                           mismatch_note="; both must share one embedding space")
    ns, d = S.shape
    n_prompts = P.shape[0]
    if len(sample_ids) != ns or len(sample_labels) != ns:
        raise ValidationError(f"Sample embeddings: {ns} rows for {len(sample_ids)} sample ids and {len(sample_labels)} labels")
    if len(prompt_labels) != n_prompts:
        raise ValidationError(f"Prompt embeddings: {n_prompts} rows for {len(prompt_labels)} prompt labels")
    texts = list(prompt_texts) if prompt_texts is not None else [f"prompt {i}" for i in range(n_prompts)]
    index = {key: i for i, key in enumerate(class_keys)}
    y = np.empty(ns, dtype=np.int64)
    for i, key in enumerate(sample_labels):
        if key not in index:
            raise ValidationError(f"sample {describe_key(sample_ids[i])} (index {i}) has label {describe_key(key)}, "
                                  "which is not a declared class")
        y[i] = index[key]
    prompt_class = np.empty(n_prompts, dtype=np.int64)
    for i, key in enumerate(prompt_labels):
        if key not in index:
            raise ValidationError(f"prompt {texts[i]!r} is for label {describe_key(key)}, which is not a declared class")
        prompt_class[i] = index[key]
    missing = [names[c] for c in range(n_classes) if not (y == c).any()]
    if missing:
        raise ValidationError(f"declared class(es) {missing} have no samples; the declared classes must equal the "
                              "observed labels")
    admit(config, ns, n_prompts, d, n_classes)
    check_finite(S, sample_ids, what="Sample embeddings")
    check_finite(P, [semantic_key(i) for i in range(n_prompts)], what="Prompt embeddings")
    # prompts (always: prototypes are unit rows) and cosine samples are scale-free: far from 1 in magnitude, they
    # are brought there by a power of two (exact), so norms neither underflow nor overflow
    P = _scale_free(P)
    if config.similarity == "cosine":
        S = _scale_free(S)
        _check_cosine_rows(S, sample_ids)
    dense_prompts = _rows64(P, 0, n_prompts)
    prototypes, unit = build_prototypes(dense_prompts, prompt_class, n_classes, prompt_texts=texts, class_names=names)
    cosine = config.similarity == "cosine"
    findings = [f for f in (
        detect_collapse(S, what="Sample embeddings" + (" (L2-normalised)" if cosine else ""), labels=y,
                        n_classes=n_classes, row_ids=sample_ids, normalize=cosine),
        detect_collapse(prototypes, what="Class prototypes", labels=np.arange(n_classes), row_ids=class_keys),
    ) if f is not None]
    main = _score_pass(S, prototypes, y, config)
    m = _classification_metrics(y, main.predicted, n_classes)
    warnings: list[str] = [text for f in findings for text in warn_collapse(f)]
    metrics = {"accuracy": m["accuracy"], "macro_f1": m["macro_f1"], "balanced_accuracy": m["balanced_accuracy"],
               "weighted_f1": m["weighted_f1"]}
    for k in config.top_k:
        if k > n_classes:
            warnings.append(f"top_k={k} exceeds the number of classes ({n_classes}); top_k_accuracy@{k} is not reported")
            continue
        metrics[f"top_k_accuracy@{k}"] = float((main.rank <= k).mean())
    ties = np.flatnonzero(main.tie)
    if ties.size:
        warnings.append(f"{ties.size} sample(s) have more than one class at their top score; the first class in "
                        f"declared order is predicted: {_sample_listing(sample_ids, ties)}")
    margin = main.true_score - main.best_other
    order = np.lexsort((np.arange(ns), margin))[:config.worst_samples]
    worst = [{"sample_id": sample_ids[i], "label": class_keys[y[i]], "predicted": class_keys[main.predicted[i]],
              "margin": float(margin[i]), "true_class_rank": int(main.rank[i])} for i in order]
    coherence = {}
    for c, key in enumerate(class_keys):
        cos = _dot(unit[prompt_class == c], prototypes[c:c + 1]).ravel()
        coherence[key] = {"n_prompts": int(cos.size), "mean": float(cos.mean()), "min": float(cos.min()),
                          "max": float(cos.max())}
    template_metrics = None
    if template_ids is not None:
        if len(template_ids) != n_prompts:
            raise ValidationError(f"template_ids: {len(template_ids)} ids for {n_prompts} prompts")
        template_metrics = {}
        for tid in dict.fromkeys(template_ids):
            rows = np.array([i for i, t in enumerate(template_ids) if t == tid])
            covered = np.bincount(prompt_class[rows], minlength=n_classes)
            if not (covered == 1).all():
                c = int(np.flatnonzero(covered != 1)[0])
                raise ValidationError(f"template {tid!r} renders class {names[c]!r} {int(covered[c])} time(s); every "
                                      "template must cover every class exactly once")
            protos, _ = build_prototypes(dense_prompts[rows], prompt_class[rows], n_classes,
                                         prompt_texts=[texts[i] for i in rows], class_names=names)
            t_pass = _score_pass(S, protos, y, config)
            tm = _classification_metrics(y, t_pass.predicted, n_classes)
            template_metrics[tid] = {"accuracy": tm["accuracy"], "macro_f1": tm["macro_f1"],
                                     "balanced_accuracy": tm["balanced_accuracy"],
                                     "n_top_score_ties": int(t_pass.tie.sum())}
    per_class = {key: {"precision": float(m["precision"][c]), "recall": float(m["recall"][c]), "f1": float(m["f1"][c]),
                       "support": int(m["support"][c])} for c, key in enumerate(class_keys)}
    return ZeroShotResult(
        config=config, score=metrics[config.primary_metric], metrics=metrics, per_class=per_class,
        confusion_matrix=m["confusion"].tolist(), class_keys=list(class_keys),
        labels={key: names[c] for c, key in enumerate(class_keys)}, prompt_coherence=coherence,
        margins={"correct_class_similarity": _summary(main.true_score), "best_incorrect_similarity": _summary(main.best_other),
                 "margin": _summary(margin)},
        template_metrics=template_metrics, worst_samples=worst, n_samples=ns, n_classes=n_classes, n_prompts=n_prompts,
        n_top_score_ties=int(ties.size), warnings=warnings,
        per_sample={"sample_ids": list(sample_ids), "true_class": y.tolist(), "predicted": main.predicted.tolist(),
                    "true_class_rank": main.rank.tolist()},
        metadata={"n_dimensions": int(d), "sample_sparse": bool(sp.issparse(S)), "prompt_sparse": bool(sp.issparse(P)),
                  "tie_rule": TIE_RULE, **dict(metadata or {}),
                  **({"degenerate": [f.to_dict() for f in findings]} if findings else {})},
    )


class ZeroShotScorer:
    """Zero-shot scoring of label values (any catalog-supported type) against prompt embeddings."""

    def __init__(self, config: ZeroShotConfig | None = None) -> None:
        if config is not None and not isinstance(config, ZeroShotConfig):
            raise ValidationError(f"ZeroShotScorer config must be a ZeroShotConfig, got {type(config).__name__}")
        self.config = config or ZeroShotConfig()

    def score(self, samples: Any, prompts: Any, labels: Sequence[Any], *, class_labels: Sequence[Any],
              prompt_labels: Sequence[Any], template_ids: Sequence[str] | None = None,
              sample_ids: Sequence[Any] | None = None, prompt_texts: Sequence[str] | None = None) -> ZeroShotResult:
        """``labels``: one class per sample; ``class_labels``: the declared class order; ``prompt_labels``: the class
        of each prompt row."""
        def keys(values: Sequence[Any], what: str) -> list[str]:
            return semantic_keys(values, lambda i: f"{what}[{i}]")

        n = samples.shape[0] if hasattr(samples, "shape") else len(samples)
        class_keys = keys(class_labels, "class_labels")
        return score_encoded(samples, prompts, keys(labels, "labels"), class_keys=class_keys,
                             prompt_labels=keys(prompt_labels, "prompt_labels"),
                             sample_ids=encode_row_ids(sample_ids, n, what="Sample embeddings"),
                             class_names=[str(v) for v in class_labels], prompt_texts=prompt_texts,
                             template_ids=template_ids, config=self.config)


# --------------------------------------------------------------------------------------------------
# Result


_RESULT_FIELDS = ("score", "metrics", "per_class", "confusion_matrix", "class_keys", "labels", "prompt_coherence",
                  "margins", "template_metrics", "worst_samples", "n_samples", "n_classes", "n_prompts",
                  "n_top_score_ties", "warnings", "metadata", "per_sample")
PER_SAMPLE_COLUMNS = ("true_class", "predicted", "true_class_rank")


@dataclass(frozen=True, eq=False)
class ZeroShotResult:
    """Metrics and diagnostics of one candidate (see the module docstring); equality compares ``to_dict``.

    ``per_sample`` keeps every sample's outcome for paired comparisons: ``sample_ids`` and, as class indices into
    ``class_keys``, ``true_class`` and ``predicted``, and ``true_class_rank`` (1 = top); a sample is correct when
    ``predicted == true_class``.
    """

    config: ZeroShotConfig
    score: float
    metrics: dict[str, float]
    per_class: dict[str, dict[str, Any]]
    confusion_matrix: list[list[int]]
    class_keys: list[str]
    labels: dict[str, str]
    prompt_coherence: dict[str, dict[str, Any]]
    margins: dict[str, dict[str, Any]]
    template_metrics: dict[str, dict[str, Any]] | None
    worst_samples: list[dict[str, Any]]
    n_samples: int
    n_classes: int
    n_prompts: int
    n_top_score_ties: int
    warnings: list[str]
    metadata: dict[str, Any]
    per_sample: dict[str, list[Any]]

    def __post_init__(self) -> None:
        if not isinstance(self.config, ZeroShotConfig):
            raise ValidationError("ZeroShotResult.config must be a ZeroShotConfig")
        for name in ("accuracy", "macro_f1", "balanced_accuracy"):
            if name not in self.metrics:
                raise ValidationError(f"ZeroShotResult.metrics lacks {name!r}")
        if float(self.score) != float(self.metrics[self.config.primary_metric]):
            raise ValidationError("ZeroShotResult.score must equal metrics[config.primary_metric]")
        if len(self.class_keys) != self.n_classes or len(self.confusion_matrix) != self.n_classes:
            raise ValidationError("ZeroShotResult: class_keys and confusion_matrix must cover n_classes classes")
        if set(self.per_class) != set(self.class_keys):
            raise ValidationError("ZeroShotResult.per_class must hold exactly the declared classes")
        self._check_per_sample()

    def _check_per_sample(self) -> None:
        if not isinstance(self.per_sample, Mapping) or set(self.per_sample) != {"sample_ids", *PER_SAMPLE_COLUMNS}:
            raise ValidationError(f"ZeroShotResult.per_sample must hold sample_ids and {list(PER_SAMPLE_COLUMNS)}")
        columns = {"sample_ids": [str(v) for v in self.per_sample["sample_ids"]]}
        for name in PER_SAMPLE_COLUMNS:
            values = self.per_sample[name]
            if isinstance(values, np.ndarray):
                values = values.tolist()
            if any(isinstance(v, bool) or not isinstance(v, (int, np.integer)) for v in values):
                raise ValidationError(f"ZeroShotResult.per_sample[{name!r}] must hold integers")
            columns[name] = [int(v) for v in values]
        for name, values in columns.items():
            if len(values) != self.n_samples:
                raise ValidationError(f"ZeroShotResult.per_sample[{name!r}] holds {len(values)} values for "
                                      f"{self.n_samples} samples")
        for name in ("true_class", "predicted"):
            if any(not 0 <= v < self.n_classes for v in columns[name]):
                raise ValidationError(f"ZeroShotResult.per_sample[{name!r}] holds a class index outside "
                                      f"[0, {self.n_classes})")
        if any(not 1 <= v <= self.n_classes for v in columns["true_class_rank"]):
            raise ValidationError(f"ZeroShotResult.per_sample['true_class_rank'] must lie in [1, {self.n_classes}]")
        object.__setattr__(self, "per_sample", columns)

    @property
    def primary_metric(self) -> str:
        return self.config.primary_metric

    @property
    def aggregate_valid(self) -> bool:
        """False when the samples or prototypes collapsed (``metadata["degenerate"]``): the score is meaningless."""
        return not is_invalid(self.metadata.get("degenerate"))

    def to_dict(self) -> dict[str, Any]:
        doc = {name: getattr(self, name) for name in _RESULT_FIELDS}
        return {"schema": RESULT_SCHEMA, "config": self.config.to_dict(), "primary_metric": self.primary_metric,
                **to_json_value(doc)}

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ZeroShotResult) and self.to_dict() == other.to_dict()

    __hash__ = None  # type: ignore[assignment]

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, expected_config: ZeroShotConfig | None = None) -> ZeroShotResult:
        """Rebuild a result; with ``expected_config`` a result scored under other settings is refused."""
        if not isinstance(data, Mapping) or data.get("schema") != RESULT_SCHEMA:
            schema = data.get("schema") if isinstance(data, Mapping) else None
            raise ArtifactError(f"zero-shot result has schema {schema!r}, expected {RESULT_SCHEMA!r}")
        missing = [name for name in ("config", *_RESULT_FIELDS) if name not in data]
        if missing:
            raise ArtifactError(f"zero-shot result lacks fields {missing}")
        try:
            config = ZeroShotConfig.from_dict(data["config"])
        except ValidationError as exc:
            raise ArtifactError(f"zero-shot result: invalid recorded config: {exc}") from None
        if expected_config is not None and config != expected_config:
            recorded, wanted = config.to_dict(), expected_config.to_dict()
            diffs = [f"{k}: recorded {recorded[k]!r}, expected {wanted[k]!r}" for k in wanted if recorded[k] != wanted[k]]
            raise ArtifactError(f"zero-shot result: config mismatch ({'; '.join(diffs)})")
        try:
            return cls(config=config, **{name: data[name] for name in _RESULT_FIELDS})
        except (ValidationError, TypeError, ValueError) as exc:
            raise ArtifactError(f"malformed zero-shot result: {exc}") from None
