"""Markdown rendering of the three protocols' ranked reports; every number also lives in the JSON report.

Each renderer takes a result object (duck-typed: ``metadata``, ``dataset_summary``, ``table_rows()``,
``ranked_results()``) and returns the report text: a title and introduction, ``## Ranking``, the protocol's own
sections, the paired comparison ``## Is the leader really ahead?`` (``reports.comparison``; nothing for a
result without ``comparison`` and ``comparison_skipped``), then ``## Warnings``. Table cells (``reports.comparison``'s
``cell`` and ``table``): None is ``–``, floats have 4 decimals, pipes are escaped. A candidate listed without a rank
because its embedding collapsed gets a ``Not ranked`` line under the table saying why.

- Labelled: the ranking leaves out a column equal in every row to its partner (``REDUNDANT``: overlap score =
  primary score, overlap macro = overlap score, as for classification with the default primary metric) and says
  so; a stability interval that excludes its candidate's overlap score is marked with a dagger and explained
  under the table; the ``## Separatix`` section and its warnings come from ``reports.separatix``; the closing
  note explains per-class (per-label) scores, or the regression score when there is no per-class table.
- Retrieval: the ranking shows NDCG, precision, recall and hit rate at each k, MRR and mAP (at each k under
  conventions that cut them); the introduction names the conventions the numbers follow
  (``scoring.retrieval.conventions.describe``; a report without ``conventions`` metadata: vertebrae's); the
  similarity diagnostics show the per-query parts of the margin (best positive, nearest negative) beside the mean
  over all positive pairs.
- Zero-shot: ``## Compression`` names every variant whose transform was fitted on the evaluation samples; the
  Warnings list each distinct message once with the candidates that raised it, and the side OverlapIndex's
  "k reduced" warnings that differ only in the class as one line with their count.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import numpy as np

from vertebrae.reports.comparison import cell as _cell
from vertebrae.reports.comparison import result_comparison_lines
from vertebrae.reports.comparison import table as _table
from vertebrae.reports.cost_report import cost_lines, figure_lines
from vertebrae.reports.separatix import separatix_lines, separatix_warnings
from vertebrae.reports.steps import step_lines
from vertebrae.reports.text import IDENTITY_LINE, dataset_label, markdown_text
from vertebrae.scoring.degenerate import CODE as COLLAPSE_CODE
from vertebrae.scoring.retrieval.conventions import describe as describe_conventions


def _opening(title: str, introduction: str, summary: Mapping[str, Any] | None = None) -> list[str]:
    """The title, the introduction paragraph (then the dataset's identity key, where the introduction names the
    dataset otherwise) and the ``## Ranking`` heading."""
    lines = [title, "", introduction, ""]
    if summary is not None and dataset_label(summary) != str(summary.get("identity")):
        lines += [f"{IDENTITY_LINE}{_cell(summary.get('identity'))} (what the fingerprints key on).", ""]
    return lines + ["## Ranking", ""]


def _row_table(rows: list[dict[str, Any]]) -> list[str]:
    """A table whose columns are the keys of the first row (``rank``, ``extractor`` when there is none), headed in
    the words every protocol's ranking uses (:data:`HEADERS`, :data:`COLUMN_WORDS`); metric names stay as named."""
    keys = list(rows[0]) if rows else ["rank", "extractor"]
    return _table([HEADERS.get(k, COLUMN_WORDS.get(k, k)) for k in keys], [list(row.values()) for row in rows])


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
    return _opening(title, introduction, result.dataset_summary) + _row_table(result.table_rows()) + _not_ranked(result) + [
        "", f"Quality cohort (within 0.01 of the best): {', '.join(map(_cell, result.quality_cohort())) or '–'}", ""]


def _warnings(warned: list[tuple[str, str]], extra: list[str] | None = None) -> list[str]:
    """The ``## Warnings`` section: one ``- **candidate**: text`` line each, then ``extra`` lines, or ``None.``."""
    lines = [f"- **{_cell(n)}**: {_cell(w)}" for n, w in warned] + list(extra or [])
    return ["", "## Warnings", ""] + (lines or ["None."])


HEADERS = {  # every column of BenchmarkResult.to_dataframe(), in the same order
    "rank": "rank", "extractor": "extractor", "primary_metric": "primary metric", "primary_score": "primary score",
    "overlap_score": "overlap score", "overlap_macro": "overlap macro", "overlap_weighted": "overlap weighted",
    "stability_interval": "stability interval", "weakest_class": "weakest class", "best_probe": "best probe",
    "probe_metric": "probe metric", "probe_score": "probe score", "embedding_dim": "dim", "compression": "compression",
    "recommendation": "recommendation",
}

COLUMN_WORDS = {"margin_mean": "margin mean", "reverse_primary": "reverse primary"}  # retrieval, zero-shot columns


