"""SeparatixScorer: the overlap gate and the one ``separatix.diagnose`` call of the Separatix stage.

``separatix`` is imported lazily, inside :meth:`SeparatixScorer.run` (its import is slow).

Gate
    Separatix runs only when ``SeparatixConfig.enabled`` and the overlap score of the evaluated embedding variant
    is at least the threshold of the target type: ``overlap_threshold`` for classification and multi-label
    targets, ``regression_overlap_threshold`` for regression. Otherwise the result has ``ran=False`` and a
    ``skipped_reason``; ``gate`` always records ``{"metric": "overlap", "score", "threshold", "passed"}``.

Call
    ``separatix.diagnose(X, y, return_report=True, target_mode=..., groups=..., budget=..., random_state=...,
    densify_policy=..., max_dense_mb=..., max_samples=..., mlp_probes=...)`` exactly once per run, where

    - X is the embedding matrix, L2-normalised row-wise with sklearn ``normalize`` when
      ``normalize_embeddings`` (the overlap-scoring convention; CSR stays CSR, zero rows stay zero);
    - classification -> ``target_mode="singlelabel"``, y = the semantic-key labels as a 1-D str array;
      multilabel -> ``"multilabel"``, y = the CSR 0/1 indicator (columns in catalog order);
      regression -> ``"regression"``, y = the float64 values ((n,) or (n, t));
    - ``max_dense_mb = max(1, floor(max_dense_bytes / 2**20))`` with ``max_dense_bytes`` from the config or,
      when None, the caller's ``fallback_max_dense_bytes`` (the overlap config's ``max_dense_bytes``). It is a
      per-operation cap inside separatix, not a process cap.

Failures
    - grouped diagnostics without cross-group support (separatix raises ValueError mentioning "distinct
      groups": fewer than two single-label classes in >= 2 groups, or no multi-label column with >= 2 groups on
      both sides) -> ``ran=False``, ``skipped_reason="grouped diagnostic skipped: <separatix message>"``. The
      diagnostic is never retried without groups (that would leak group identity across folds).
    - ``densify_policy="fail"`` with a dense operation over budget (``separatix.exceptions.DensificationError``)
      -> :class:`vertebrae.core.errors.BudgetError` naming the MiB budget and max_dense_bytes.
    - any other error propagates.

Warnings
    ``SeparatixResult.warnings`` is the report's own warning list followed by every Python warning raised
    during the call (separatix, scikit-learn, ...) whose text is not already listed, as ``"Category: text"``.

Probe summary
    ``SeparatixResult.probe_summary`` is :func:`vertebrae.scoring.separatix.probes.summarize_probes` of the report.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import scipy.sparse as sp

from vertebrae.core.arrays import as_matrix, nonfinite_rows
from vertebrae.core.errors import BudgetError, ValidationError
from vertebrae.scoring.separatix.config import TARGET_MODES, SeparatixConfig
from vertebrae.scoring.separatix.probes import summarize_probes
from vertebrae.scoring.separatix.result import SeparatixResult, json_safe

GROUP_SUPPORT_MARKER = "distinct groups"
GROUP_SKIP_PREFIX = "grouped diagnostic skipped: "


def _separatix_targets(targets: Any) -> tuple[str, Any]:
    kind = getattr(targets, "target_type", None)
    if kind not in TARGET_MODES:
        raise ValidationError(f"targets must be vertebrae Targets of type {tuple(TARGET_MODES)}, got {type(targets).__name__} ({kind!r})")
    values = targets.values
    if kind == "classification":
        return "singlelabel", np.asarray([str(key) for key in values], dtype=str)
    if kind == "multilabel":
        return "multilabel", sp.csr_matrix(values, dtype=np.int8)
    return "regression", np.asarray(values, dtype=np.float64)


def _group_array(groups: Any, n_rows: int) -> np.ndarray | None:
    if groups is None:
        return None
    array = np.asarray(groups.tolist() if isinstance(groups, np.ndarray) else list(groups), dtype=object)
    if array.ndim != 1 or array.shape[0] != n_rows:
        raise ValidationError(f"groups must be a 1-D sequence with one key per row ({n_rows}), got shape {array.shape}")
    return array


def _merge_warnings(reported: Sequence[str], caught: Sequence[warnings.WarningMessage]) -> list[str]:
    out = [str(message) for message in reported]
    seen = set(out)
    for item in caught:
        text = str(item.message)
        line = f"{item.category.__name__}: {text}"
        if text in seen or line in seen:
            continue
        seen.add(line)
        out.append(line)
    return out


class SeparatixScorer:
    """Runs ``separatix.diagnose`` behind the overlap gate (module docstring)."""

    def __init__(self, config: SeparatixConfig | None = None) -> None:
        if config is not None and not isinstance(config, SeparatixConfig):
            raise ValidationError(f"config must be a SeparatixConfig, got {type(config).__name__}")
        self.config = config or SeparatixConfig()

    def run(
        self,
        embeddings: Any,
        targets: Any,
        *,
        overlap_score: float,
        groups: Any = None,
        normalize_embeddings: bool = True,
        fallback_max_dense_bytes: int = 2_000_000_000,
    ) -> SeparatixResult:
        config = self.config
        target_mode, y = _separatix_targets(targets)
        target_type = targets.target_type
        if isinstance(overlap_score, bool) or not isinstance(overlap_score, (int, float, np.integer, np.floating)) \
                or not math.isfinite(float(overlap_score)):
            raise ValidationError(f"overlap_score must be a finite number, got {overlap_score!r}")
        if not isinstance(normalize_embeddings, bool):
            raise ValidationError(f"normalize_embeddings must be a bool, got {normalize_embeddings!r}")
        score = float(overlap_score)
        threshold = config.threshold_for(target_type)
        passed = score >= threshold
        gate = {"metric": "overlap", "score": score, "threshold": threshold, "passed": passed}

        matrix = as_matrix(embeddings, what="embeddings")
        if matrix.shape[0] != targets.n_rows:
            raise ValidationError(f"embeddings have {matrix.shape[0]} rows but the targets have {targets.n_rows}")
        group_keys = _group_array(groups, matrix.shape[0])
        settings = {
            "target_mode": target_mode,
            "budget": config.budget,
            "random_state": config.random_state,
            "densify_policy": config.densify_policy,
            "max_dense_mb": config.max_dense_mb(fallback_max_dense_bytes),
            "max_dense_bytes": config.max_dense_bytes if config.max_dense_bytes is not None else fallback_max_dense_bytes,
            "max_samples": config.max_samples,
            "mlp_probes": config.mlp_probes,
            "normalize_embeddings": normalize_embeddings,
            "groups_provided": group_keys is not None,
            "input_sparse": bool(sp.issparse(matrix)),
        }
        base = {"gate": gate, "target_type": target_type, "target_mode": target_mode, "settings": settings}

        if not config.enabled:
            return SeparatixResult(ran=False, skipped_reason="separatix disabled (SeparatixConfig.enabled=False)", **base)
        if not passed:
            return SeparatixResult(
                ran=False,
                skipped_reason=(f"overlap gate not passed: overlap score {score:.6g} is below the {target_type} "
                                f"threshold {threshold:.6g}"),
                **base)

        bad = nonfinite_rows(matrix)
        if bad.size:
            raise ValidationError(f"embeddings: {bad.size} row(s) contain NaN or infinite values (first index {int(bad[0])})")
        if normalize_embeddings:
            from vertebrae.scoring.overlap import l2_normalize

            matrix = l2_normalize(matrix)

        import separatix
        from separatix.exceptions import DensificationError

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                report = separatix.diagnose(
                    matrix, y,
                    groups=group_keys,
                    return_report=True,
                    target_mode=target_mode,
                    budget=config.budget,
                    densify_policy=config.densify_policy,
                    max_dense_mb=settings["max_dense_mb"],
                    max_samples=config.max_samples,
                    random_state=config.random_state,
                    mlp_probes=config.mlp_probes,
                )
            except DensificationError as exc:
                raise BudgetError(
                    f"separatix (densify_policy={config.densify_policy!r}) needs a dense operation over the budget of "
                    f"{settings['max_dense_mb']} MiB (max_dense_bytes={settings['max_dense_bytes']}): {exc}") from exc
            except ValueError as exc:
                if group_keys is None or GROUP_SUPPORT_MARKER not in str(exc):
                    raise
                n_groups = len(set(group_keys.tolist()))
                return SeparatixResult(
                    ran=False,
                    skipped_reason=f"{GROUP_SKIP_PREFIX}{exc}",
                    warnings=_merge_warnings([], caught),
                    grouping={"provided": True, "group_count": n_groups},
                    **base)

        document = json_safe(report.to_dict(terse=True))
        return SeparatixResult(
            ran=True,
            skipped_reason=None,
            recommendation=document["recommendation"],
            confidence=document["confidence"],
            decision_path=list(document.get("decision_path") or []),
            scores=dict(document.get("scores") or {}),
            report=document,
            probe_summary=summarize_probes(document),
            preprocessing=dict(document.get("preprocessing") or {}),
            densification_events=list(document.get("densification_events") or []),
            skipped_diagnostics=list(document.get("skipped_diagnostics") or []),
            warnings=_merge_warnings(document.get("warnings") or [], caught),
            grouping=dict(document.get("grouping") or {}),
            **base,
        )
