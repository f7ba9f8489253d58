"""The leaderboard's formats: the long tidy table as CSV (or a pandas DataFrame, for Parquet), and a page in Markdown
or HTML: the candidates x benchmarks table (score, rank, verdict against the leader), the standings across
benchmarks, head to head, and per benchmark its quality-vs-cost table, the cheapest candidate statistically tied with
the leader and (HTML) a Pareto figure drawn inline as SVG. Every string from a report (benchmark, dataset identity,
candidate and metric names, ``--metric``) is escaped for its format: ``html.escape``, and in Markdown every cell,
heading and line goes through ``vertebrae.reports.text.markdown_text`` (no HTML, link, heading, emphasis, pipe or
line break from data).
"""

from __future__ import annotations

import csv
import html
import io
import math
from collections.abc import Mapping, Sequence
from typing import Any

from vertebrae.reports.across import Across
from vertebrae.reports.leaderboard import (
    COLUMNS,
    DEFAULT_COST,
    Row,
    benchmarks_of,
    cheapest_tied_line,
    pareto_front,
    wide_table,
)
from vertebrae.reports.text import markdown_text

COST_HEADERS = ("embed s / 1k rows", "peak memory (MB)", "dim", "bytes / vector", "score s")


def _fmt(value: Any) -> str:
    if value is None or value == "":
        return ""
    if isinstance(value, float):
        return "n/a" if not math.isfinite(value) else f"{value:.4g}" if abs(value) >= 10 else f"{value:.4f}"
    return str(value)


def _unknown(value: Any) -> str:
    return "unknown" if value is None else _fmt(value)