def _interval(value: Any) -> str | None:
    return None if value is None else f"[{value[0]:.4f}, {value[1]:.4f}]"


# A column left out of the Markdown ranking when, in every row, it equals the column named beside it (the JSON
# report and to_dataframe() keep it): for classification and multi-label the overlap score is the macro score,
# and with the default primary metric it is the primary score too.
REDUNDANT = {"overlap_score": "primary_score", "overlap_macro": "overlap_score"}
DAGGER = "\u2020"


def _redundant_columns(rows: list[dict[str, Any]]) -> list[str]:
    """The ``REDUNDANT`` columns equal to their partner in every row (none without rows)."""
    return [key for key, same in REDUNDANT.items() if rows and all(row[key] == row[same] for row in rows)]


def _outside(result) -> bool:
    """True when the candidate's overlap score lies outside its own stability interval."""
    if result.stability is None:
        return False
    summary = result.stability.summary
    return not summary["interval_low"] <= result.overlap.score <= summary["interval_high"]


def _stability_caveat(outside: list) -> list[str]:
    """The note under the ranking naming the candidates whose overlap score lies outside their stability interval."""
    if not outside:
        return []
    first = outside[0].stability
    how = (f"re-clustered with {first.repeats} other seeds on the same rows" if first.mode == "prototype" else
           f"scored on {first.repeats} row subsamples")
    names = ", ".join(f"**{_cell(r.name)}**" for r in outside)
    return ["", f"{DAGGER} The overlap score of {names} lies outside its stability interval. The interval is the spread "
            f"of {first.repeats} repeats of a resampled score ({first.mode} mode: {how}), not an interval around the "
            "full-data point score, which may lie outside it."]


def _ranking_lines(result, rows: list[dict[str, Any]]) -> list[str]:
    """The labelled ranking table without redundant columns, with the stability caveat where it applies."""
    dropped = _redundant_columns(rows)
    keys = [key for key in HEADERS if key not in dropped]
    by_name = {r.name: r for r in result.extractor_results}
    outside = [by_name[row["extractor"]] for row in rows if _outside(by_name[row["extractor"]])]
    marked = {r.name for r in outside}

    def value(row: dict[str, Any], key: str) -> Any:
        if key != "stability_interval":
            return row[key]
        text = _interval(row[key])
        return f"{text} {DAGGER}" if text is not None and row["extractor"] in marked else text

    lines = _table([HEADERS[key] for key in keys], [[value(row, key) for key in keys] for row in rows])
    if dropped:
        same = {"overlap_score": "the overlap score equals the primary score",
                "overlap_macro": "the overlap macro score equals the overlap score"}
        names = " and ".join(HEADERS[k].capitalize() if i == 0 else HEADERS[k] for i, k in enumerate(dropped))
        lines += ["", f"{names} {'is' if len(dropped) == 1 else 'are'} left out of this table: for every candidate "
                  f"{' and '.join(same[k] for k in dropped)} (the JSON report and to_dataframe() keep "
                  f"{'it' if len(dropped) == 1 else 'both'})."]
    return lines + _stability_caveat(outside)


def _closing_note(result, target_type: str) -> list[str]:
    """The notes under the Warnings: what the per-class (per-label) or regression scores mean, and stability."""
    if target_type == "regression":
        text = ("Regression score: 1 = no observed harmful continuous-target overlap, 0 = no better than the "
                "permutation null (or worse); loss ratio = observed loss / permutation-null loss. Compare extractors "
                "only at the same k and null settings.")
    else:
        unit = "class" if target_type == "classification" else "label"
        text = (f"Per-{unit} score = 1 minus the largest fraction of the {unit}'s rows whose nearest prototypes "
                f"belong to one competing {unit}. Compare extractors only at the same k settings; see `k_per_class` "
                "in the JSON report.")
    if any(r.stability is not None for r in result.extractor_results):
        text += " Stability intervals are percentile intervals of repeated scores, not confidence intervals."
    return ["", text, ""]


def _recipe_lines(ranked, metrics) -> list[str]:
    """A line per metric computed with a published recipe (its metadata's ``recipe``, e.g. the linear probe's
    clip_benchmark or mteb), so a reader knows whose number the column is."""
    named = {}
    for r in ranked:
        for m in metrics:
            recipe = (r.custom_metrics[m].metadata or {}).get("recipe") if m in r.custom_metrics else None
            if isinstance(recipe, str):
                named.setdefault(m, recipe)
    return ["", *(f"- {markdown_text(m)} is computed with recipe {markdown_text(named[m])} "
                  "(docs/conventions.md, 'Labelled metrics')." for m in sorted(named))] if named else []


