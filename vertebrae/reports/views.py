"""The views report of a labelled benchmark: every candidate under every target view, the nuisance verdicts and the
score-by-level figure of a label hierarchy (``vertebrae.data.target_views``).

Input: each view's labelled report document (``report.json``: ``extractor_results``, ``ranking``, ``comparison``)
and the views' declaration (``view``, ``role``, ``type``, ``level``, ``alias``). A task view ranks candidates by
its primary score, highest first; a nuisance view lowest first (lower separation of a nuisance is better). A
candidate *encodes a nuisance significantly more* than another when that view's paired comparison finds it ahead
(``verdict: ahead`` after the family-wise adjustment). The primary ranking stays the primary view's.
"""

from __future__ import annotations

import io
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from vertebrae.core.errors import CorruptArtifactError, ValidationError
from vertebrae.core.fingerprint import canonical_json, sha256_hex
from vertebrae.reports.text import markdown_text

SCHEMA = "vertebrae.views/v1"
FILES = ("views.json", "views.md", "views.png")  # in results/reports/BENCH/ (planning.views)
_HASH = "content_hash"


def _content_hash(document: Mapping[str, Any]) -> str:
    return sha256_hex(canonical_json({k: v for k, v in document.items() if k != _HASH}))


def _scores(report: Mapping[str, Any]) -> dict[str, float | None]:
    return {c["name"]: c.get("primary_score") for c in report["extractor_results"]}


def _encoders(report: Mapping[str, Any]) -> tuple[list[dict[str, Any]], str | None]:
    """Who is significantly ahead of whom in the view's comparison; (entries, why none) ."""
    comparison = report.get("comparison")
    if comparison is None:
        return [], report.get("comparison_skipped") or "no comparison"
    more: dict[str, list[str]] = {}
    for pair in comparison["pairs"]:
        if pair["verdict"] == "ahead":
            more.setdefault(pair["a"], []).append(pair["b"])
        elif pair["verdict"] == "behind":
            more.setdefault(pair["b"], []).append(pair["a"])
    order = [c["name"] for c in comparison["candidates"]]
    return [{"candidate": name, "more_than": sorted(more[name], key=order.index)}
            for name in order if name in more], None


def views_summary(reports: Mapping[str, Mapping[str, Any]], views: Sequence[Mapping[str, Any]], *, benchmark: str,
                  primary: str) -> dict[str, Any]:
    """The views document: ``table`` (candidate -> view -> primary score), ``rankings`` per view (task: highest
    first, nuisance: lowest first), ``nuisance`` verdicts, ``levels`` (a hierarchy's views, root first)."""
    resolved = {v["view"]: (v["alias"] or v["view"]) for v in views}
    missing = sorted({name for name in resolved.values() if name not in reports})
    if missing:
        raise ValidationError(f"views report of {benchmark!r}: no report for view(s) {missing}")
    primary_report = reports[resolved[primary]]
    candidates = list(primary_report["ranking"]) + [c["name"] for c in primary_report["extractor_results"]
                                                     if c["name"] not in primary_report["ranking"]]
    table = {name: {} for name in candidates}
    entries, rankings, nuisance = [], {}, {}
    for view in views:
        report = reports[resolved[view["view"]]]
        scores = _scores(report)
        if sorted(scores) != sorted(candidates):
            raise ValidationError(f"views report of {benchmark!r}: view {view['view']!r} scores {sorted(scores)}, "
                                  f"not the candidates {sorted(candidates)}")
        for name in candidates:
            table[name][view["view"]] = scores[name]
        nuisance_view = view["role"] == "nuisance"
        valid = [n for n in report["ranking"]]
        rankings[view["view"]] = sorted(valid, key=lambda n: scores[n] if nuisance_view else -scores[n])
        metric = (report["extractor_results"][0].get("primary_metric_name") if report["extractor_results"] else None)
        entries.append({**dict(view), "metric": metric, "better": "lower" if nuisance_view else "higher"})
        if nuisance_view:
            found, why = _encoders(report)
            nuisance[view["view"]] = {"encoders": found, **({"skipped": why} if why else {})}
    levels = [v["view"] for v in sorted((v for v in views if v.get("level") is not None), key=lambda v: v["level"])]
    return {"schema": SCHEMA, "benchmark": benchmark, "primary": primary, "views": entries, "candidates": candidates,
            "table": table, "rankings": rankings, "nuisance": nuisance, "levels": levels or None}


def _cell(value: Any) -> str:
    return "—" if value is None else f"{value:.4f}"


