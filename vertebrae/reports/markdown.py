"""Markdown rendering of the three protocols' ranked reports; every number also lives in the JSON report.

Each renderer takes a result object (duck-typed: ``metadata``, ``dataset_summary``, ``table_rows()``,
``ranked_results()``) and returns the report text: a title and introduction, ``## Ranking``, the protocol's own
sections, the paired comparison ``## Is the leader really ahead?`` (``reports.comparison``; nothing for a
result without ``comparison`` and ``comparison_skipped``), then ``## Warnings``. Table cells (``reports.comparison``'s
``cell`` and ``table``): None is ``–``, floats have 4 decimals, pipes are escaped. A candidate listed without a rank
because its embedding collapsed gets a ``Not ranked`` line under the table saying why.
"""

from __future__ import annotations

from typing import Any

from vertebrae.reports.comparison import cell as _cell
from vertebrae.reports.comparison import result_comparison_lines
from vertebrae.reports.comparison import table as _table
from vertebrae.scoring.degenerate import CODE as COLLAPSE_CODE


def _opening(title: str, introduction: str) -> list[str]:
    """The title, the introduction paragraph and the ``## Ranking`` heading."""
    return [title, "", introduction, "", "## Ranking", ""]


def _row_table(rows: list[dict[str, Any]]) -> list[str]:
    """A table whose columns are the keys of the first row (``rank``, ``extractor`` when there is none)."""
    header = list(rows[0]) if rows else ["rank", "extractor"]
    return _table(header, [list(row.values()) for row in rows])


def _not_ranked(result) -> list[str]:
    """One ``Not ranked`` line per unranked candidate whose embedding collapsed, then a blank line; none else."""
    ranked = result.ranked_results()
    lines = [f"Not ranked: **{_cell(r.name)}**: {_cell(reason)}" for r in result.candidates if r not in ranked
             for reason in (r.collapse_reasons() if hasattr(r, "collapse_reasons") else [])]
    return ["", *lines] if lines else []


def _all_candidates(result) -> list:
    """Ranked candidates first, then the unranked ones in declaration order."""
    ranked = result.ranked_results()
    return ranked + [r for r in result.candidates if r not in ranked]


def _cohort_opening(result, title: str, introduction: str) -> list[str]:
    """The opening, a table of ``result.table_rows()``, Not-ranked lines and the quality cohort line (retrieval,
    zero-shot)."""
    return _opening(title, introduction) + _row_table(result.table_rows()) + _not_ranked(result) + [
        "", f"Quality cohort (within 0.01 of the best): {', '.join(result.quality_cohort()) or '–'}", ""]


def _warnings(warned: list[tuple[str, str]]) -> list[str]:
    """The ``## Warnings`` section: one ``- **candidate**: text`` line each, or ``None.``."""
    return ["", "## Warnings", ""] + ([f"- **{_cell(n)}**: {_cell(w)}" for n, w in warned] or ["None."])


HEADERS = {  # every column of BenchmarkResult.to_dataframe(), in the same order
    "rank": "rank", "extractor": "extractor", "primary_metric": "primary metric", "primary_score": "primary score",
    "overlap_score": "overlap score", "overlap_macro": "overlap macro", "overlap_weighted": "overlap weighted",
    "stability_interval": "stability interval", "weakest_class": "weakest class", "best_probe": "best probe",
    "probe_metric": "probe metric", "probe_score": "probe score", "embedding_dim": "dim", "compression": "compression",
    "recommendation": "recommendation",
}


def _interval(value: Any) -> str | None:
    return None if value is None else f"[{value[0]:.4f}, {value[1]:.4f}]"


