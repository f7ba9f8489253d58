"""Markdown rendering of a ZeroShotBenchmarkResult: ranking, prompt counts, per-class recall, warnings.

Prompt texts stay in the JSON report; the Markdown shows how many prompts each class has.
"""

from __future__ import annotations

from vertebrae.reports.markdown import _cell, _table


def render_zero_shot_markdown(result) -> str:
    meta, summary = result.metadata, result.dataset_summary
    labels = summary.get("labels", {})
    lines = [
        f"# vertebrae zero-shot report: {meta.get('benchmark', 'benchmark')}",
        "",
        f"{summary.get('n_samples')} samples of {summary.get('n_classes')} classes scored against "
        f"{summary.get('n_prompts')} fixed prompts (dataset `{summary.get('identity')}`), {meta.get('similarity')} "
        f"similarity to per-class prompt prototypes. Primary metric: {meta.get('primary_metric')}. Ties go to the first "
        "class in declared order. OverlapIndex on the same sample embeddings is reported beside it, never combined.",
        "",
        "## Ranking",
        "",
    ]
    rows = result.table_rows()
    header = list(rows[0]) if rows else ["rank", "extractor"]
    lines += _table(header, [list(row.values()) for row in rows])
    lines += ["", f"Quality cohort (within 0.01 of the best): {', '.join(result.quality_cohort()) or '–'}", ""]
    lines += ["## Prompts per class", ""]
    counts = summary.get("prompt_counts", {})
    lines += _table(["class", "samples", "prompts"],
                    [[labels.get(k, k), summary.get("class_counts", {}).get(k), n] for k, n in counts.items()])
    lines += ["", "## Per-class recall", ""]
    ranked = result.ranked_results()
    lines += _table(["class"] + [r.name for r in ranked],
                    [[labels.get(k, k)] + [r.zero_shot.per_class[k]["recall"] for r in ranked] for k in counts])
    warned = [(r.name, w) for r in ranked for w in r.warnings]
    lines += ["", "## Warnings", ""]
    lines += [f"- **{_cell(n)}**: {_cell(w)}" for n, w in warned] or ["None."]
    lines.append("")
    return "\n".join(lines)