def _metric_cell(candidate, metric: str, interval) -> str | None:
    if metric not in candidate.custom_metrics:
        return None
    score = _cell(candidate.custom_metrics[metric].score)
    return score if interval is None else f"{score} [{_cell(interval[0])}, {_cell(interval[1])}]"


def _view_sentence(result) -> str:
    """A target view's report (``metadata["view"]``): which view, and for a nuisance that lower is better."""
    view = result.metadata.get("view") or {}
    if not view:
        return ""
    if view.get("role") != "nuisance":
        return f" Target view {_cell(view.get('name'))} (task: higher separation is better)."
    return (f" Target view {_cell(view.get('name'))} is a **nuisance**: lower separation is better, so candidates are "
            f"ranked lowest first; rank 1 encodes {_cell(view.get('name'))} least.")


def render_markdown(result) -> str:
    """Labelled report: ranking, per-class (per-label) scores, regression diagnostics, custom metrics, Separatix."""
    name = result.metadata.get("benchmark", "benchmark")
    summary = result.dataset_summary
    target_type = summary.get("target_type", "classification")
    what = {"classification": f"{summary.get('n_classes')} classes", "multilabel": f"{summary.get('n_classes')} labels",
            "regression": f"regression target(s) {_cell(', '.join(map(str, summary.get('target_names') or [])))}"}[target_type]
    lines = _opening(
        f"# vertebrae report: {_cell(name)}",
        f"Labelled protocol ({target_type}) on dataset {_cell(dataset_label(summary))}: {summary.get('n_rows')} rows, {what}. "
        "OverlapIndex score: 1 = the targets occupy separate regions of the embedding, 0 = complete overlap "
        f"(the permutation null for regression). Seed {result.metadata.get('seed')}.{_view_sentence(result)}", summary,
    )
    rows = result.table_rows()
    if not result.ranking_available:
        lines += ["Ranking unavailable: no candidate's primary metric is aggregate-valid.", ""]
    lines += _ranking_lines(result, rows)
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
        interval = getattr(result, "metric_interval", lambda *_: None)
        lines += ["", "## Metrics", "", "Each declared metric's score, with its paired-bootstrap interval where the "
                  "metric keeps per-unit values (samples, episodes or k-means seeds).", ""]
        lines += _table(["extractor"] + custom, [[r.name] + [_metric_cell(r, m, interval(r.name, m)) for m in custom]
                                                 for r in ranked])
        lines += _recipe_lines(ranked, custom)
    lines += step_lines(result.metadata)  # checkpoint sweeps (reports.steps)
    lines += separatix_lines(ranked)
    lines += result_comparison_lines(result)
    lines += cost_lines(result)
    lines += _warnings([(r.name, w) for r in ranked for w in list(r.warnings) + list(r.overlap.warnings)
                        + (list(r.compression_metadata.get("warnings", [])) if r.compression_metadata else [])
                        + [f"stability: {w}" for w in (r.stability.warnings if r.stability is not None else [])
                           if w.startswith(COLLAPSE_CODE) and w not in r.overlap.warnings]
                        + [f"{m.name}: {text}" for m in r.custom_metrics.values() for text in m.warnings]
                        + separatix_warnings(r)])
    lines += _closing_note(result, target_type)
    lines += figure_lines()
    return "\n".join(lines)


def _similarity_row(candidate) -> list[Any]:
    """Means over the queries that have a margin (an eligible negative), so that margin = best - nearest."""
    forward = candidate.score.forward
    margin = np.asarray(forward.per_query["margin"], dtype=np.float64)
    has = ~np.isnan(margin)
    best = np.asarray(forward.per_query["best_positive_similarity"], dtype=np.float64)[has]
    nearest = np.asarray(forward.per_query["nearest_negative_similarity"], dtype=np.float64)[has]
    pairs = forward.summaries.get("positive_similarity") or {}
    return [candidate.name, _mean(best), _mean(nearest), _mean(margin[has]), int(has.sum()), pairs.get("mean"),
            pairs.get("count")]


def _mean(values: np.ndarray) -> float | None:
    return float(values.mean()) if values.size else None


def _similarity_lines(ranked: list) -> list[str]:
    """The forward similarity diagnostics: the per-query quantities the margin is made of, then all positive pairs."""
    lines = ["## Similarity diagnostics (forward)", "",
             "Per query: best positive = the similarity of its most similar relevant item, nearest negative = that of "
             "its most similar non-relevant item, margin = best positive - nearest negative. The three are means over "
             "the queries that have an eligible negative, so margin = best positive - nearest negative. "
             "All positive pairs = the mean similarity over every (query, relevant item) pair, not only each "
             "query's best.", ""]
    return lines + _table(["extractor", "best positive (mean per query)", "nearest negative (mean per query)",
                           "margin (mean per query)", "queries", "all positive pairs (mean)", "positive pairs"],
                          [_similarity_row(r) for r in ranked])