def views_markdown(summary: Mapping[str, Any]) -> str:
    """A candidates x views table (primary ranking order), the nuisance verdicts and the per-level table."""
    views = summary["views"]
    head = [f"{markdown_text(v['view'])} ({'nuisance, lower is better' if v['role'] == 'nuisance' else 'task'}"
            f"{', primary' if v['view'] == summary['primary'] else ''})" for v in views]
    lines = [f"# {markdown_text(summary['benchmark'])}: target views", "",
             f"Candidates in the primary view's ranking ({markdown_text(summary['primary'])}); each cell is the "
             "view's primary score.", "",
             "| candidate | " + " | ".join(head) + " |", "|---|" + "---|" * len(views)]
    for name in summary["candidates"]:
        lines.append(f"| {markdown_text(name)} | " + " | ".join(_cell(summary["table"][name][v["view"]])
                                                               for v in views) + " |")
    if summary["nuisance"]:
        lines += ["", "## Nuisance targets", ""]
        for view, verdict in summary["nuisance"].items():
            best = summary["rankings"][view][:1]
            if verdict["encoders"]:
                for entry in verdict["encoders"]:
                    lines.append(f"- **{markdown_text(entry['candidate'])}** encodes {markdown_text(view)} "
                                 f"significantly more than {', '.join(markdown_text(n) for n in entry['more_than'])}.")
            elif "skipped" in verdict:
                lines.append(f"- {markdown_text(view)}: no paired comparison ({markdown_text(verdict['skipped'])}).")
            else:
                lines.append(f"- {markdown_text(view)}: no candidate encodes it significantly more than another.")
            if best:
                lines.append(f"- Least encoding of {markdown_text(view)}: {markdown_text(best[0])}.")
    if summary["levels"]:
        lines += ["", "## Score by hierarchy level (root first)", "",
                  "| candidate | " + " | ".join(markdown_text(level) for level in summary["levels"]) + " |",
                  "|---|" + "---|" * len(summary["levels"])]
        for name in summary["candidates"]:
            lines.append(f"| {markdown_text(name)} | " + " | ".join(_cell(summary["table"][name][level])
                                                                   for level in summary["levels"]) + " |")
    return "\n".join(lines) + "\n"


def levels_figure(summary: Mapping[str, Any]):
    """Score by hierarchy level (root first), one line a candidate; without levels, one point per view."""
    from vertebrae.reports.figures import _pyplot

    levels = summary["levels"] or [v["view"] for v in summary["views"]]
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(max(4.5, 1.3 * len(levels) + 2), 3.8))
    for name in summary["candidates"]:
        values = [summary["table"][name][level] for level in levels]
        ax.plot(range(len(levels)), [float("nan") if v is None else v for v in values], marker="o", label=str(name))
    ax.set_xticks(range(len(levels)), labels=[str(level) for level in levels])
    ax.set_xlabel("hierarchy level (root first)" if summary["levels"] else "view")
    metric = next((v["metric"] for v in summary["views"] if v["view"] == summary["primary"]), None) or "score"
    ax.set_ylabel(str(metric))
    ax.set_title(f"{summary['benchmark']}: score by {'level' if summary['levels'] else 'view'}")
    ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    return fig


def write_views(summary: Mapping[str, Any], json_path: str | Path, markdown_path: str | Path,
                figure_path: str | Path) -> None:
    """The views document, its Markdown and its figure, each written atomically."""
    from vertebrae.core.artifacts import atomic_write
    from vertebrae.reports.figures import _pyplot

    document = {**summary, _HASH: _content_hash(summary)}
    for path, text in ((json_path, json.dumps(document, indent=2, sort_keys=True) + "\n"),
                       (markdown_path, views_markdown(summary))):
        with atomic_write(path) as tmp:
            Path(tmp).write_text(text, encoding="utf-8")
    figure = levels_figure(summary)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=110, metadata={"Software": None})
    _pyplot().close(figure)
    with atomic_write(figure_path) as tmp:
        Path(tmp).write_bytes(buffer.getvalue())


def check_views_file(path: str | Path) -> None:
    """``vertebrae verify`` of a views file: views.json parses, has this schema and matches its content hash;
    views.md is what views.json renders to; views.png is a PNG. CorruptArtifactError naming the file if not."""
    path = Path(path)
    source = path.with_name("views.json")
    try:
        document = json.loads(source.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise CorruptArtifactError(f"{source}: cannot be read as JSON: {exc}", str(path)) from None
    if not isinstance(document, dict) or document.get("schema") != SCHEMA or \
            document.get(_HASH) != _content_hash(document):
        raise CorruptArtifactError(f"{source}: not a {SCHEMA} document matching its content hash", str(path))
    if path.name == "views.md" and path.read_text(encoding="utf-8") != views_markdown(document):
        raise CorruptArtifactError(f"{path}: not what {source} renders to (edited or stale)", str(path))
    if path.name == "views.png" and path.read_bytes()[:8] != b"\x89PNG\r\n\x1a\n":
        raise CorruptArtifactError(f"{path}: not a PNG image", str(path))


__all__ = ["FILES", "SCHEMA", "check_views_file", "levels_figure", "views_markdown", "views_summary", "write_views"]
