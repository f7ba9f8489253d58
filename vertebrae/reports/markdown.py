"""Markdown rendering of a BenchmarkResult: ranking table, per-class scores, warnings."""

from __future__ import annotations

from typing import Any


def _cell(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.4f}"
    return str(value).replace("|", "\\|").replace("\n", " ")


def _table(header: list[str], rows: list[list[Any]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(_cell(v) for v in row) + " |" for row in rows]
    return lines


def render_markdown(result) -> str:
    """Human-readable report; every number also lives in the JSON report."""
    name = result.metadata.get("benchmark", "benchmark")
    summary = result.dataset_summary
    lines = [
        f"# vertebrae report: {name}",
        "",
        f"Labelled protocol on dataset `{summary.get('identity')}`: {summary.get('n_rows')} rows, "
        f"{summary.get('n_classes')} classes. Primary score: OverlapIndex macro score "
        "(1 = classes occupy separate regions, 0 = complete overlap). "
        f"MiniBatchKMeans seed {result.metadata.get('seed')}.",
        "",
        "## Ranking",
        "",
    ]
    rows = result.table_rows()
    header = ["rank", "extractor", "primary metric", "primary score", "overlap macro", "overlap weighted",
              "weakest class", "weakest score", "dim", "warnings"]
    lines += _table(header, [list(row.values()) for row in rows])
    ranked = result.ranked_results()
    if ranked:
        keys = list(summary.get("labels", {}))
        lines += ["", "## Per-class scores", ""]
        per_class = [[summary["labels"][key], summary.get("class_counts", {}).get(key)]
                     + [r.overlap.per_class_scores.get(key) for r in ranked] for key in keys]
        lines += _table(["class", "rows"] + [r.name for r in ranked], per_class)
    warned = [(r.name, w) for r in ranked for w in list(r.warnings) + list(r.overlap.warnings)]
    lines += ["", "## Warnings", ""]
    lines += [f"- **{_cell(n)}**: {_cell(w)}" for n, w in warned] or ["None."]
    lines += [
        "",
        "Per-class score = 1 minus the largest fraction of the class's rows whose nearest prototypes belong to one "
        "competing class. Compare extractors only at the same k settings; see `k_per_class` in the JSON report.",
        "",
    ]
    return "\n".join(lines)