def render_retrieval_markdown(result) -> str:
    """Retrieval report: ranking table, quality cohort, similarity diagnostics (forward direction)."""
    meta, summary = result.metadata, result.dataset_summary
    lines = _cohort_opening(
        result,
        f"# vertebrae retrieval report: {_cell(meta.get('benchmark', 'benchmark'))}",
        f"Exact {meta.get('similarity')} ranking of {summary.get('n_queries')} queries against {summary.get('n_gallery')} "
        f"gallery items (dataset {_cell(dataset_label(summary))}). Primary metric: {meta.get('primary_metric')}"
        f"{' (mean of both directions)' if meta.get('bidirectional') else ''}. "
        + describe_conventions(meta.get("conventions")),
    )
    lines += _similarity_lines(result.ranked_results())
    lines += result_comparison_lines(result)
    lines += cost_lines(result)
    lines += _warnings([(r.name, w) for r in _all_candidates(result) for w in r.score.forward.warnings
                        + (r.score.reverse.warnings if r.score.reverse is not None else [])])
    lines.append("")
    lines += figure_lines()
    return "\n".join(lines)


def render_zero_shot_markdown(result) -> str:
    """Zero-shot report: ranking, quality cohort, prompts per class, per-class recall.

    Prompt texts stay in the JSON report; the Markdown shows how many prompts each class has.
    """
    meta, summary = result.metadata, result.dataset_summary
    labels = summary.get("labels", {})
    lines = _cohort_opening(
        result,
        f"# vertebrae zero-shot report: {_cell(meta.get('benchmark', 'benchmark'))}",
        f"{summary.get('n_samples')} samples of {summary.get('n_classes')} classes scored against "
        f"{summary.get('n_prompts')} fixed prompts (dataset {_cell(dataset_label(summary))}), {meta.get('similarity')} "
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
    lines += _fitted_on_samples(_all_candidates(result), summary.get("n_samples"))
    lines += result_comparison_lines(result)
    lines += cost_lines(result)
    candidates = _all_candidates(result)
    lines += _warnings([], _grouped_warning_lines(candidates))
    lines.append("")
    lines += figure_lines()
    return "\n".join(lines)


def _fitted_on_samples(candidates: list, n_samples: Any) -> list[str]:
    """A ``## Compression`` note naming the compressed variants whose transform was fitted on the evaluation samples."""
    fitted = [r for r in candidates if (r.compression_metadata or {}).get("applied")
              and (r.compression_metadata or {}).get("fit_side") == "samples"]
    if not fitted:
        return []
    lines = ["", "## Compression", ""]
    for r in fitted:
        meta = r.compression_metadata
        rows = meta.get("fit_rows", n_samples)
        lines.append(f"- **{_cell(r.name)}**: the {_cell(meta.get('method'))} transform was fitted on the {rows} "
                     "evaluation samples themselves (without their labels) and then applied to the prompts, so this "
                     "variant's scores are not held out from its compression fit.")
    return lines


_K_REDUCED = re.compile(r"^k reduced for small class (?P<cls>.+): (?P<rest>\d+ -> \d+ \(.*\))$")


def _grouped_warning_lines(candidates: list) -> list[str]:
    """The zero-shot Warnings: each distinct zero-shot warning once, with the candidates that raised it; then the
    side OverlapIndex's warnings, one line per distinct message with its count and candidates, where the "k
    reduced" warnings that differ only in the class (same reduction, rows and setting) are one message."""
    groups: dict[tuple[str, str], dict[str, list[str]]] = {}

    def add(key: tuple[str, str], name: str, text: str, cls: str | None = None) -> None:
        entry = groups.setdefault(key, {"names": [], "classes": [], "texts": []})
        if name not in entry["names"]:
            entry["names"].append(name)
        if cls is not None and cls not in entry["classes"]:
            entry["classes"].append(cls)
        entry["texts"].append(text)

    for r in candidates:
        for text in r.zero_shot.warnings:
            add(("zero-shot", text), r.name, text)
    for r in candidates:
        for text in r.overlap.warnings:
            match = _K_REDUCED.match(text)
            add(("k", match["rest"]) if match else ("overlap", text), r.name, text, match["cls"] if match else None)
    lines = []
    for (kind, text), entry in groups.items():
        names = ", ".join(f"**{_cell(n)}**" for n in entry["names"])
        if kind == "zero-shot":
            lines.append(f"- {names}: {_cell(text)}")
            continue
        if kind == "k":
            classes = entry["classes"]
            shown = ", ".join(classes[:10]) + (", ..." if len(classes) > 10 else "")
            text = f"k reduced for {len(classes)} small class(es) ({shown}): {text}"
        lines.append(f"- {names}: OverlapIndex (side score), {len(entry['texts'])} warning(s): {_cell(text)}")
    return lines