def leaderboard_csv(rows: Sequence[Row]) -> str:
    """The long table: one line per (benchmark, candidate), the ``Row`` columns in order; empty: unknown."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(COLUMNS)
    for row in rows:
        writer.writerow(["" if v is None else repr(v) if isinstance(v, float) else v for v in row.to_dict().values()])
    return out.getvalue()


def leaderboard_frame(rows: Sequence[Row]):
    """The long table as a pandas DataFrame (None: unknown, as a missing value)."""
    import pandas as pd

    frame = pd.DataFrame([row.to_dict() for row in rows], columns=list(COLUMNS))
    for column in ("rank", "dim", "bytes_per_vector"):
        frame[column] = frame[column].astype("Int64")
    return frame


def leaderboard_json(rows: Sequence[Row], standings: Across) -> str:
    """The long table (one object a row, None for unknown) and the standings across benchmarks, as JSON text."""
    import json

    from vertebrae.core.fingerprint import to_json_value

    document = {"rows": [row.to_dict() for row in rows], "across": standings.to_dict()}
    return json.dumps(to_json_value(document), indent=2, sort_keys=True, allow_nan=False) + "\n"


def _cost_cells(row: Row) -> list[str]:
    embed = row.embed_status if row.cost_text_status("throughput") else _unknown(row.embed_seconds_per_1k_rows)
    return [embed, *(_unknown(v) for v in (row.peak_memory_mb, row.dim, row.bytes_per_vector, row.score_seconds))]


def _sections(rows: Sequence[Row], standings: Across, cost: str) -> list[tuple[str, list[str], list[list[str]], str]]:
    """(title, header, cells, note) of every table of the page, cells as plain text."""
    header, table = wide_table(rows)
    wide = [[_fmt(v) for v in line] for line in table]
    out = [("Candidates x benchmarks", header, wide,
            "Score: the benchmark's metric; verdict: against the benchmark's leader by its paired comparison "
            "(tied: indistinguishable). Scores of different benchmarks are different metrics on different data: "
            "compare ranks.")]
    left = (f"; no interval for {', '.join(standings.left_out)} (not ranked in every benchmark compared)"
            if standings.left_out else "")
    out.append(("Across benchmarks", ["candidate", "benchmarks", "mean rank",
                                      f"{standings.level:.0%} interval (bootstrap over benchmarks)"],
                [[s.candidate, str(s.benchmarks), _fmt(s.mean_rank),
                  "" if s.ci_low is None else f"[{_fmt(s.ci_low)}, {_fmt(s.ci_high)}]"] for s in standings.standings],
                f"{len(standings.compared)} benchmark(s) compared, {standings.resamples} resamples{left}."))
    out.append(("Head to head", ["candidate", "against", "wins", "ties", "losses"],
                [[a, b, str(w), str(t), str(lo)] for (a, b), (w, t, lo) in standings.records.items()],
                "From the per-benchmark paired verdicts (ahead, indistinguishable, behind)."))
    for bench in benchmarks_of(rows):
        mine = [r for r in rows if r.benchmark == bench]
        front = {r.candidate for r in pareto_front(mine, cost)}
        cells = [[r.candidate, _fmt(r.value), _fmt(r.rank) or "unranked", r.verdict, *_cost_cells(r),
                  "yes" if r.candidate in front else ""] for r in mine]
        out.append((f"Quality vs cost: {bench}", ["candidate", mine[0].metric, "rank", "verdict", *COST_HEADERS,
                                                   f"Pareto ({cost})"], cells, cheapest_tied_line(mine, cost)))
    return out


def leaderboard_markdown(rows: Sequence[Row], standings: Across, *, cost: str = DEFAULT_COST,
                         written_by: str | None = None) -> str:
    """The leaderboard as Markdown; ``written_by`` (``vertebrae.core.provenance.software_line()``) ends it."""
    lines = ["# vertebrae leaderboard", "",
             f"{len({r.candidate for r in rows})} candidate(s) in {len(benchmarks_of(rows))} benchmark(s)."]
    for title, header, cells, note in _sections(rows, standings, cost):
        lines += ["", f"## {markdown_text(title)}", "", "| " + " | ".join(markdown_text(h) for h in header) + " |",
                  "|" + "---|" * len(header)]
        lines += ["| " + " | ".join(markdown_text(c) for c in line) + " |" for line in cells]
        lines += ["", markdown_text(note)]
    if written_by is not None:
        lines += ["", markdown_text(written_by)]
    return "\n".join(lines) + "\n"


def pareto_svg(rows: Sequence[Row], cost: str, *, width: int = 420, height: int = 260) -> str:
    """Quality (y) against cost (x) of one benchmark's ranked candidates of known cost; the Pareto front joined by a
    line. Points of equal quality and cost are spread sideways so that none hides another."""
    known = [r for r in rows if r.rank is not None and r.value is not None and r.cost(cost) is not None]
    if not known:
        return f"<p>No Pareto figure: no ranked candidate has a known {html.escape(cost)}.</p>"
    xs, ys = [r.cost(cost) for r in known], [r.value for r in known]
    pad = 40

    def scale(v: float, lo: float, hi: float, size: int, flip: bool) -> float:
        t = 0.5 if hi == lo else (v - lo) / (hi - lo)
        return pad + (1 - t if flip else t) * (size - 2 * pad)

    seen: dict[tuple[float, float], int] = {}
    points = []
    for r, x, y in zip(known, xs, ys):
        k = seen.get((x, y), 0)
        seen[(x, y)] = k + 1
        points.append((r, scale(x, min(xs), max(xs), width, False) + 9 * k, scale(y, min(ys), max(ys), height, True)))
    front = [r.candidate for r in pareto_front(known, cost)]
    line = " ".join(f"{px:.1f},{py:.1f}" for name in front for r, px, py in points if r.candidate == name)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" role="img" '
             f'aria-label="quality against {html.escape(cost)}">',
             f'<line x1="{pad}" y1="{height - pad}" x2="{width - pad}" y2="{height - pad}" stroke="#888"/>',
             f'<line x1="{pad}" y1="{pad}" x2="{pad}" y2="{height - pad}" stroke="#888"/>',
             f'<text x="{width / 2}" y="{height - 8}" text-anchor="middle" font-size="12">{html.escape(cost)} '
             f'(lower is cheaper)</text>',
             f'<text x="12" y="{pad - 12}" font-size="12">{html.escape(known[0].metric)}</text>',
             f'<polyline points="{line}" fill="none" stroke="#c33"/>']
    for r, px, py in points:
        colour = "#c33" if r.candidate in front else "#36c"
        parts.append(f'<circle cx="{px:.1f}" cy="{py:.1f}" r="4" fill="{colour}"><title>{html.escape(r.candidate)}: '
                     f'{_fmt(r.value)}, {html.escape(cost)} {_fmt(r.cost(cost))}</title></circle>'
                     f'<text x="{px + 6:.1f}" y="{py - 6:.1f}" font-size="11">{html.escape(r.candidate)}</text>')
    return "".join(parts) + "</svg>"


# a wide table scrolls inside its box, a figure shrinks to the page and a long name wraps: the page is never wider
# than the screen
STYLE = ("body{font-family:sans-serif;margin:1.5em;max-width:75em}table{border-collapse:collapse;margin:.5em 0}"
         "td,th{border:1px solid #ccc;padding:.2em .5em;text-align:left}th{background:#f2f2f2}"
         "div.table{overflow-x:auto}svg{max-width:100%;height:auto}p,li{overflow-wrap:anywhere}")


def _links(rows: Sequence[Row], links: Mapping[str, Sequence[tuple[str, str]]]) -> str:
    items = []
    for bench in benchmarks_of(rows):
        files = " · ".join(f'<a href="{html.escape(href, quote=True)}">{html.escape(label)}</a>'
                           for label, href in links.get(bench, ()))
        items.append(f"<li>{html.escape(bench)}{': ' + files if files else ''}</li>")
    return "<h2>Benchmarks</h2><ul>" + "".join(items) + "</ul>"


def leaderboard_html(rows: Sequence[Row], standings: Across, *, cost: str = DEFAULT_COST,
                     links: Mapping[str, Sequence[tuple[str, str]]] | None = None, written_by: str | None = None) -> str:
    """The page; ``links``: per benchmark, ``(label, href)`` of its report files (a list of benchmarks heads it);
    ``written_by`` (``vertebrae.core.provenance.software_line()``) its last paragraph."""
    body = [f"<h1>vertebrae leaderboard</h1><p>{len({r.candidate for r in rows})} candidate(s) in "
            f"{len(benchmarks_of(rows))} benchmark(s).</p>", _links(rows, links or {})]
    for title, header, cells, note in _sections(rows, standings, cost):
        body.append(f"<h2>{html.escape(title)}</h2><div class=\"table\"><table><thead><tr>"
                    + "".join(f"<th>{html.escape(h)}</th>" for h in header) + "</tr></thead><tbody>"
                    + "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in line) + "</tr>" for line in cells)
                    + f"</tbody></table></div><p>{html.escape(note)}</p>")
        if title.startswith("Quality vs cost: "):
            bench = title[len("Quality vs cost: "):]
            body.append(pareto_svg([r for r in rows if r.benchmark == bench], cost))
    if written_by is not None:
        body.append(f"<p>{html.escape(written_by)}</p>")
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>vertebrae leaderboard</title>"
            f"<style>{STYLE}</style></head>\n<body>\n" + "\n".join(body) + "\n</body></html>\n")


__all__ = ["leaderboard_csv", "leaderboard_frame", "leaderboard_html", "leaderboard_json", "leaderboard_markdown", "pareto_svg"]
