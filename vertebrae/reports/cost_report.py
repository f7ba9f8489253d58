"""A benchmark report's "Quality vs cost" section and its links to its figures (``report.md``, and so report.html).

The section is rendered from the report alone (``vertebrae verify`` renders report.md again from report.json): every
candidate's quality, rank and verdict against the leader (the paired comparison), its cost columns as report.json
carries them (``metadata["cost"]``, ``vertebrae.reports.costs``; unknown where null, never zero), whether it is on the
Pareto front of quality against each cost (``throughput``, ``bytes_per_vector``, ``dim``), and the line "cheapest
candidate statistically tied with the leader" by the report's ``CostConfig.cheapest_tied_by`` (``metadata["costs"]``;
default ``size``: bytes per vector, then dim), naming the cost it used. An embedding cost measured on too few rows
reads "too few rows to measure", never a number.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from vertebrae.reports.costs import CONFIG_KEY, Cost, CostConfig, stored_cost
from vertebrae.reports.leaderboard import cheapest_tied_line, leaderboard_rows, pareto_front
from vertebrae.reports.text import markdown_text

TITLE = "Quality vs cost"
FIGURES_TITLE = "Figures"
PARETO_KINDS = ("throughput", "bytes_per_vector", "dim")
COST_HEADERS = ("embed s / 1k rows", "peak memory (MB)", "dim", "bytes / vector", "score s")
FIGURES = (("Ranking", "ranking.png"), ("Detail", "detail.png"), ("Comparison", "comparison.png"))
SOURCES = {"job measurements": "the embed jobs' steady-state throughput and what each job measured of itself",
           "benchmark records": "the embed jobs' steady-state throughput and the jobs' Snakemake benchmark records",
           "embed jobs": "the embed jobs' steady-state throughput", "measured in process": "measured in process",
           "none": "no record"}


def _fmt(value: Any) -> str:
    if value is None:
        return "unknown"
    if isinstance(value, float):
        return f"{value:.4g}" if abs(value) >= 10 else f"{value:.4f}"
    return str(value)


def _document(result: Any) -> Mapping[str, Any] | None:
    to_dict = getattr(result, "to_dict", None)
    try:
        return to_dict() if callable(to_dict) else None
    except (AttributeError, TypeError, KeyError):
        return None


def cost_lines(result: Any) -> list[str]:
    """The ``## Quality vs cost`` section of a report (a result object with ``to_dict``); none for other objects."""
    document = _document(result)
    if not document:
        return []
    key = "extractor_results" if "extractor_results" in document else "candidate_results"
    candidates = document.get(key) or []
    costs = {("report", str(c["name"])): stored_cost(c) or Cost() for c in candidates}
    rows = leaderboard_rows([("report", document)], costs=costs)
    if not rows:
        return []
    fronts = {kind: {r.candidate for r in pareto_front(rows, kind)} for kind in PARETO_KINDS}
    config = CostConfig.from_dict((document.get("metadata") or {}).get(CONFIG_KEY))
    sources = sorted({str(((c.get("metadata") or {}).get("cost") or {}).get("source", "none")) for c in candidates})
    header = ["candidate", markdown_text(rows[0].metric), "rank", "verdict", *COST_HEADERS, "Pareto front"]
    lines = ["", f"## {TITLE}", "",
             "What each candidate costs beside its quality (times and memory from "
             + " and ".join(SOURCES.get(s, s) for s in sources) + "; unknown where nothing records it). "
             "Pareto front: no other candidate is both better and cheaper by that cost.", "",
             "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for r in rows:
        front = ", ".join(kind for kind in PARETO_KINDS if r.candidate in fronts[kind]) or "–"
        embed = r.embed_status if r.cost_text_status("throughput") else _fmt(r.embed_seconds_per_1k_rows)
        cells = [r.candidate, _fmt(r.value), "unranked" if r.rank is None else str(r.rank), r.verdict, embed,
                 *(_fmt(v) for v in (r.peak_memory_mb, r.dim, r.bytes_per_vector, r.score_seconds)), front]
        lines.append("| " + " | ".join(markdown_text(c) for c in cells) + " |")
    lines += ["", f"- {markdown_text(cheapest_tied_line(rows, config.cheapest_tied_by))}"]
    return lines


def figure_lines() -> list[str]:
    """The ``## Figures`` section: links to the figures ``vertebrae figures`` draws beside report.md."""
    return ["", f"## {FIGURES_TITLE}", "",
            "Drawn beside this file by `vertebrae figures` (the workflow's figures job): "
            + ", ".join(f"[{label}]({name})" for label, name in FIGURES) + "."]


__all__ = ["COST_HEADERS", "FIGURES", "FIGURES_TITLE", "TITLE", "cost_lines", "figure_lines"]