def render_markdown(result) -> str:
    """Labelled report: ranking, per-class (per-label) scores, regression diagnostics, custom metrics, Separatix."""
    name = result.metadata.get("benchmark", "benchmark")
    summary = result.dataset_summary
    target_type = summary.get("target_type", "classification")
    what = {"classification": f"{summary.get('n_classes')} classes", "multilabel": f"{summary.get('n_classes')} labels",
            "regression": f"regression target(s) {', '.join(summary.get('target_names') or [])}"}[target_type]
    lines = _opening(
        f"# vertebrae report: {name}",
        f"Labelled protocol ({target_type}) on dataset `{summary.get('identity')}`: {summary.get('n_rows')} rows, {what}. "
        "OverlapIndex score: 1 = the targets occupy separate regions of the embedding, 0 = complete overlap "
        f"(the permutation null for regression). Seed {result.metadata.get('seed')}.",
    )
    rows = result.table_rows()
    if not result.ranking_available:
        lines += ["Ranking unavailable: no candidate's primary metric is aggregate-valid.", ""]
    table = [[_interval(row[key]) if key == "stability_interval" else row[key] for key in HEADERS] for row in rows]
    lines += _table(list(HEADERS.values()), table)
    lines += _not_ranked(result)
    ranked = _all_candidates(result)  # unranked candidates still get their sections
    labels = summary.get("labels") or {}
    if labels:
        lines += ["", "## Per-class scores" if target_type == "classification" else "## Per-label scores", ""]
        per_class = [[labels[key], summary.get("class_counts", {}).get(key)] + [r.overlap.per_class_scores.get(key) for r in ranked]
                     for key in labels]
        lines += _table(["class" if target_type == "classification" else "label", "rows"] + [r.name for r in ranked], per_class)
    if target_type == "regression":
        lines += ["", "## Regression diagnostics", ""]
        lines += _table(["extractor", "score", "loss ratio", "null mode", "prototypes"],
                        [[r.name, r.overlap.score, r.overlap.loss_ratio, (r.overlap.continuous or {}).get("null_mode"),
                          (r.overlap.continuous or {}).get("n_prototypes")] for r in ranked])
    custom = sorted({m for r in ranked for m in r.custom_metrics})
    if custom:
        lines += ["", "## Custom metrics", ""]
        lines += _table(["extractor"] + custom, [[r.name] + [r.custom_metrics[m].score if m in r.custom_metrics else None for m in custom]
                                                 for r in ranked])
    diagnosed = [r for r in ranked if r.separatix is not None]
    if diagnosed:
        lines += ["", "## Separatix", ""]
        lines += _table(
            ["extractor", "ran", "recommendation", "confidence", "decision path", "skipped"],
            [[r.name, r.separatix.ran, r.separatix.recommendation, r.separatix.confidence,
              " > ".join(r.separatix.decision_path) or None, r.separatix.skipped_reason] for r in diagnosed],
        )
    lines += result_comparison_lines(result)
    lines += _warnings([(r.name, w) for r in ranked for w in list(r.warnings) + list(r.overlap.warnings)
                        + (list(r.compression_metadata.get("warnings", [])) if r.compression_metadata else [])
                        + [f"stability: {w}" for w in (r.stability.warnings if r.stability is not None else [])
                           if w.startswith(COLLAPSE_CODE) and w not in r.overlap.warnings]
                        + [f"{m.name}: {text}" for m in r.custom_metrics.values() for text in m.warnings]])
    lines += [
        "",
        "Per-class score = 1 minus the largest fraction of the class's rows whose nearest prototypes belong to one "
        "competing class. Compare extractors only at the same k settings; see `k_per_class` in the JSON report. "
        "Stability intervals are percentile intervals of repeated scores, not confidence intervals.",
        "",
    ]
    return "\n".join(lines)


def render_retrieval_markdown(result) -> str:
    """Retrieval report: ranking table, quality cohort, similarity diagnostics (forward direction)."""
    meta, summary = result.metadata, result.dataset_summary
    lines = _cohort_opening(
        result,
        f"# vertebrae retrieval report: {meta.get('benchmark', 'benchmark')}",
        f"Exact {meta.get('similarity')} ranking of {summary.get('n_queries')} queries against {summary.get('n_gallery')} "
        f"gallery items (dataset `{summary.get('identity')}`). Primary metric: {meta.get('primary_metric')}"
        f"{' (mean of both directions)' if meta.get('bidirectional') else ''}. NDCG uses gain 2^grade - 1; MRR has no "
        "cutoff; mAP averages over all relevant items; ties are broken by gallery row order.",
    )
    lines += ["## Similarity diagnostics (forward)", ""]
    diag_rows = []
    for r in result.ranked_results():
        d = r.score.forward.summaries
        diag_rows.append([r.name] + [(d.get(k) or {}).get("mean") for k in ("positive_similarity", "nearest_negative_similarity", "margin")])
    lines += _table(["extractor", "positive similarity (mean)", "nearest negative (mean)", "margin (mean)"], diag_rows)
    lines += result_comparison_lines(result)
    lines += _warnings([(r.name, w) for r in _all_candidates(result) for w in r.score.forward.warnings
                        + (r.score.reverse.warnings if r.score.reverse is not None else [])])
    lines.append("")
    return "\n".join(lines)


def render_zero_shot_markdown(result) -> str:
    """Zero-shot report: ranking, quality cohort, prompts per class, per-class recall.

    Prompt texts stay in the JSON report; the Markdown shows how many prompts each class has.
    """
    meta, summary = result.metadata, result.dataset_summary
    labels = summary.get("labels", {})
    lines = _cohort_opening(
        result,
        f"# vertebrae zero-shot report: {meta.get('benchmark', 'benchmark')}",
        f"{summary.get('n_samples')} samples of {summary.get('n_classes')} classes scored against "
        f"{summary.get('n_prompts')} fixed prompts (dataset `{summary.get('identity')}`), {meta.get('similarity')} "
        f"similarity to per-class prompt prototypes. Primary metric: {meta.get('primary_metric')}. Ties go to the first "
        "class in declared order. OverlapIndex on the same sample embeddings is reported beside it, never combined.",
    )
    lines += ["## Prompts per class", ""]
    counts = summary.get("prompt_counts", {})
    lines += _table(["class", "samples", "prompts"],
                    [[labels.get(k, k), summary.get("class_counts", {}).get(k), n] for k, n in counts.items()])
    lines += ["", "## Per-class recall", ""]
    ranked = result.ranked_results()
    lines += _table(["class"] + [r.name for r in ranked],
                    [[labels.get(k, k)] + [r.zero_shot.per_class[k]["recall"] for r in ranked] for k in counts])
    lines += result_comparison_lines(result)
    lines += _warnings([(r.name, w) for r in _all_candidates(result) for w in r.warnings])
    lines.append("")
    return "\n".join(lines)
